"""The policy model of the second target kind, ``eventhubs_namespace``: an Event Hubs Standard
namespace whose throughput units the autoscaler sizes with its consumers
(scaling/domain/namespace/sizing.py says how). Kept apart from policy_model.py, which lists it in
``Policy.namespaces``; the document's shape and its checks only (errors name the field).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Annotated, Literal

from pydantic import Field, model_validator

from scaling.domain.namespace.sizing import STANDARD_MAX_TUS, TuSettings
from scaling.domain.policy_fields import (
    DOCUMENT_CONFIG,
    MAX_SECONDS,
    MAX_TARGETS,
    NUMBER,
    LongText,
    Name,
    document_keys,
    invalid,
)
from scaling.domain.resource_ids import EVENT_HUB, namespace_id_shape, parse_namespace_id

NAMESPACE_KIND = "eventhubs_namespace"
EVENT_HUBS_NAMESPACE_SHAPE = namespace_id_shape(EVENT_HUB)


@dataclass(frozen=True, slots=True)
class NamespaceBounds:
    """The ``bounds`` the scale service clamps to, in TUs (the shape of a plan target's bounds)."""

    min_instances: int
    max_instances: int
    cap_at_partitions: bool = False
    balanced_counts: bool = False


@dataclass(frozen=True, slots=True)
class NamespaceResource:
    """The ``plan`` the scale service writes: here the namespace (its ``sku.capacity``)."""

    resource_id: str


@dataclass(frozen=True, slots=True)
class EventHubsNamespaceTarget:
    """An Event Hubs Standard namespace sized in throughput units, both ways."""

    __pydantic_config__ = DOCUMENT_CONFIG

    name: Annotated[Name, Field(description="identifies the namespace target in samples, decisions and actions "
                                            "(unique among all targets)")]
    resource_id: Annotated[LongText, Field(description=f"the namespace: {EVENT_HUBS_NAMESPACE_SHAPE}")]
    kind: Annotated[Literal["eventhubs_namespace"], Field(description="eventhubs_namespace")] = NAMESPACE_KIND
    min_tus: Annotated[int, Field(ge=1, le=STANDARD_MAX_TUS, description="never fewer throughput units"), NUMBER] = 1
    max_tus: Annotated[int, Field(ge=1, le=STANDARD_MAX_TUS,
        description="never more throughput units (Standard: at most 40)"), NUMBER] = 20
    headroom: Annotated[float, Field(ge=0, le=4,
        description="measured ingress and egress are raised by this fraction before sizing"), NUMBER] = 0.2
    scale_down_hold_seconds: Annotated[int, Field(ge=600, le=MAX_SECONDS,
        description="a lower count must have carried every minute of this long, and TUs must not have gone up "
                    "within it (TUs are billed by the hour)"), NUMBER] = 3600
    scale_down_from_minute: Annotated[int, Field(ge=0, le=59,
        description="a lower count is asked for from this minute of the clock hour on (the hour is billed "
                    "at its highest count already)"), NUMBER] = 50
    spare_tus: Annotated[int, Field(ge=0, le=10,
        description="whole TUs kept above the ingress need besides headroom (a burst at one or two TUs is "
                    "more than a percentage)"), NUMBER] = 1
    ingress_step: Annotated[float, Field(ge=1, le=10,
        description="standing TUs accept this many times the busiest minute's ingress of the scale-down hold: "
                    "a step that size loses no event while the raise it triggers provisions (1: none beyond "
                    "headroom and spare TUs; 4 rejects no more than auto-inflate on a 5x step and costs "
                    "more TU-hours than auto-inflate near a peak)"), NUMBER] = 1.0
    ingress_hold_seconds: Annotated[int, Field(ge=0, le=MAX_SECONDS,
        description="the count is not lowered below the ingress of the busiest minute of this long (0: off, the "
                    "scale-down hold alone): producers returning to a level seen within it lose no event, for TU-hours "
                    "that cost little next to an instance; a level never seen is not protected (ingress_step is)"),
        NUMBER] = 0
    consumer_targets: Annotated[tuple[Name, ...], Field(max_length=MAX_TARGETS,
        description="the targets (App Service Plans) whose consumers read this namespace: their catch-up "
                    "reads size its egress, and they do not scale out while its egress is the bottleneck")] = ()
    on_external_change: Annotated[Literal["adopt", "revert"], Field(
        description="when someone else changed the TUs (auto-inflate, the portal): adopt or revert")] = "adopt"

    _document = document_keys()

    @model_validator(mode="after")
    def _consistent(self) -> EventHubsNamespaceTarget:
        if parse_namespace_id(self.resource_id, EVENT_HUB) is None:
            raise invalid("resource_id", f"must be an Event Hubs namespace resource id ({EVENT_HUBS_NAMESPACE_SHAPE})")
        if self.max_tus < self.min_tus:
            raise invalid("max_tus", "must not be lower than {0}", "min_tus")
        if len(set(self.consumer_targets)) != len(self.consumer_targets):
            raise invalid("consumer_targets", "has duplicate names")
        return self

    @property
    def plan(self) -> NamespaceResource:
        return NamespaceResource(self.resource_id)

    @property
    def bounds(self) -> NamespaceBounds:
        return NamespaceBounds(self.min_tus, self.max_tus)

    @property
    def profiles(self) -> tuple[()]:
        return ()

    @property
    def tu_settings(self) -> TuSettings:
        return TuSettings(self.min_tus, self.max_tus, self.headroom, float(self.scale_down_hold_seconds),
                          self.scale_down_from_minute, self.spare_tus, self.ingress_step,
                          ingress_hold_seconds=float(self.ingress_hold_seconds))
