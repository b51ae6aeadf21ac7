"""One registry of the autoscaler's knobs: every setting an operator may put in a target's policy
(its document key, default, bounds, what it means and why), the app settings (one value for all
targets), the limits every document and sample is held to, and the internal constants no operator
sets, named with their value and why.

The policy model takes its defaults, bounds and descriptions from ``KNOBS``
(``policy_fields.knob``), so the shipped ``policy.schema.json`` is generated from here, and
docs/policy.md's knob table is ``knobs_table()`` (``python -m scaling policy-schema --knobs``);
tests/unit/test_domain_knobs.py finds the registry, the schema, the table and the internal
constants' modules equal. Plain values only: importing this module costs nothing.
"""

from __future__ import annotations

from dataclasses import dataclass

# --- limits (docs/policy.md, "Bounds"; docs/sample-schema.md) --------------------------------------

#: The most instances any App Service Plan reaches (Elastic Premium burst, Isolated v2 per plan).
MAX_INSTANCES = 100
#: Windows, cooldowns, the SLO and dwell times: one day. Longer ones would need more history
#: than the engine reads and keep a target from acting for days.
MAX_SECONDS = 86_400
#: One sample per minute over the longest window.
MAX_SAMPLES = MAX_SECONDS // 60
#: Provisioning slower than an hour is an outage, not a delay to plan for.
MAX_PROVISIONING_SECONDS = 3_600
#: Sources per target, in the policy and so in a sample (collect reads one per policy source):
#: enough for any real plan, few enough that a decision with every source's numbers fits in one
#: Table entity next to the state. (Samples allowed 64 once: no collector could send more than 10.)
MAX_SOURCES = 10
#: Names the policy gives (targets, sources, rules, profiles), and so the source names a sample
#: carries: a target name is a Table PartitionKey, at most 512 characters once escaped.
MAX_NAME_CHARS = 128
#: Short free text written by an operator in a policy (hub, group, container, namespace names).
MAX_TEXT_CHARS = 256
#: Names a sample carries that Azure or a consumer chose, not the policy (a partition's owner id,
#: an autoscale setting's name, a source kind, an extra key): longer than any policy name may be.
MAX_FOREIGN_NAME_CHARS = 256
#: What a collector reports in a sample's error and notes (an exception's text, the checkpoint
#: layout it found): enough for a stack of causes, bounded so a sample always fits one entity.
MAX_MESSAGE_CHARS = 4_096


@dataclass(frozen=True, slots=True)
class Knob:
    """One operator setting of a target: ``key`` is its path in the target's document.

    ``minimum``/``maximum`` bound it (``above`` makes the minimum exclusive); ``meaning`` is what
    the schema and the docs say it does, ``why`` why its default is what it is."""

    key: str
    default: float | int | bool | str | None
    meaning: str
    why: str
    minimum: float | None = None
    maximum: float | None = None
    above: bool = False

    @property
    def name(self) -> str:
        return self.key.rsplit(".", 1)[-1]

    def bounds_text(self) -> str:
        if self.minimum is None and self.maximum is None:
            return ""
        low = "" if self.minimum is None else f"{'over' if self.above else 'at least'} {_number(self.minimum)}"
        high = "" if self.maximum is None else f"at most {_number(self.maximum)}"
        return ", ".join(part for part in (low, high) if part)


@dataclass(frozen=True, slots=True)
class Constant:
    """A knob no operator sets: tuned once, kept in ``module`` as ``name`` (a test checks the value)."""

    name: str
    value: float
    module: str
    why: str


