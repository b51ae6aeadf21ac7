"""Headless Chromium (Debian's ``chromium``) driven over the DevTools protocol on loopback.

Only ``websocket-client`` is needed: the browser is started with ``--remote-debugging-port=0``,
the port it picked is read from ``DevToolsActivePort`` in its fresh profile, and one page target
is driven with ``Page``/``Runtime``/``Log`` commands. Console errors, uncaught exceptions and
error log entries are collected while the page loads.
"""

from __future__ import annotations

import base64
import json
import shutil
import subprocess
import tempfile
import time
import urllib.request
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

FLAGS = ("--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
         "--disable-background-networking", "--disable-component-update", "--disable-sync",
         "--disable-default-apps", "--disable-extensions", "--mute-audio", "--hide-scrollbars",
         "--remote-debugging-address=127.0.0.1", "--remote-debugging-port=0")


def chromium_binary() -> str | None:
    return shutil.which("chromium") or shutil.which("chromium-browser")


@dataclass
class PageErrors:
    """What the page reported as errors while loading."""

    console: list[str] = field(default_factory=list)
    exceptions: list[str] = field(default_factory=list)
    log: list[str] = field(default_factory=list)

    def all(self) -> list[str]:
        return [*self.console, *self.exceptions, *self.log]

    def clear(self) -> None:
        self.console.clear()
        self.exceptions.clear()
        self.log.clear()


class Chromium:
    """One headless browser with one page; use as a context manager so the process always ends."""

    def __init__(self, binary: str | None = None, *, width: int = 1400, height: int = 1200, timeout: float = 60.0) -> None:
        self.binary = binary or chromium_binary()
        if not self.binary:
            raise RuntimeError("chromium is not installed (make installs it: apt-get install chromium)")
        self.width, self.height, self.timeout = width, height, timeout
        self.profile = tempfile.mkdtemp(prefix="chromium-profile-")
        self.process: subprocess.Popen | None = None
        self.socket: Any = None
        self.errors = PageErrors()
        self._next_id = 0

    def __enter__(self) -> Chromium:
        import websocket

        self.process = subprocess.Popen(
            [self.binary, *FLAGS, f"--user-data-dir={self.profile}", f"--window-size={self.width},{self.height}",
             "about:blank"],
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True)
        port_file = Path(self.profile) / "DevToolsActivePort"
        deadline = time.monotonic() + self.timeout
        while not (port_file.exists() and port_file.read_text().strip()):
            if self.process.poll() is not None or time.monotonic() > deadline:
                self.__exit__()
                raise RuntimeError("chromium did not open its DevTools port")
            time.sleep(0.1)
        port = int(port_file.read_text().split()[0])
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/json/list", timeout=10) as reply:  # noqa: S310 (loopback)
            pages = [target for target in json.load(reply) if target.get("type") == "page"]
        self.socket = websocket.create_connection(pages[0]["webSocketDebuggerUrl"], timeout=self.timeout,
                                                  suppress_origin=True)
        for domain in ("Page", "Runtime", "Log"):
            self.send(f"{domain}.enable")
        self.send("Emulation.setDeviceMetricsOverride", width=self.width, height=self.height, deviceScaleFactor=1,
                  mobile=False)
        return self

    def __exit__(self, *exc: object) -> None:
        if self.socket is not None:
            self.socket.close()
            self.socket = None
        if self.process is not None and self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()
        shutil.rmtree(self.profile, ignore_errors=True)

    # --- the protocol ----------------------------------------------------------------------------

    def _record(self, message: dict[str, Any]) -> None:
        method, params = message.get("method"), message.get("params") or {}
        if method == "Runtime.consoleAPICalled" and params.get("type") in ("error", "assert"):
            self.errors.console.append(" ".join(str(arg.get("value", arg.get("description", ""))) for arg in params.get("args", [])))
        elif method == "Runtime.exceptionThrown":
            details = params.get("exceptionDetails") or {}
            self.errors.exceptions.append(str((details.get("exception") or {}).get("description") or details.get("text")))
        elif method == "Log.entryAdded" and (params.get("entry") or {}).get("level") == "error":
            entry = params["entry"]
            self.errors.log.append(f"{entry.get('source')}: {entry.get('text')} {entry.get('url', '')}".strip())

    def send(self, method: str, **params: Any) -> dict[str, Any]:
        self._next_id += 1
        command_id = self._next_id
        self.socket.send(json.dumps({"id": command_id, "method": method, "params": params}))
        while True:
            message = json.loads(self.socket.recv())
            if message.get("id") == command_id:
                if "error" in message:
                    raise RuntimeError(f"{method}: {message['error']}")
                return message.get("result") or {}
            self._record(message)

    def wait_for_event(self, method: str) -> dict[str, Any]:
        deadline = time.monotonic() + self.timeout
        while time.monotonic() < deadline:
            message = json.loads(self.socket.recv())
            self._record(message)
            if message.get("method") == method:
                return message.get("params") or {}
        raise TimeoutError(method)

    # --- what the tests use --------------------------------------------------------------------------

    def open(self, url: str) -> None:
        """Navigate and wait for the load event."""
        self.send("Page.navigate", url=url)
        self.wait_for_event("Page.loadEventFired")

    def evaluate(self, expression: str) -> Any:
        result = self.send("Runtime.evaluate", expression=expression, returnByValue=True, awaitPromise=True)
        if "exceptionDetails" in result:
            raise RuntimeError(f"{expression[:80]}: {result['exceptionDetails']}")
        return (result.get("result") or {}).get("value")

    def wait_until(self, expression: str) -> None:
        deadline = time.monotonic() + self.timeout
        while not self.evaluate(expression):
            if time.monotonic() > deadline:
                raise TimeoutError(expression)
            time.sleep(0.1)

    def drain_events(self, seconds: float = 0.5) -> None:
        """Read pending events (late console errors) for a moment."""
        self.socket.settimeout(0.1)
        deadline = time.monotonic() + seconds
        try:
            while time.monotonic() < deadline:
                try:
                    self._record(json.loads(self.socket.recv()))
                except Exception:  # noqa: BLE001 (a receive timeout: nothing pending)
                    continue
        finally:
            self.socket.settimeout(self.timeout)

    def screenshot(self, path: Path, *, full_page: bool = False) -> Path:
        params: dict[str, Any] = {"format": "png"}
        if full_page:
            params["captureBeyondViewport"] = True
            size = self.evaluate("[document.documentElement.scrollWidth, document.documentElement.scrollHeight]")
            params["clip"] = {"x": 0, "y": 0, "width": size[0], "height": size[1], "scale": 1}
        data = self.send("Page.captureScreenshot", **params)["data"]
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(base64.b64decode(data))
        return path
