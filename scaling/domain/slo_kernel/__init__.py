"""The SLO mode's arithmetic, written once, over a candidate dimension.

Every function here is pure numpy. Per-partition quantities are ``(partitions, candidates)``
arrays and per-candidate ones ``(candidates,)`` arrays (a ``partitions`` axis may hold rows that
stand for several partitions, see ``OwnerLoads``). The engine (``engine.py``, ``slo.py``) calls
it with a batch of one candidate, what it reads from the samples; the batched simulator
(``simulation/drivers/batched_slo.py``) and through it the tuning job call it with every candidate of a
sweep. So a rule changes in one place, and the sweep runs the code the live app runs.

The Event Hubs decision itself is assembled here once too (``slo_step``: from the readings and
the state to the wanted count, the direction and a reason code). What stays outside: reading the
samples (de-duplication, ordering, the window, ownership by name), profiles, pause,
reconciliation, and the decision record and its reasons (the engine); the world and the state
arrays (the batched driver). Time is in seconds.

Its rooms: ``arrays`` (a batch of one as plain numbers), ``serving`` (who serves), ``gates``,
``learning``, ``ages`` (rates, ages, the fluid model), ``hub`` (the hub as a whole), ``owners``
(owner loads), ``counts``, ``absorb`` (bursts the backlog carries), ``rebalance`` (how long a moved
partition stands still), ``cadence`` (checkpoints written less often than collect runs), and
``step`` (the decision assembled from them). Callers read every rule here, as ``slo_kernel.name``.

The rules, in the order an evaluation meets them:

- the engine's gates, every mode's (``bounds_correction``, ``cooldown_over``, the action budget:
  ``action_tokens``, ``budget_allows_scale_in``, ``tokens_after_action``), the learned
  per-instance throughput and its confirmation (``learned_throughput``; a drop the interval's
  own readings prove is learned at once: ``corroborated_drop``, ``settled_for_drop``; and let
  go after a while unless readings show it again: ``remembered_drop``, ``let_go``), the
  learned checkpoint delay (``learned_checkpoint_delay``);
- rates and ages from the sequence-number history (``rate_since``, ``later_peaks``,
  ``trend``, ``oldest_event_ages``) and the fluid model's prediction (``predicted_age``);
- each partition's service rate at a count, by its owner's load (``OwnerLoads``, ``sizing.py``
  says why), and the counts: the scale-out that drains (``scale_out_counts``) and the scale-in
  that holds for the dwell (``scale_in_counts``, ``hold_seconds``);
- where the arrivals come in short bursts (``absorb_weight`` of their measured noise), the risk
  test, the scale-out's need and the scale-in's rates move towards what an SLO-long window's
  arrivals and the backlog's own arrival times ask (``absorbed_need``, ``carries``,
  ``absorbed_calm_rates``).
"""