KNOBS: tuple[Knob, ...] = (
    Knob("bounds.min_instances", 1, "never fewer instances", "one instance keeps the consumers reading",
         1, MAX_INSTANCES),
    Knob("bounds.max_instances", 10, "never more instances", "a cost ceiling an operator raises knowingly",
         1, MAX_INSTANCES),
    Knob("bounds.cap_at_partitions", True, "never more instances than partitions (extra ones would idle)",
         "an Event Hubs partition is read by one instance at a time"),
    Knob("bounds.balanced_counts", True,
         "only counts that spread partitions evenly (default: true, false with preset seed)",
         "uneven counts leave the busiest instance as slow as the next even count"),
    Knob("scale_up.step", 1, "instances added per action", "small steps, evaluated every minute, overshoot least",
         1, MAX_INSTANCES),
    Knob("scale_up.step_percent", None, "or: percent of the current count (at least one instance); not with step",
         "large plans may rather step by a share", 0, 1000, above=True),
    Knob("scale_up.cooldown_seconds", 0, "seconds since the previous action of any direction before a scale-out",
         "a backlog that grows must never wait", 0, MAX_SECONDS),
    Knob("scale_down.step", 1, "instances removed per action", "one at a time: a wrong scale-in costs least",
         1, MAX_INSTANCES),
    Knob("scale_down.step_percent", None, "or: percent of the current count (at least one instance); not with step",
         "large plans may rather step by a share", 0, 1000, above=True),
    Knob("scale_down.cooldown_seconds", 300, "seconds since the previous action of any direction before a scale-in",
         "new instances must be seen serving before the engine judges what they can do", 0, MAX_SECONDS),
    Knob("slo.max_event_age_seconds", 300.0, "the SLO: the oldest unprocessed event stays younger than this",
         "the benchmarks' SLO: an event older than five minutes is a violation minute", 0, MAX_SECONDS, above=True),
    Knob("slo.events_per_instance_per_second", None, "a prior for one instance's throughput (default: learned)",
         "the engine learns the real rate from saturated minutes", 0, 1e9, above=True),
    Knob("slo.provisioning_delay_seconds", 120.0, "how long new instances take to serve",
         "the benchmarks' standard scenario: a scale-out serves 2 minutes later (docs/benchmark-contract.md)",
         0, MAX_PROVISIONING_SECONDS),
    Knob("slo.safety_seconds", 90.0, "margin under the SLO (lower than max_event_age_seconds)",
         "of 30/60/90 s, 60 was cheaper but left WC98's realistic runs with violations (docs/policy-experiments.md)", 0, MAX_SECONDS),
    Knob("slo.min_dwell_seconds", 2400.0, "a scale-in must be expected to hold this long",
         "a scale-in must pay for its rebalance and the one after; tuned among 1200/2400/3600 s (docs/policy-experiments.md)", 0, MAX_SECONDS),
    Knob("slo.headroom", 0.05, "forecast arrivals are raised by this fraction",
         "0 was cheaper but had violation minutes in the realistic scenario (docs/policy-experiments.md)", 0, 10),
    Knob("slo.max_actions_per_hour", 4.0, "action budget (token bucket) for scale-ins",
         "every action rebalances partitions and makes consumers process events twice: scale-outs are never held", 0, 60, above=True),
    Knob("slo.rate_window_seconds", 180.0, "arrival rates are measured over this window",
         "three one-minute collections: one late reading does not swing the rate", 60, MAX_SECONDS),
    Knob("slo.history_seconds", 600.0, "how much history the engine reads",
         "enough for the trend and the scale-in peak window (480 s) without reading yesterday", 120, MAX_SECONDS),
    Knob("slo.scale_in_peak_seconds", 480.0,
         "a scale-in must also hold at the busiest collection interval's arrivals of this last stretch "
         "(0: at the rate window's only; the engine reads no further back than history_seconds)",
         "a lull between bursts is no reason to scale in (docs/policy-experiments.md, the trace family)", 0, MAX_SECONDS),
    Knob("slo.scale_in_peak_full_noise", 0.25,
         "the busiest interval holds a scale-in wholly once the arrivals' measured noise (the spread of the "
         "history's interval rates about their trend, over their mean) reaches this, not at all below half "
         "of it, in proportion between; 0: always wholly",
         "the peak hold pays only on noisy traffic (docs/policy-experiments.md, the trace family)", 0, 10),
    Knob("slo.stall_scale_to_minimum", False,
         "during a stall (more instances did not raise the processed rate while the backlog grows) scale to the "
         "minimum instead of holding the count that was serving (raised, while it goes on, to what the recovery needs)",
         "holding drains the backlog as soon as the consumers recover; the minimum is cheaper while they do not"),
    Knob("rules.metric", "backlog", "backlog (events), backlog_per_instance, or lag_seconds (estimated time to drain)",
         "the backlog is what KEDA's Event Hubs scaler reads too"),
    Knob("rules.aggregate", "average", "how the window's samples are combined",
         "one high reading should not move a plan"),
    Knob("rules.window_seconds", 600, "the window the rule reads, in seconds",
         "ten one-minute samples: a burst shorter than that drains by itself", 60, MAX_SECONDS),
    Knob("rules.min_samples", 5, "samples the window must hold before the rule may act",
         "half the window: a rule never acts on a collector's first minutes", 1, MAX_SAMPLES),
    Knob("on_external_change", "adopt",
         "when someone else resized the plan: adopt (accept the new count and decide from it) "
         "or revert (restore the autoscaler's desired count)",
         "an operator's resize is usually deliberate"),
    Knob("forecast", "off",
         "the look-ahead learned from the target's own arrival history (docs/forecast.md): off, shadow "
         "(logs what it would do, changes no decision) or on (raises the floor before a predicted rise, "
         "holds a scale-in whose next rise comes within the dwell; never scales in)",
         "off until it is measured cheaper on the family and the gate (docs/forecast.md)"),
)

