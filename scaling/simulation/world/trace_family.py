"""A seeded family of synthetic arrival traces that no rule can be fitted to.

Two public traces are too few to choose rules by: a rule tuned to WC98 (3% minute-to-minute
noise) and NASA (28%) cost 16% on a third trace. The family spans the shapes real consumer
traffic takes, each at five seeds and five noise levels, so that a rule that pays on one shape
only shows up as a loss on another. Pure numpy: a member is a function of its name.

Every member is 14 days at one-minute resolution (``FAMILY_MINUTES``), the product of

- a **base**: a daily cycle (two harmonics, the trough at a random hour, amplitude drawn per
  seed) and a weekly one (weekend days at 50-90% of weekdays);
- a **shape** multiplier (``SHAPES``):

  - ``diurnal``: none, the base alone;
  - ``bursts``: a two-state Markov chain (on/off) per minute: on periods with a mean of 10-60
    minutes at 2-4x, off periods with a mean of 1-6 hours;
  - ``flash``: 2-4 flash crowds, each rising to 5-20x the level before it over 5-30 minutes
    (a smooth ramp), then decaying exponentially with a time constant of 1-4 hours;
  - ``growth``: slow exponential growth by 2-4x over the 14 days;
  - ``steps``: the level held at values in 0.35-2.5x, changing at once (up or down) every
    0.5-2.5 days;
  - ``spikes``: about one spike every 3 hours, 1-5 minutes long, its height Pareto-distributed
    (tail index 1.5, at least +50%, at most 15x);

- a multiplicative **minute noise**, independent per minute (gamma-distributed, mean 1), whose
  level ``noise`` is the mean absolute minute-to-minute change over the mean that it gives a
  smooth base (the measure behind "WC98 3%, NASA 28%": ``regimes.traffic_shape``'s burstiness).
  The five seeds of a shape take the five levels of ``NOISE_LEVELS`` (2% to 35%), so that every
  noise level meets every shape.

Then the whole trace is scaled as the benchmark scales a public trace (``world.scale_trace``):
its busiest minute needs ``PEAK_INSTANCES`` (24) instances of 1,000 events a minute.

An opt-in set (``BURST_SHAPES``), outside ``SHAPES`` so that the gated family and its
baseline stay as they are, asked for by name (``burst_family_names``):

  - ``microbursts``: bursts of 1-3 minutes (shorter than the SLO) every few minutes, their height
    scaled so that the trace's ``burstiness`` (mean absolute minute-to-minute change over the
    mean) is the level in the name, 35% to 120% (``BURST_NOISE_LEVELS``);
  - ``onoff``: the load switching at once between 5-20% and the full level, on for minutes, off
    for tens of minutes;
  - ``clock``: a jump to 3-6x at the same minute of every period (``CLOCK_PERIODS``: 10 minutes,
    30, an hour, 4 hours, a day, by seed), decaying with a time constant of 5-15% of the period
    (a minute to an hour).

A member's name says its shape, seed and noise level: ``flash-seed3-noise10``. The draws come
from a generator seeded by the shape's name and the seed only, so a member is the same on every
machine and in every run, and adding a shape does not change the others.
"""

from __future__ import annotations

import math
import re
import zlib
from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np

DAY_MINUTES = 1440
FAMILY_DAYS = 14
FAMILY_MINUTES = FAMILY_DAYS * DAY_MINUTES
#: The busiest minute needs this many instances of ``EVENTS_PER_INSTANCE`` (the standard scenario's scaling).
PEAK_INSTANCES = 24
EVENTS_PER_INSTANCE = 1000.0
SEEDS = (1, 2, 3, 4, 5)
#: Minute-to-minute noise (mean absolute change over the mean) of seeds 1..5: WC98 is near the
#: first, the issue's unseen trace near the fourth's neighbour, NASA near the last.
NOISE_LEVELS = (0.02, 0.05, 0.10, 0.20, 0.35)
#: The prefix that tells the benchmark a trace is a family member, not a file.
FAMILY_PREFIX = "family/"
_NAME = re.compile(r"^(?P<shape>[a-z]+)-seed(?P<seed>\d+)-noise(?P<noise>\d+)$")
#: The opt-in set's short bursts: the minute-to-minute change (``burstiness``, the mean
#: absolute change over the mean) of seeds 1..5, from 35% to beyond 100%.
BURST_NOISE_LEVELS = (0.35, 0.50, 0.70, 0.90, 1.20)
#: The opt-in ``clock`` shape's period per seed: ten minutes to a day.
CLOCK_PERIODS = (10, 30, 60, 240, 1440)


