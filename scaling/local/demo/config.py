"""What one demo run is: its options and result, the constants of the local world (plan, hub,
settings names), the demo's policy and the app settings the functions read.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from scaling.simulation.world.traces import WORLDCUP98

ROOT = Path(__file__).resolve().parents[3]
DEFAULT_TRACE = WORLDCUP98
#: WC98 1998-06-10 from 10:00 UTC to midnight: the morning rise, the opening match's surge to about
#: ten times the night's rate (peak 17:26), the evening matches and the decline. Three to four
#: minutes on a 2-core machine; ``--start 0 --minutes 1440`` runs the whole day.
DEFAULT_START = 600
DEFAULT_MINUTES = 840
TARGET_NAME = "demo"
SUBSCRIPTION = "00000000-0000-0000-0000-000000000000"
PLAN_ID = f"/subscriptions/{SUBSCRIPTION}/resourceGroups/demo/providers/Microsoft.Web/serverfarms/demo-consumers"
#: IsolatedV2 allows 100 instances, so the SKU never clamps below the policy's 32.
PLAN_TIER = "IsolatedV2"
EVENTHUB_SETTING = "DEMO_EVENTHUB_CONNECTION"
CHECKPOINT_SETTING = "DEMO_CHECKPOINT_STORAGE"
SERVICEBUS_SETTING = "DEMO_SERVICEBUS_CONNECTION"
SOURCES = ("eventhub", "servicebus")


@dataclass(frozen=True, slots=True)
class DemoOptions:
    trace: Path = DEFAULT_TRACE
    minutes: int | None = DEFAULT_MINUTES
    start: int = DEFAULT_START
    speed: float = 0.0
    policy: Path | None = None
    out: Path = Path("out")
    live: bool = True
    #: The simulated world (``Scenario``); ``None``: the standard scenario.
    scenario: Any = None
    #: eventhub (a simulated partitioned hub) or servicebus (a simulated queue, the SLO mode on a queue)
    source: str = "eventhub"


@dataclass
class DemoResult:
    summary: dict[str, Any]
    simulated: dict[str, Any]
    differences: list[str]
    decisions: list[Any]
    files: dict[str, Path]
    invocations: dict[str, int]
    failures: dict[str, int]
    poison: dict[str, int]
    plan_writes: int
    checkpoint_writes: int
    capacity: Any = field(repr=False, default=None)
    phase_seconds: dict[str, float] = field(default_factory=dict)
    wall_seconds: float = 0.0
    azurite_ports: tuple[int, ...] = ()
    #: Service Bus count reads (GETs of the queue) the local ARM endpoint answered (queue demo).
    count_reads: int = 0

    @property
    def agrees(self) -> bool:
        return not self.differences

    def milliseconds_per_minute(self) -> dict[str, float]:
        """Wall time per simulated minute, by phase of the loop."""
        minutes = max(int(self.summary.get("minutes", 0)), 1)
        return {phase: round(seconds * 1000 / minutes, 1) for phase, seconds in self.phase_seconds.items()}


class DemoError(ValueError):
    """A problem with the demo's options (trace, window, policy file)."""