#: The knob of each key.
KNOB = {knob.key: knob for knob in KNOBS}


@dataclass(frozen=True, slots=True)
class AppSetting:
    """A knob of the deployed app rather than of one target: an app setting (``settings.py``)."""

    name: str
    default: float | int | bool
    why: str
    minimum: float | None = None
    maximum: float | None = None


SETTINGS: tuple[AppSetting, ...] = (
    AppSetting("SCALER_DRY_RUN", False, "off: an autoscaler is installed to scale; on to watch its decisions first"),
    AppSetting("HISTORY_RETENTION_DAYS", 30.0, "a month of samples for the report and the tuner", 1 / 24),
    AppSetting("OWNERSHIP_EXPIRY_SECONDS", 60.0, "the Event Hubs SDK's ownership expiry: an older claim is dead", 1),
    AppSetting("COLLECT_CONCURRENCY", 16, "reads in flight per collection: one minute's reads of 100 targets", 1),
    AppSetting("COLLECT_TIMEOUT_SECONDS", 10.0, "a read slower than this fails that source, not the collection", 0.1),
    AppSetting("CLOCK_SKEW_SECONDS", 60.0, "workers' clocks differ by seconds; a sample further ahead is refused",
               0, 600),
    AppSetting("RECONCILE_GRACE_SECONDS", 180.0,
               "one collect interval for the action to travel, one for the plan read, and a minute to spare", 30, 3600),
    AppSetting("EXTERNAL_CHANGES_PER_HOUR", 3,
               "more resizes from outside in an hour mean another controller: hold (0: off)", 0, 60),
)

#: The app setting of each name.
SETTING = {setting.name: setting for setting in SETTINGS}