@dataclass(frozen=True, slots=True)
class Event:
    """Something a shape put into a member, so that tests can check the shape's claim."""

    kind: str  # "flash", "step", "spike", "on"
    start: int  # minute
    #: flash: minutes to the peak; step: minutes held; spike: minutes long; on: minutes on.
    length: int
    #: flash: peak factor over the level before; step: the new level; spike: peak factor.
    factor: float
    #: flash: decay time constant in minutes; otherwise 0.
    decay: float = 0.0


@dataclass(frozen=True, slots=True)
class Member:
    """One generated trace with what it was made of: ``arrivals = scale * base * shape * noise``."""

    name: str
    shape: str
    seed: int
    noise_level: float
    arrivals: np.ndarray = field(repr=False)
    base: np.ndarray = field(repr=False)
    multiplier: np.ndarray = field(repr=False)
    noise: np.ndarray = field(repr=False)
    events: tuple[Event, ...] = ()
    #: The shape's own parameters (growth factor, burst multiplier, ...), for tests and docs.
    parameters: tuple[tuple[str, float], ...] = ()


def member_name(shape: str, seed: int, noise_level: float | None = None) -> str:
    """``shape-seedN-noiseNN``; the noise level defaults to the seed's (``NOISE_LEVELS``, or
    ``BURST_NOISE_LEVELS`` for ``microbursts``)."""
    level = noise_for_seed(seed, shape) if noise_level is None else noise_level
    return f"{shape}-seed{seed}-noise{round(level * 100):02d}"


def noise_for_seed(seed: int, shape: str = "") -> float:
    """The noise level of a seed: seeds 1..5 take ``NOISE_LEVELS`` in order (``BURST_NOISE_LEVELS``
    for ``microbursts``), later ones cycle."""
    levels = BURST_NOISE_LEVELS if shape == "microbursts" else NOISE_LEVELS
    return levels[(seed - 1) % len(levels)]


def parse_name(name: str) -> tuple[str, int, float]:
    """(shape, seed, noise level) of a member's name; a ``ValueError`` naming what is wrong."""
    match = _NAME.match(name.removeprefix(FAMILY_PREFIX))
    if not match or match["shape"] not in ALL_SHAPES:
        raise ValueError(f"{name!r} is not a family member: expected SHAPE-seedN-noiseNN with SHAPE one of "
                         f"{', '.join(ALL_SHAPES)}")
    return match["shape"], int(match["seed"]), int(match["noise"]) / 100


def family_names(shapes: tuple[str, ...] | None = None, seeds: tuple[int, ...] = SEEDS) -> list[str]:
    """Every member's name: each shape at each seed (with the seed's noise level). Without
    ``shapes``, the gated family's (``SHAPES``) only: the opt-in set is asked for by name."""
    return [member_name(shape, seed) for shape in (shapes or tuple(SHAPES)) for seed in seeds]


def burst_family_names(seeds: tuple[int, ...] = SEEDS) -> list[str]:
    """The opt-in set (``BURST_SHAPES``): bursts shorter than the SLO, on/off bursts,
    load that jumps on a clock."""
    return family_names(tuple(BURST_SHAPES), seeds)


def is_member(trace: str) -> bool:
    """Whether a benchmark trace names a family member (``family/NAME``) rather than a file."""
    return trace.startswith(FAMILY_PREFIX)


def generate(name: str, minutes: int = FAMILY_MINUTES) -> Member:
    """The member ``name`` (with or without the ``family/`` prefix): deterministic per name."""
    shape, seed, noise_level = parse_name(name)
    if not 0 <= noise_level < (2 if shape == "microbursts" else 1):
        raise ValueError(f"{name!r}: noise level must be below {'200' if shape == 'microbursts' else '100'}%")
    rng = np.random.default_rng([zlib.crc32(shape.encode()), seed])
    base = seasonality(minutes, rng)
    if shape in BURST_SHAPES:
        multiplier, noise, events, parameters = BURST_SHAPES[shape](minutes, rng, base, noise_level, seed)
    else:
        multiplier, events, parameters = SHAPES[shape](minutes, rng)
        noise = minute_noise(minutes, noise_level, rng)
    raw = base * multiplier * noise
    scale = PEAK_INSTANCES * EVENTS_PER_INSTANCE / raw.max()
    return Member(name=name.removeprefix(FAMILY_PREFIX), shape=shape, seed=seed, noise_level=noise_level,
                  arrivals=raw * scale, base=base, multiplier=multiplier, noise=noise, events=tuple(events),
                  parameters=tuple(parameters))