def default_policy_document(partitions: int = 32, source: str = "eventhub") -> dict[str, Any]:
    """The default policy: one target in SLO mode, bounds shaped like the hub (as ``simulated_target``),
    or over the simulated queue (every count from 1 to ``partitions``: consumers compete, no partitions)."""
    from scaling.local.simhub import CHECKPOINT_CONTAINER, EVENT_HUB
    from scaling.local.simqueue import NAMESPACE_ID, QUEUE_NAME

    if source == "servicebus":
        return {"version": 1, "targets": [{
            "name": TARGET_NAME,
            "plan": {"resource_id": PLAN_ID},
            "sources": [{"kind": "servicebus", "name": "queue", "queueName": QUEUE_NAME,
                         "connectionFromEnv": SERVICEBUS_SETTING, "metricsResourceId": NAMESPACE_ID}],
            "bounds": {"min_instances": 1, "max_instances": partitions, "balanced_counts": False},
            "mode": "slo",
        }]}
    if source != "eventhub":
        raise DemoError(f"--source {source!r}: choose one of {', '.join(SOURCES)}")
    return {"version": 1, "targets": [{
        "name": TARGET_NAME,
        "plan": {"resource_id": PLAN_ID},
        "sources": [{"kind": "eventhub", "name": "hub", "eventHubName": EVENT_HUB, "consumerGroup": "$Default",
                     "connectionFromEnv": EVENTHUB_SETTING, "storageConnectionFromEnv": CHECKPOINT_SETTING,
                     "checkpointStrategy": "blobMetadata", "blobContainer": CHECKPOINT_CONTAINER}],
        "bounds": {"min_instances": 1, "max_instances": partitions, "balanced_counts": True},
        "mode": "slo",
    }]}


def demo_target(policy_file: Path | None = None, *, partitions: int = 32, source: str = "eventhub") -> Any:
    """The demo's target: the default one, or the policy file's first target on the demo's plan and
    hub (or queue)."""
    from scaling.domain.policy import PolicyError, load_policy, policy_from_dict

    default = policy_from_dict(default_policy_document(partitions, source)).targets[0]
    if policy_file is None:
        return default
    try:
        chosen = load_policy(policy_file).targets[0]
    except (OSError, PolicyError) as error:
        raise DemoError(f"--policy {policy_file}: {error}") from error
    names = {item.name for item in chosen.sources}
    rules = tuple(replace(rule, source=None) if rule.source in names else rule for rule in chosen.rules)
    try:
        return replace(chosen, plan=default.plan, sources=default.sources, rules=rules)
    except ValueError as error:
        raise DemoError(f"--policy {policy_file}: its first target cannot run on the demo's {source} source: {error}") from None


def fake_eventhub_connection() -> str:
    """The connection-string setting the source names: its namespace names the checkpoint blobs.
    No Event Hubs client is built from it: the simulated hub is the partition source (no Event
    Hubs emulator runs here), passed to ``collector_for`` as ``partition_source_for``."""
    from scaling.local.simhub import EVENT_HUB, NAMESPACE

    return f"Endpoint=sb://{NAMESPACE}/;SharedAccessKeyName=demo;SharedAccessKey=local-demo-placeholder;EntityPath={EVENT_HUB}"


def fake_servicebus_connection() -> str:
    """The connection-string setting the queue source names. No Service Bus client is built from it:
    the simulated queue replaces the peek and Azure Monitor (``peek_and_rates_for``), and the count
    goes through the management client to the local ARM endpoint (the namespace is the source's
    ``metricsResourceId``)."""
    from scaling.local.simqueue import NAMESPACE

    return f"Endpoint=sb://{NAMESPACE}/;SharedAccessKeyName=demo;SharedAccessKey=local-demo-placeholder"


def app_settings_for(target: Any, storage_connection: str, arm_endpoint: str) -> dict[str, str]:
    """The Function App's application settings for the demo (what local.settings.json would hold)."""
    from scaling.domain.policy import Policy, policy_to_dict
    from scaling.settings import DEFAULT_SCHEDULE, STORAGE_SETTING

    return {
        "FUNCTIONS_WORKER_RUNTIME": "python",
        STORAGE_SETTING: storage_connection,
        "AUTOSCALER_POLICY": json.dumps(policy_to_dict(Policy((target,)))),
        "COLLECT_SCHEDULE": DEFAULT_SCHEDULE,
        "ARM_ENDPOINT": arm_endpoint,
        "SCALER_DRY_RUN": "false",
        CHECKPOINT_SETTING: storage_connection,
        EVENTHUB_SETTING: fake_eventhub_connection(),
        SERVICEBUS_SETTING: fake_servicebus_connection(),
    }