CONSTANTS: tuple[Constant, ...] = (
    Constant("THROUGHPUT_LEARNING_RATE", 0.3, "scaling.domain.slo_kernel.learning",
             "weight of a new saturated observation in the learned per-instance throughput"),
    Constant("UNCONFIRMED_DROP", 0.2, "scaling.domain.slo_kernel.learning",
             "a lone low reading must be confirmed before it lowers the learned rate, which never recovers"),
    Constant("FLOOR_DOUBT", 0.05, "scaling.domain.slo_kernel.learning",
             "the rate sized by stands at least at the best unsaturated rate shown less this share"),
    Constant("QUEUE_FLOOR_DOUBT", 0.2, "scaling.domain.slo_kernel.learning",
             "... and for a Service Bus queue, whose per-minute completions come late and lumpy"),
    Constant("DROP_SETTLED_DELAYS", 2.0, "scaling.domain.slo_kernel.learning",
             "a drop the interval's readings prove is learned at once only this many checkpoint delays after an action"),
    Constant("DROP_GROWTH", 0.5, "scaling.domain.slo_kernel.learning",
             "... and only where the backlog grew by more than this share of the interval's arrivals"),
    Constant("DROP_MEMORY_SECONDS", 7200.0, "scaling.domain.slo_kernel.learning",
             "a drop learned at once is let go (the rate before it returns) this long after a saturated reading last showed it"),
    Constant("CHECKPOINT_DELAY_DRIFT", 0.5, "scaling.domain.slo_kernel.learning",
             "seconds per evaluation the learned checkpoint delay may creep up while consumers stay saturated"),
    Constant("CHECKPOINT_DELAY_CEILING", 0.25, "scaling.domain.slo_kernel.learning",
             "the learned checkpoint delay never exceeds this fraction of the SLO"),
    Constant("CHECKPOINT_DELAY_FOLLOW", 0.1, "scaling.domain.slo_kernel.learning",
             "while the hub is steady, the learned delay follows an age that stays above it by this share of the gap"),
    Constant("CHECKPOINT_DELAY_STEADY_CEILING", 0.7, "scaling.domain.slo_kernel.learning",
             "how far that following may take the learned delay, as a fraction of the SLO"),
    Constant("CHECKPOINT_DELAY_SPARE", 0.8, "scaling.domain.slo_kernel.learning",
             "the learned delay follows the checkpoints' lag only on owners whose checkpoints moved at most this share of an instance's rate, on a hub whose checkpoints moved at most this share of its live owners' rate"),
    Constant("STEADY_LAG", 0.1, "scaling.domain.slo_kernel.learning",
             "... and only a partition whose checkpoint trails its arrivals by as much, within this share of an interval, as at the reading before"),
    Constant("DENSE_EVENTS", 10.0, "scaling.domain.slo_kernel.learning",
             "events per partition over the checkpoint delay before an age reading may change the learned delay"),
    Constant("PAUSE_LEARNING_RATE", 0.3, "scaling.domain.slo_kernel.rebalance",
             "weight of a new measurement in the learned rebalance pause (a move that stood still for no interval measures 0)"),
    Constant("PAUSE_SHOWN", 0.5, "scaling.domain.slo_kernel.rebalance",
             "a learned rebalance pause counts from this fraction of the collection interval on (under it: a stray "
             "stand-still among moves that showed none)"),
    Constant("CADENCE_LEARNING_RATE", 0.3, "scaling.domain.slo_kernel.cadence",
             "weight of a new measurement in the learned checkpoint cadence (the seconds between a partition's "
             "checkpoint moves)"),
    Constant("CADENCE_SHOWN", 1.5, "scaling.domain.slo_kernel.cadence",
             "collection intervals a learned checkpoint cadence must reach before ages are read less the time since "
             "each checkpoint moved and the throughput over as long a span (checkpoints every interval: as before)"),
    Constant("CADENCE_PROBE", 1.85, "scaling.domain.slo_kernel.cadence",
             "where the throughput is a lower bound under a checkpoint cadence, a scale-in is sized at this many times "
             "the floor (no count that keeps up could raise it); a scale-out from it confirms the floor"),
    Constant("STALL_TOLERANCE", 0.1, "scaling.domain.slo_kernel.hub",
             "the processed rate may rise this much with more instances and still count as a stall"),
    Constant("FLAT_TOLERANCE", 0.1, "scaling.domain.slo_kernel.hub",
             "intervals' arrivals the backlog may move over the rate window and still count as flat"),
    Constant("SKEWED_SPREAD", 2.0, "scaling.domain.slo_kernel.hub",
             "times the mean partition's forecast the busiest one's must be before partitions near one instance "
             "scale out before they queue"),
    Constant("TREND_CONFIDENCE", 1.0, "scaling.domain.slo_kernel.ages",
             "standard errors of its slope a rise must clear to count as a trend (noise holds no capacity)"),
    Constant("NEWCOMER_MARGIN", 0.75, "scaling.domain.slo_kernel.owners",
             "a newcomer's load between the mean draw (0) and the k heaviest partitions (1)"),
    Constant("SCALE_IN_TOKENS", 2.0, "scaling.domain.slo_kernel.gates",
             "tokens a scale-in takes from the budget: itself and the scale-out likely to follow"),
    Constant("RATE_STEADY_SECONDS", 420.0, "scaling.domain.slo_queue",
             "Azure Monitor is 1-3 minutes late and new instances serve up to 4 minutes after they are asked "
             "for: completions teach throughput only at a count held this long"),
)

