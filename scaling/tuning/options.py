"""What the tuning job is asked to do (``TuneOptions``, the command line in ``job.py``) and the error
for input it cannot use at all.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

GRIDS = ("small", "medium", "large")


class TuneError(Exception):
    """Input the job cannot use at all (no history, unreadable policy); the message says why."""


@dataclass(frozen=True, slots=True)
class TuneOptions:
    history: str
    out: str
    report: str | None = None
    grid: str = "large"
    master: str | None = None
    policy: str | None = None
    train_fraction: float = 0.4
    folds: int = 3
    targets: tuple[str, ...] = ()
    steady_minutes: int | None = None
    min_saturated_minutes: int = 3
    tasks_per_core: int = 3
    app_name: str = "scaling-tune"
    #: The job's clock: samples dated more than the clock skew after it are from the future
    #: (``None``: the machine's clock).
    now: datetime | None = None
