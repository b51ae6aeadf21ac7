"""What the demo shows on the terminal: the live progress bar and decision table while it runs,
and the summary at the end (demo vs simulate, invocations, timings).
"""

from __future__ import annotations

import math
import shutil
import time
from typing import Any, TextIO

from scaling.local.demo.config import DemoOptions, DemoResult
from scaling.local.demo.reference import TOLERANCE


def _fmt(value: Any, digits: int = 0) -> str:
    if value is None:
        return "-"
    if isinstance(value, float):
        return f"{value:,.{digits}f}"
    if isinstance(value, int):
        return f"{value:,}"
    return str(value)


class LiveDisplay:
    """A progress bar and a live table of decisions, plain text (``\\r`` on a terminal, lines otherwise)."""

    COLUMNS = (("time", 11), ("arrivals/s", 10), ("backlog", 9), ("age s", 6), ("capacity", 9), ("decision", 8))

    def __init__(self, stream: TextIO, total: int, *, enabled: bool = True, width: int = 28) -> None:
        self.stream = stream
        self.total = max(total, 1)
        self.enabled = enabled
        self.width = width
        self.tty = bool(getattr(stream, "isatty", lambda: False)())
        # On a terminal, lines fit its width (a wrapped progress line cannot be redrawn with \r).
        self.columns = shutil.get_terminal_size((160, 24)).columns if self.tty else 200
        self.started = time.monotonic()
        self._bar_shown = False
        self._next_report = 0.0

    def _clear_bar(self) -> None:
        if self.tty and self._bar_shown:
            self.stream.write("\r\033[K")
            self._bar_shown = False

    def header(self) -> None:
        if not self.enabled:
            return
        cells = "  ".join(name.rjust(width) if index else name.ljust(width)
                          for index, (name, width) in enumerate(self.COLUMNS))
        self.stream.write(f"{cells}  reason\n")
        self.stream.write("  ".join("-" * width for _, width in self.COLUMNS) + "  " + "-" * 30 + "\n")

    def decision(self, record: Any, clock: Any, world: Any) -> None:
        if not self.enabled:
            return
        metrics = record.metrics or {}
        capacity = (f"{record.capacity_before} -> {record.capacity_after}" if record.acts
                    else _fmt(record.capacity_before))
        reason = record.reason_code + (f": {record.reasons[0]}" if record.reasons else "")
        if record.outcome and record.acts:
            reason += f" [{record.outcome}]"
        cells = (record.evaluated_at.strftime("%m-%d %H:%M"), _fmt(metrics.get("arrival_rate"), 1),
                 _fmt(metrics.get("backlog")), _fmt(metrics.get("oldest_age_seconds"), 0), capacity,
                 record.direction if record.acts else "hold")
        line = "  ".join(cell.rjust(width) if index else cell.ljust(width)
                         for index, (cell, (_, width)) in enumerate(zip(cells, self.COLUMNS, strict=True)))
        self._clear_bar()
        room = max(self.columns - len(line) - 3, 30)
        self.stream.write(f"{line}  {reason if len(reason) <= room else reason[:room - 1] + '…'}\n")

    def progress(self, world: Any, clock: Any) -> None:
        if not self.enabled:
            return
        done = world.minute
        fraction = done / self.total
        if not self.tty and fraction < self._next_report and done < self.total:
            return
        self._next_report = math.floor(fraction * 10 + 1e-9) / 10 + 0.1
        elapsed = time.monotonic() - self.started
        remaining = elapsed / fraction - elapsed if fraction > 0 else 0.0
        filled = int(round(fraction * self.width))
        bar = "#" * filled + "." * (self.width - filled)
        minute = min(done, self.total) - 1
        line = (f"[{bar}] {fraction:4.0%} {done}/{self.total} min  {clock().strftime('%m-%d %H:%M')}  "
                f"capacity {world.requested} (serving {world.serving_series[minute]})  "
                f"backlog {world.backlog_series[minute]:,.0f}  {elapsed:.0f}s elapsed, ~{remaining:.0f}s left")
        if self.tty:
            self.stream.write("\r\033[K" + line[: self.columns - 1])
            self._bar_shown = True
        else:
            self.stream.write(line + "\n")
        self.stream.flush()

    def done(self) -> None:
        if self.enabled and self.tty and self._bar_shown:
            self.stream.write("\n")
            self._bar_shown = False
        self.stream.flush()


def print_summary(result: DemoResult, options: DemoOptions, out: TextIO) -> None:
    demo, simulated = result.summary, result.simulated
    rows = [
        ("cost (instance-minutes)", _fmt(demo["cost"], 0), _fmt(simulated["cost"], 0)),
        ("fluid lower bound", _fmt(demo["fluid_lower_bound"], 1), _fmt(simulated["fluid_lower_bound"], 1)),
        ("cost / fluid lower bound", f"{demo['cost_ratio']:.4f}", f"{simulated['cost_ratio']:.4f}"),
        ("SLO-violation minutes", str(demo["slo_violation_minutes"]), str(simulated["slo_violation_minutes"])),
        ("scale actions", str(demo["scale_actions"]), str(simulated["scale_actions"])),
        ("p99 / max oldest age (min)", f"{demo['p99_age_minutes']:.2f} / {demo['max_age_minutes']:.2f}",
         f"{simulated['p99_age_minutes']:.2f} / {simulated['max_age_minutes']:.2f}"),
        ("final backlog (events)", _fmt(demo["final_backlog"], 0), _fmt(simulated["final_backlog"], 0)),
    ]
    out.write(f"\nsummary: {demo['minutes']} simulated minutes of {options.trace} from minute {options.start}, "
              f"{result.wall_seconds:.0f} s wall time\n")
    out.write(f"  {'':28}{'demo (functions + Azurite)':>28}{'simulate (no storage)':>24}\n")
    for name, left, right in rows:
        out.write(f"  {name:28}{left:>28}{right:>24}\n")
    verdict = "agree" if result.agrees else "DISAGREE: " + "; ".join(result.differences)
    out.write(f"  cross-check with `python -m scaling simulate`: {verdict} ({TOLERANCE.describe()})\n")
    invocations = ", ".join(f"{name} {count}" for name, count in sorted(result.invocations.items()))
    failures = sum(result.failures.values())
    poisoned = sum(result.poison.values())
    out.write(f"  function invocations: {invocations}; failures {failures}; "
              f"poison messages {poisoned}\n")
    actions = sum(1 for record in result.decisions if record.acts)
    reads = f"; Service Bus count reads through ARM: {result.count_reads}" if result.count_reads else ""
    out.write(f"  decision log: {len(result.decisions)} rows ({actions} actions); plan writes through ARM: "
              f"{result.plan_writes}; checkpoint blob writes: {result.checkpoint_writes:,}{reads}\n")
    phases = ", ".join(f"{phase} {ms:.0f}" for phase, ms in result.milliseconds_per_minute().items() if phase != "world")
    out.write(f"  wall time per simulated minute (ms): {phases}\n")
    out.write("  files: " + ", ".join(str(path) for path in result.files.values()) + "\n")