LIMITS: tuple[Constant, ...] = tuple(
    Constant(name, float(globals()[name]), __name__, why) for name, why in (
        ("MAX_INSTANCES", "the most instances an App Service Plan reaches"),
        ("MAX_SECONDS", "windows, cooldowns, the SLO: at most one day of history is read"),
        ("MAX_SAMPLES", "one sample a minute over the longest window"),
        ("MAX_PROVISIONING_SECONDS", "slower provisioning is an outage"),
        ("MAX_SOURCES", "sources per target, in a policy and a sample: a decision fits one Table entity"),
        ("MAX_NAME_CHARS", "names the policy gives: a target name is a Table key"),
        ("MAX_TEXT_CHARS", "an operator's short text in a policy"),
        ("MAX_FOREIGN_NAME_CHARS", "names in a sample that Azure or a consumer chose"),
        ("MAX_MESSAGE_CHARS", "a collector's error and notes in a sample"),
    ))

TABLE_BEGIN = "<!-- knobs: generated by `python -m scaling policy-schema --knobs`; do not edit -->"
TABLE_END = "<!-- knobs: end -->"


def _number(value: float | int) -> str:
    if isinstance(value, float) and value.is_integer() and abs(value) < 1e6:
        value = int(value)
    return f"{value:,}" if isinstance(value, int) and not isinstance(value, bool) else f"{value:g}"


def _default(value: object) -> str:
    if value is None:
        return "–"
    if isinstance(value, bool):
        return f"`{str(value).lower()}`"
    if isinstance(value, int | float):
        return _number(value)
    return f"`{value}`"


def _range(minimum: float | None, maximum: float | None) -> str:
    parts = ([] if minimum is None else [f"at least {_number(minimum)}"]) + \
        ([] if maximum is None else [f"at most {_number(maximum)}"])
    return ", ".join(parts) or "–"


def knobs_table() -> str:
    """docs/policy.md's knob table, between its markers (a test compares the two)."""
    lines = [TABLE_BEGIN, "", "| key | default | allowed | why this default |", "|---|---|---|---|"]
    lines += [f"| `{knob.key}` | {_default(knob.default)} | {knob.bounds_text() or '–'} | {knob.why} |"
              for knob in KNOBS]
    lines += ["", "App settings (one value for every target; docs/deploy.md):", "",
              "| setting | default | allowed | why this default |", "|---|---|---|---|"]
    lines += [f"| `{item.name}` | {_default(item.default)} | {_range(item.minimum, item.maximum)} | {item.why} |"
              for item in SETTINGS]
    lines += ["", "Limits that policies and samples share (`domain/knobs.py`, each defined once):", "",
              "| limit | value | why |", "|---|---|---|"]
    lines += [f"| `{item.name}` | {_number(item.value)} | {item.why} |" for item in LIMITS]
    lines += ["", "Internal constants (no operator sets them; tuned on the benchmarks):", "",
              "| constant | value | module | why |", "|---|---|---|---|"]
    lines += [f"| `{item.name}` | {_number(item.value)} | `{item.module}` | {item.why} |" for item in CONSTANTS]
    return "\n".join([*lines, "", TABLE_END]) + "\n"
