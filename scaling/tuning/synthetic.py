"""Metric history made with the simulator, for tests, the benchmark and demos.

``simulated_samples`` runs a policy through the simulated hub and plan and keeps the samples
``collect`` would have produced; ``observation_table`` builds the same Parquet rows straight
from the simulator's observations (columnar, no MetricSample objects), fast enough for the
benchmark's 30 days of 8 targets.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from scaling.domain.policy import TargetPolicy
from scaling.domain.samples import MetricSample, sample_id_for
from scaling.simulation.peers.looped import EngineAutoscaler, minute_time
from scaling.simulation.world.loop import Observation, RunResult, Scenario, simulate


def daily_wave(minutes: int, *, low: float, high: float, seed: int = 7, period: int = 1440, noise: float = 0.08) -> np.ndarray:
    """Arrivals per minute: a daily cycle between ``low`` and ``high`` with short bursts and noise."""
    rng = np.random.default_rng(seed)
    t = np.arange(minutes)
    wave = low + (high - low) * 0.5 * (1 - np.cos(2 * np.pi * t / period))
    bursts = np.zeros(minutes)
    for start in rng.integers(0, max(minutes - 30, 1), size=max(minutes // 480, 1)):
        bursts[start:start + 20] += (high - low) * 0.35
    return np.maximum(wave * (1 + noise * rng.standard_normal(minutes)) + bursts, 0.0)


def quiet_then_busy(arrivals: np.ndarray, *, quiet_fraction: float = 0.3, factor: float = 0.2) -> np.ndarray:
    """A trace whose first ``quiet_fraction`` is ``factor`` times as busy as it was, the rest as it
    was: history recorded in a quiet period, then the busy one the policy was not tuned on."""
    quiet = int(len(arrivals) * quiet_fraction)
    shaped = np.asarray(arrivals, dtype=float).copy()
    shaped[:quiet] *= factor
    return shaped


def simulated_samples(arrivals: np.ndarray, scenario: Scenario, target: TargetPolicy) -> tuple[list[MetricSample], RunResult]:
    """The samples ``collect`` would have seen while ``target``'s policy ran on ``arrivals``."""
    samples: list[MetricSample] = []
    autoscaler = EngineAutoscaler(target, on_decision=lambda sample, decision: samples.append(sample))
    result = simulate(arrivals, autoscaler, scenario)
    return samples, result


def observation_table(target: str, observations: Sequence[Observation], source: str = "hub") -> Any:
    """Parquet history rows (``scaling.tuning.history`` schema) for one target's observations."""
    import pyarrow as pa

    from scaling.tuning.history import COLUMNS, arrow_schema

    count = len(observations)
    if not count:
        return arrow_schema().empty_table()
    partitions = len(observations[0].last_enqueued)
    last = np.stack([o.last_enqueued for o in observations]).astype(np.int64)
    checkpoint = np.stack([o.checkpoint for o in observations]).astype(np.int64)
    lag = np.where(checkpoint < 0, last + 1, last - checkpoint)
    backlog = np.where(last < 0, 0, np.maximum(lag, 0))
    times = [minute_time(o.minute) for o in observations]
    ids = [sample_id_for(target, moment) for moment in times]
    stamps = np.array([np.datetime64(moment.replace(tzinfo=None), "us") for moment in times])
    dates = [moment.strftime("%Y-%m-%d") for moment in times]
    capacity = np.array([o.capacity for o in observations], dtype=np.int32)
    repeat = partitions
    columns = {
        "target": pa.array([target] * (count * repeat)),
        "date": pa.array(np.repeat(np.array(dates), repeat)),
        "collected_at": pa.array(np.repeat(stamps, repeat), type=pa.timestamp("us", tz="UTC")),
        "sample_id": pa.array(np.repeat(np.array(ids), repeat)),
        "ok": pa.array(np.ones(count * repeat, dtype=bool)),
        "capacity": pa.array(np.repeat(capacity, repeat), type=pa.int32()),
        "capacity_error": pa.nulls(count * repeat, type=pa.string()),
        "source": pa.array([source] * (count * repeat)),
        "source_kind": pa.array(["eventhub"] * (count * repeat)),
        "source_ok": pa.array(np.ones(count * repeat, dtype=bool)),
        "active_messages": pa.nulls(count * repeat, type=pa.int64()),
        "partition_id": pa.array(np.tile(np.arange(partitions).astype(str), count)),
        "partition_index": pa.array(np.tile(np.arange(partitions, dtype=np.int32), count)),
        "beginning": pa.array(np.zeros(count * repeat, dtype=np.int64)),
        "last_enqueued": pa.array(last.reshape(-1)),
        "checkpoint": pa.array(np.where(checkpoint < 0, -1, checkpoint).reshape(-1), mask=(checkpoint < 0).reshape(-1)),
        "backlog": pa.array(backlog.reshape(-1)),
    }
    return pa.table({name: columns[name] for name in COLUMNS}, schema=arrow_schema())


def write_table(table: Any, out_dir: str) -> int:
    """Append a history table to the dataset at ``out_dir`` (as ``write_history`` does)."""
    import uuid

    import pyarrow.parquet as pq

    from scaling.tuning.history import PARTITION_COLUMNS

    pq.write_to_dataset(table, root_path=str(out_dir), partition_cols=list(PARTITION_COLUMNS),
                        basename_template=f"part-{uuid.uuid4().hex[:12]}-{{i}}.parquet",
                        existing_data_behavior="overwrite_or_ignore")
    return table.num_rows
