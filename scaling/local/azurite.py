"""Start and stop Azurite (the npm package) for tests and the demo.

Ports are picked free on loopback so that a developer's own Azurite (10000-10002) is never
touched; data is kept in memory and the scratch working folder is removed afterwards.
"""

from __future__ import annotations

import os
import shutil
import signal
import socket
import subprocess
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
ACCOUNT = "devstoreaccount1"
# Azurite's published development key: local use only, never a real account.
DEV_KEY = "Eby8vdM02xNOcqFlqUwJPLlmEtlCDXJ1OUzFT50uSRZ6IFsuFq2UVErCz4I6tq/K1SZFPTOtr/KBHBeksoGMGw=="


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def _binary() -> str:
    local = ROOT / "node_modules" / ".bin" / "azurite"
    if local.exists():
        return str(local)
    found = shutil.which("azurite")
    if found:
        return found
    raise RuntimeError("azurite is not installed: run `npm install` in the repository (make does it)")


@dataclass(frozen=True, slots=True)
class AzuriteEndpoints:
    blob_port: int
    queue_port: int
    table_port: int

    @property
    def blob_url(self) -> str:
        return f"http://127.0.0.1:{self.blob_port}/{ACCOUNT}"

    @property
    def queue_url(self) -> str:
        return f"http://127.0.0.1:{self.queue_port}/{ACCOUNT}"

    @property
    def table_url(self) -> str:
        return f"http://127.0.0.1:{self.table_port}/{ACCOUNT}"

    @property
    def connection_string(self) -> str:
        return (
            f"DefaultEndpointsProtocol=http;AccountName={ACCOUNT};AccountKey={DEV_KEY};"
            f"BlobEndpoint={self.blob_url};QueueEndpoint={self.queue_url};TableEndpoint={self.table_url};"
        )


class Azurite:
    """An Azurite process; use as a context manager so it always stops."""

    def __init__(self, location: str | None = None) -> None:
        self._own_location = location is None
        self.location = location or tempfile.mkdtemp(prefix="azurite-")
        self.endpoints = AzuriteEndpoints(_free_port(), _free_port(), _free_port())
        self.process: subprocess.Popen | None = None

    def start(self, timeout: float = 30.0) -> AzuriteEndpoints:
        command = [
            _binary(), "--silent", "--skipApiVersionCheck", "--loose", "--inMemoryPersistence", "--disableTelemetry",
            "--blobHost", "127.0.0.1", "--blobPort", str(self.endpoints.blob_port),
            "--queueHost", "127.0.0.1", "--queuePort", str(self.endpoints.queue_port),
            "--tableHost", "127.0.0.1", "--tablePort", str(self.endpoints.table_port),
        ]
        self.process = subprocess.Popen(
            command, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, start_new_session=True, cwd=self.location
        )
        deadline = time.monotonic() + timeout
        for port in (self.endpoints.blob_port, self.endpoints.queue_port, self.endpoints.table_port):
            while True:
                if self.process.poll() is not None:
                    error = self.process.stderr.read().decode(errors="replace") if self.process.stderr else ""
                    self.stop()
                    raise RuntimeError(f"azurite exited early: {error}")
                try:
                    with socket.create_connection(("127.0.0.1", port), timeout=0.5):
                        break
                except OSError:
                    if time.monotonic() > deadline:
                        self.stop()
                        raise RuntimeError(f"azurite did not listen on port {port} within {timeout}s") from None
                    time.sleep(0.1)
        return self.endpoints

    def restart(self, *, fresh_ports: bool = False, timeout: float = 30.0) -> AzuriteEndpoints:
        """Stop and start again with no data ("storage restarted empty": persistence is in memory),
        on the same ports so that clients and proxies pointing at them reconnect, or on new free
        ports with ``fresh_ports`` (a proxy in front then needs ``retarget``)."""
        self._stop_process()
        if self._own_location:
            shutil.rmtree(self.location, ignore_errors=True)
            self.location = tempfile.mkdtemp(prefix="azurite-")
        if fresh_ports:
            self.endpoints = AzuriteEndpoints(_free_port(), _free_port(), _free_port())
        return self.start(timeout)

    def stop(self) -> None:
        self._stop_process()
        if self._own_location:
            shutil.rmtree(self.location, ignore_errors=True)

    def _stop_process(self) -> None:
        if self.process is not None and self.process.poll() is None:
            os.killpg(self.process.pid, signal.SIGTERM)
            try:
                self.process.wait(timeout=10)
            except subprocess.TimeoutExpired:
                os.killpg(self.process.pid, signal.SIGKILL)
                self.process.wait(timeout=10)
        if self.process is not None and self.process.stderr is not None:
            self.process.stderr.close()
        self.process = None

    @property
    def running(self) -> bool:
        return self.process is not None and self.process.poll() is None

    def __enter__(self) -> AzuriteEndpoints:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()