def arrivals(name: str) -> np.ndarray:
    """Only the member's per-minute arrivals (what the benchmark replays)."""
    return generate(name).arrivals


def seasonality(minutes: int, rng: np.random.Generator) -> np.ndarray:
    """Daily cycle (two harmonics, random phase and depth) times a weekly one (weekends lower)."""
    t = np.arange(minutes) / DAY_MINUTES
    phase = rng.uniform(0, 1)
    first, second = rng.uniform(0.35, 0.7), rng.uniform(0.05, 0.2)
    daily = 1 + first * np.cos(2 * np.pi * (t - phase)) + second * np.cos(4 * np.pi * (t - phase) + rng.uniform(0, 2 * np.pi))
    daily = np.maximum(daily, 0.1)
    weekend_level = rng.uniform(0.5, 0.9)
    first_weekend = int(rng.integers(0, 7))
    weekday = (np.floor(t).astype(np.int64) - first_weekend) % 7
    weekly = np.where(weekday < 2, weekend_level, 1.0)
    # A weekend starts and ends over an hour, not in one minute (no step the shape did not ask for).
    ramp = np.convolve(np.pad(weekly, (30, 29), mode="edge"), np.ones(60) / 60, mode="valid")
    return daily * ramp


def minute_noise(minutes: int, level: float, rng: np.random.Generator) -> np.ndarray:
    """Independent multiplicative noise, mean 1, whose mean absolute minute-to-minute change is
    ``level``: for independent noise of standard deviation s that change is 2 s / sqrt(pi)."""
    if level <= 0:
        return np.ones(minutes)
    spread = level * math.sqrt(math.pi) / 2
    shape = 1 / spread**2
    return rng.gamma(shape, 1 / shape, size=minutes)


#: Independent noise of standard deviation s gives minute-to-minute changes of mean 2 s / sqrt(pi)
#: and median 0.6745 * sqrt(2) * s: the factor from the median to the mean.
_MEDIAN_TO_MEAN_CHANGE = (2 / math.sqrt(math.pi)) / (0.6745 * math.sqrt(2))


def measured_noise(counts: np.ndarray) -> float:
    """A trace's minute-to-minute noise as ``noise`` levels are defined (mean absolute change over
    the level), measured robustly: from the median relative change between neighbouring minutes,
    which bursts, steps, spikes and crowds (rare minutes) barely move."""
    counts = np.asarray(counts, dtype=float)
    middle = (counts[1:] + counts[:-1]) / 2
    changes = np.abs(np.diff(counts))[middle > 0] / middle[middle > 0]
    return float(np.median(changes) * _MEDIAN_TO_MEAN_CHANGE) if len(changes) else 0.0


Shape = Callable[[int, np.random.Generator], tuple[np.ndarray, list[Event], list[tuple[str, float]]]]


def _diurnal(minutes: int, rng: np.random.Generator):
    return np.ones(minutes), [], []


def _bursts(minutes: int, rng: np.random.Generator):
    """Markov-modulated on/off: geometric on and off periods, the on state at a fixed multiple."""
    on_mean, off_mean, high = rng.uniform(10, 60), rng.uniform(60, 360), rng.uniform(2, 4)
    multiplier = np.ones(minutes)
    events = []
    minute, on = int(rng.integers(0, 360)), True
    while minute < minutes:
        length = int(rng.geometric(1 / (on_mean if on else off_mean)))
        if on:
            multiplier[minute:minute + length] = high
            events.append(Event("on", minute, min(length, minutes - minute), high))
        minute += length
        on = not on
    return multiplier, events, [("on_mean_minutes", on_mean), ("off_mean_minutes", off_mean), ("on_factor", high)]