# The kernel's one face: callers read ``slo_kernel.name`` whichever room holds it.
from scaling.domain.slo_kernel.absorb import (  # noqa: F401
    ABSORB_FULL_NOISE,
    BurstHistory,
    SourceAbsorbing,
    absorb_weight,
    absorbed_calm_rates,
    absorbed_need,
    blended,
    bursts_ended,
    carries,
    later_window_peaks,
    window_index,
)
from scaling.domain.slo_kernel.ages import (  # noqa: F401
    TREND_CONFIDENCE,
    age_at_reaction,
    age_path,
    backlog_came_in,
    fifo_hold_seconds,
    head_age,
    keeps_age,
    later_peak,
    later_peaks,
    oldest_event_ages,
    predicted_age,
    rate_since,
    rising_factor,
    trend,
)
from scaling.domain.slo_kernel.arrays import (  # noqa: F401
    _PLAIN,
    NO_RATE,
    is_nan,
    maximum,
    minimum,
    negation,
    where,
)
from scaling.domain.slo_kernel.cadence import (  # noqa: F401
    CADENCE_LEARNING_RATE,
    CADENCE_PROBE,
    CADENCE_SHOWN,
    busy_over_span,
    cadence_ages,
    cadence_allowance,
    cadence_interval,
    cadence_over,
    cadence_readings,
    cadence_span,
    confirms_floor,
    learned_checkpoint_cadence,
    measured_cadence,
    probed_rates,
    since_checkpoint_moved,
)
from scaling.domain.slo_kernel.counts import (  # noqa: F401
    EVERY_COUNT_PAIRS,
    hold_seconds,
    scale_in_counts,
    scale_out_counts,
)
from scaling.domain.slo_kernel.gates import (  # noqa: F401
    ACTION_BUDGET,
    ACTS,
    AT_BOUND,
    COOLDOWN,
    NO_CHANGE,
    PAUSED,
    SCALE_IN_TOKENS,
    SOURCE_FAILED,
    action_tokens,
    bounds_correction,
    budget_allows_scale_in,
    cooldown_over,
    gates,
    tokens_after_action,
)
from scaling.domain.slo_kernel.hub import (  # noqa: F401
    FLAT_TOLERANCE,
    SKEWED_SPREAD,
    STALL_TOLERANCE,
    _per_candidate,
    backlog_flat,
    backlog_growing,
    calm_rates,
    carried_age_limits,
    checkpoints_keep_pace,
    column_sums,
    distinct_shares,
    drain_seconds,
    forecast_rates,
    hot_partitions,
    hub_servable,
    most_instances,
    recovery_counts,
    scale_out_need,
    stalled,
)
from scaling.domain.slo_kernel.learning import (  # noqa: F401
    CHECKPOINT_DELAY_CEILING,
    CHECKPOINT_DELAY_DRIFT,
    CHECKPOINT_DELAY_FOLLOW,
    CHECKPOINT_DELAY_SPARE,
    CHECKPOINT_DELAY_STEADY_CEILING,
    DENSE_EVENTS,
    DROP_GROWTH,
    DROP_MEMORY_SECONDS,
    DROP_SETTLED_DELAYS,
    FLOOR_DOUBT,
    QUEUE_FLOOR_DOUBT,
    STEADY_LAG,
    THROUGHPUT_LEARNING_RATE,
    UNCONFIRMED_DROP,
    arrived_before,
    busy_partitions,
    corroborated_drop,
    delay_clipped,
    dense_arrivals,
    keeping_up,
    learned_checkpoint_delay,
    learned_throughput,
    learning_trail,
    let_go,
    observed_throughput,
    quietest_rate,
    remembered_drop,
    saturation_lag,
    serving_throughput,
    settled_for_drop,
    steady_lags,
)
from scaling.domain.slo_kernel.owners import (  # noqa: F401
    NARROW_COLUMNS,
    NEWCOMER_MARGIN,
    OwnerLoads,
    Owners,
    _columns,
    _owners_of,
    _running_sums,
    per_instance_table,
)
from scaling.domain.slo_kernel.queue import QueueReading, schedule_services  # noqa: F401
from scaling.domain.slo_kernel.rebalance import (  # noqa: F401
    PAUSE_LEARNING_RATE,
    PAUSE_SHOWN,
    interval_readings,
    learned_rebalance_pause,
    moved_stand_still,
    pause_allowance,
    pause_blocks_scale_in,
    paused_age_limit,
    paused_drain_seconds,
    scale_in_ages,
    stand_still_over,
)
from scaling.domain.slo_kernel.serving import (  # noqa: F401
    pending_seconds,
    ready_instances,
    serving_count,
)
from scaling.domain.slo_kernel.step import (  # noqa: F401
    AGE_OVER_LIMIT,
    AT_RISK,
    DOWN,
    GROWING,
    HOLD,
    IN_FLIGHT,
    NO_DATA,
    RATES_UNKNOWN,
    REASONS,
    STALL,
    STEADY,
    STEADY_HOT,
    SURPLUS,
    TOO_FEW_SAMPLES,
    UNKNOWN,
    UNKNOWN_GROWING,
    UNKNOWN_WAITING,
    UNOWNED,
    UP,
    HubReading,
    SourceTests,
    StepCounts,
    StepKnobs,
    StepOutcome,
    StepState,
    slo_step,
)
