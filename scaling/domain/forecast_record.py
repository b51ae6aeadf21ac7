"""A target's stored look-ahead profile: what ``forecast.forecast`` found in its history,
kept compact between hourly refits. Plain values, no numpy: the storage records import it at the
Function App's start, where numpy must not be loaded yet (``forecast.py`` converts)."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta

#: A stored profile older than this is refit (after the evaluation that finds it so).
REFIT_EVERY = timedelta(hours=1)


@dataclass(frozen=True, slots=True)
class SeasonalIndex:
    """One period's multiplicative index (``forecast.Seasonal``): ``index[(minute % period) // resolution]``."""

    period: int
    resolution: int
    index: tuple[float, ...]


@dataclass(frozen=True, slots=True)
class StoredProfile:
    """The fitted profile of one target. Minute 0 of its indices is ``origin`` (the history's first
    minute), so that a moment's phase is its whole minutes since ``origin``."""

    target: str
    fitted_at: datetime
    origin: datetime
    history_minutes: int
    trusted: bool
    reasons: tuple[str, ...] = ()
    periods: tuple[int, ...] = ()
    seasonals: tuple[SeasonalIndex, ...] = ()
    error: float | None = None
    persistence_error: float | None = None

    def minute_of(self, moment: datetime) -> int:
        """The whole minutes from ``origin`` to ``moment`` (the profile's minute index)."""
        return int((moment - self.origin) // timedelta(minutes=1))

    def stale(self, now: datetime) -> bool:
        return now - self.fitted_at >= REFIT_EVERY