def _flash(minutes: int, rng: np.random.Generator):
    """Flash crowds: a smooth rise to ``factor`` times the level over 5-30 minutes, exponential decay."""
    count = int(rng.integers(2, 5))
    # Spread over the fortnight, on even days (a crowd has decayed before the next), none on the first two.
    slots = 2 * np.sort(rng.choice(np.arange(1, FAMILY_DAYS // 2), size=count, replace=False))
    multiplier = np.ones(minutes)
    events = []
    t = np.arange(minutes, dtype=float)
    for day in slots:
        start = int(day * DAY_MINUTES + rng.integers(0, DAY_MINUTES))
        if start >= minutes:
            continue
        factor, rise, decay = rng.uniform(5, 20), int(rng.integers(5, 31)), rng.uniform(60, 240)
        since = t - start
        extra = np.where(since < 0, 0.0,
                         np.where(since < rise, (1 - np.cos(np.pi * since / rise)) / 2, np.exp(-(since - rise) / decay)))
        multiplier += (factor - 1) * extra
        events.append(Event("flash", start, rise, factor, decay))
    return multiplier, events, [("crowds", float(len(events)))]


def _growth(minutes: int, rng: np.random.Generator):
    """Slow growth: exponential, by 2-4x over the 14 days (a service gaining users)."""
    total = rng.uniform(2, 4)
    return np.power(total, np.arange(minutes) / FAMILY_MINUTES), [], [("growth_factor", total)]


def _steps(minutes: int, rng: np.random.Generator):
    """Held steps: the level jumps (in one minute) to a new value and holds it for 0.5-2.5 days."""
    multiplier = np.ones(minutes)
    events = []
    minute, level = int(rng.integers(DAY_MINUTES // 2, DAY_MINUTES)), 1.0
    while minute < minutes:
        held = int(rng.integers(DAY_MINUTES // 2, 5 * DAY_MINUTES // 2))
        # Every step moves by at least 40% of the level (no step that noise could hide).
        while True:
            new = float(np.exp(rng.uniform(np.log(0.35), np.log(2.5))))
            if abs(np.log(new / level)) >= np.log(1.4):
                break
        level = new
        multiplier[minute:minute + held] = level
        events.append(Event("step", minute, min(held, minutes - minute), level))
        minute += held
    return multiplier, events, []


#: The Pareto tail index of spike heights (a finite mean, an infinite variance: heavy-tailed).
SPIKE_TAIL = 1.5


def _spikes(minutes: int, rng: np.random.Generator):
    """Heavy-tailed spikes: Poisson arrivals (one every 3 hours on average), 1-5 minutes long,
    peak factor 1 + 0.5 * Pareto(1.5) capped at 15."""
    count = int(rng.poisson(minutes / 180))
    starts = np.sort(rng.integers(0, minutes, size=count))
    multiplier = np.ones(minutes)
    events = []
    for start in starts:
        length = int(rng.integers(1, 6))
        factor = float(min(1 + 0.5 * (rng.pareto(SPIKE_TAIL) + 1), 15.0))
        multiplier[start:start + length] = np.maximum(multiplier[start:start + length], factor)
        events.append(Event("spike", int(start), length, factor))
    return multiplier, events, []


#: Every shape, by name: ``(minutes, rng) -> (multiplier, events, parameters)``.
SHAPES: dict[str, Shape] = {"diurnal": _diurnal, "bursts": _bursts, "flash": _flash, "growth": _growth,
                            "steps": _steps, "spikes": _spikes}


# --- the opt-in set: bursts and repeats --------------------------------------------------------
#
# Not in ``SHAPES``: the gated family (and so the gate's baseline) is unchanged; these members are
# asked for by name (``burst_family_names``, ``family/microbursts-seed1-noise35``).

#: The minute noise under the opt-in shapes' bursts (``microbursts``: the floor under the level
#: the name asks for).
BURST_FLOOR_NOISE = 0.05


def burstiness(counts: np.ndarray) -> float:
    """The mean absolute minute-to-minute change over the mean (``regimes.traffic_shape``'s
    burstiness, the issue's "per-minute noise"): bursts count, unlike ``measured_noise``."""
    counts = np.asarray(counts, dtype=float)
    mean = float(counts.mean()) if len(counts) else 0.0
    return float(np.abs(np.diff(counts)).mean() / mean) if mean > 0 and len(counts) > 1 else 0.0


def _microbursts(minutes: int, rng: np.random.Generator, base: np.ndarray, level: float, seed: int):
    """Bursts of 1-3 minutes (shorter than a 5-minute SLO) every 3-10 minutes on average, their
    heights lognormal; every height is then scaled by one factor, found by bisection, so that the
    trace's ``burstiness`` is the level in its name (35% to beyond 100%). A change of more than 2
    / (mean burst length) per minute needs more bursts than that, of one minute mostly: above 50%
    the gaps shorten and one-minute bursts grow commoner with the level (else the busiest minute
    would be many times the mean and the mean under one instance)."""
    beyond = max(0.0, level - 0.5)
    gap_mean = rng.uniform(3, 10) / (1 + 4 * beyond)
    single = min(0.85, 0.5 + 0.5 * beyond)
    starts, minute = [], int(rng.integers(0, 5))
    while minute < minutes:
        starts.append(minute)
        minute += 1 + int(rng.geometric(min(1.0, 1 / gap_mean)))
    lengths = rng.choice((1, 2, 3), size=len(starts), p=(single, (1 - single) * 0.6, (1 - single) * 0.4))
    heights = rng.lognormal(0.0, 0.3, size=len(starts))
    pattern = np.zeros(minutes)
    for start, length, height in zip(starts, lengths, heights, strict=True):
        pattern[start:start + length] = np.maximum(pattern[start:start + length], height)
    noise = minute_noise(minutes, BURST_FLOOR_NOISE, rng)
    low, high = 0.0, 1000.0
    if burstiness(base * (1 + high * pattern) * noise) < level:
        raise ValueError(f"microbursts-seed{seed}: no burst height reaches burstiness {level:.2f}")
    for _ in range(60):
        middle = (low + high) / 2
        low, high = (middle, high) if burstiness(base * (1 + middle * pattern) * noise) < level else (low, middle)
    factor = (low + high) / 2
    events = [Event("burst", int(start), int(length), float(1 + factor * height))
              for start, length, height in zip(starts, lengths, heights, strict=True)]
    return 1 + factor * pattern, noise, events, [("gap_mean_minutes", gap_mean), ("height_factor", factor)]


def _onoff(minutes: int, rng: np.random.Generator, base: np.ndarray, level: float, seed: int):
    """On/off bursts: the load switches at once between an off level (5-20% of the base) and the
    base, on for 3-20 minutes and off for 5-60 on average (geometric lengths). The means are drawn
    log-uniformly within the seed's fifth of each range (the on and off fifths in different
    orders), so that five seeds span both ranges."""
    band = (seed - 1) % 5
    on_mean = _in_band(rng, 3, 20, band)
    off_mean = _in_band(rng, 5, 60, (2 * band + 1) % 5)
    off_level = rng.uniform(0.05, 0.2)
    multiplier = np.full(minutes, off_level)
    events = []
    minute, on = int(rng.integers(0, 30)), True
    while minute < minutes:
        length = int(rng.geometric(1 / (on_mean if on else off_mean)))
        if on:
            multiplier[minute:minute + length] = 1.0
            events.append(Event("on", minute, min(length, minutes - minute), 1 / off_level))
        minute += length
        on = not on
    return (multiplier, minute_noise(minutes, level, rng), events,
            [("on_mean_minutes", on_mean), ("off_mean_minutes", off_mean), ("off_level", off_level)])


def _in_band(rng: np.random.Generator, low: float, high: float, band: int, bands: int = 5) -> float:
    """A log-uniform draw within the ``band``-th of ``bands`` equal log-slices of ``[low, high]``."""
    width = (math.log(high) - math.log(low)) / bands
    return float(math.exp(math.log(low) + width * (band + rng.uniform(0, 1))))


def _clock(minutes: int, rng: np.random.Generator, base: np.ndarray, level: float, seed: int):
    """Load that jumps on a clock (batch jobs, cron): at the same minute of every period
    (``CLOCK_PERIODS``: 10 minutes to a day, by seed) it jumps to 3-6x and decays exponentially with
    a time constant of 5-15% of the period (at least a minute, at most an hour)."""
    period = CLOCK_PERIODS[(seed - 1) % len(CLOCK_PERIODS)]
    offset, factor = int(rng.integers(0, period)), rng.uniform(3, 6)
    decay = float(np.clip(rng.uniform(0.05, 0.15) * period, 1.0, 60.0))
    since = (np.arange(minutes) - offset) % period
    multiplier = 1 + (factor - 1) * np.exp(-since / decay)
    multiplier[:offset] = 1.0  # nothing before the first jump
    events = [Event("jump", start, period, factor, decay) for start in range(offset, minutes, period)]
    return (multiplier, minute_noise(minutes, level, rng), events,
            [("period_minutes", float(period)), ("offset_minutes", float(offset)), ("jump_factor", factor),
             ("decay_minutes", decay)])


BurstShape = Callable[[int, np.random.Generator, np.ndarray, float, int],
                      tuple[np.ndarray, np.ndarray, list[Event], list[tuple[str, float]]]]

#: The opt-in shapes: ``(minutes, rng, base, noise level, seed) -> (multiplier, noise, events,
#: parameters)`` (a shape may make its own noise: ``microbursts`` is measured on its bursts).
BURST_SHAPES: dict[str, BurstShape] = {"microbursts": _microbursts, "onoff": _onoff, "clock": _clock}
#: Every shape a name may ask for.
ALL_SHAPES: tuple[str, ...] = (*SHAPES, *BURST_SHAPES)
