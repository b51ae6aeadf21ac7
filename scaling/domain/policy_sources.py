"""The policy model's resources: what a target reads (``SourceSettings``: an Event Hub or a
Service Bus queue or subscription, KEDA's field names accepted) and what it resizes
(``PlanSettings``: an App Service Plan)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Annotated, Literal

from pydantic import AliasChoices, Field, model_validator

from scaling.domain.policy_fields import (
    DOCUMENT_CONFIG,
    KEDA_ALIASES,
    MAX_EVENTS,
    NUMBER,
    LongText,
    Name,
    Text,
    document_keys,
    invalid,
)
from scaling.domain.resource_ids import SERVICE_BUS, NamespaceId, namespace_id_shape, parse_namespace_id


def _alias(name: str) -> AliasChoices:
    return AliasChoices(name, KEDA_ALIASES[name])


SERVICE_BUS_NAMESPACE = "/providers/microsoft.servicebus/namespaces/"
NAMESPACE_ID_SHAPE = namespace_id_shape(SERVICE_BUS)


@dataclass(frozen=True, slots=True)
class SourceSettings:
    """One metric source. Field names are KEDA's azure-eventhub trigger's, in snake_case; KEDA's
    camelCase spelling is accepted as an alias."""

    __pydantic_config__ = DOCUMENT_CONFIG

    kind: Annotated[Literal["eventhub", "servicebus"], Field(description="eventhub or servicebus")] = "eventhub"
    name: Annotated[Name, Field(description="unique within the target (default: sourceN by position)")] = ""
    fully_qualified_namespace: Annotated[Text | None, Field(validation_alias=_alias("fully_qualified_namespace"),
        description="NAMESPACE.servicebus.windows.net (identity-based); or connection_from_env")] = None
    event_hub_name: Annotated[Text | None, Field(validation_alias=_alias("event_hub_name"),
        description="the hub (eventhub sources)")] = None
    consumer_group: Annotated[Text, Field(validation_alias=_alias("consumer_group"),
        description="the consumers' group")] = "$Default"
    checkpoint_strategy: Annotated[Literal["auto", "blobMetadata", "azureFunction"], Field(
        validation_alias=_alias("checkpoint_strategy"),
        description="checkpoint layout: auto (found in the container), blobMetadata (current SDKs, Functions v5+) "
                    "or azureFunction (legacy JSON blobs)")] = "auto"
    blob_container: Annotated[Text, Field(validation_alias=_alias("blob_container"),
        description="the checkpoint container")] = "azure-webjobs-eventhub"
    checkpoint_account_url: Annotated[LongText | None, Field(validation_alias=_alias("checkpoint_account_url"),
        description="https://ACCOUNT.blob.core.windows.net (identity-based); or storage_connection_from_env")] = None
    connection_from_env: Annotated[Text | None, Field(validation_alias=_alias("connection_from_env"),
        description="app setting holding an Event Hubs / Service Bus connection string (local use)")] = None
    storage_connection_from_env: Annotated[Text | None, Field(validation_alias=_alias("storage_connection_from_env"),
        description="app setting holding the checkpoint storage connection string (local use)")] = None
    unprocessed_event_threshold: Annotated[int, Field(ge=1, le=MAX_EVENTS, validation_alias=_alias("unprocessed_event_threshold"),
        description="KEDA's per-instance target; informational for the SLO mode"), NUMBER] = 64
    activation_unprocessed_event_threshold: Annotated[int, Field(ge=0, le=MAX_EVENTS,
        validation_alias=_alias("activation_unprocessed_event_threshold"), description="KEDA's activation threshold"), NUMBER] = 0
    queue_name: Annotated[Text | None, Field(validation_alias=_alias("queue_name"), description="Service Bus queue")] = None
    topic_name: Annotated[Text | None, Field(validation_alias=_alias("topic_name"),
        description="Service Bus topic (with subscription_name)")] = None
    subscription_name: Annotated[Text | None, Field(validation_alias=_alias("subscription_name"),
        description="Service Bus subscription")] = None
    metrics_resource_id: Annotated[LongText | None, Field(validation_alias=_alias("metrics_resource_id"),
        description="the Service Bus namespace's resource id (/subscriptions/…/providers/Microsoft.ServiceBus/namespaces/"
                    "NAME): where mode slo reads the queue's arrival and completion rates from Azure Monitor")] = None
    namespace_resource_id: Annotated[LongText | None, Field(validation_alias=_alias("namespace_resource_id"),
        description="the Service Bus namespace's resource id (/subscriptions/…/resourceGroups/…/providers/"
                    "Microsoft.ServiceBus/namespaces/NAME): where the active message count is read, from the "
                    "management plane with a reader role (default: metrics_resource_id; required with identity)")] = None

    _document = document_keys()

    @property
    def service_bus_namespace(self) -> NamespaceId | None:
        """The namespace whose management plane gives this source's counts: ``namespace_resource_id``,
        else ``metrics_resource_id`` (the same namespace); ``None`` when neither is a namespace id."""
        return parse_namespace_id(self.namespace_resource_id or self.metrics_resource_id, SERVICE_BUS)

    @model_validator(mode="after")
    def _complete(self) -> SourceSettings:
        if self.kind == "eventhub":
            if not self.event_hub_name:
                raise invalid("event_hub_name", "is required for an eventhub source")
            if not self.fully_qualified_namespace and not self.connection_from_env:
                raise invalid("fully_qualified_namespace", "or {0} is required for an eventhub source", "connection_from_env")
            if not self.checkpoint_account_url and not self.storage_connection_from_env:
                raise invalid("checkpoint_account_url", "or {0} is required for an eventhub source",
                              "storage_connection_from_env")
            return self
        if not (self.fully_qualified_namespace or self.connection_from_env or self.namespace_resource_id
                or self.service_bus_namespace):
            raise invalid("fully_qualified_namespace", "or {0} is required for a servicebus source", "connection_from_env")
        if self.queue_name and self.metrics_resource_id and not self.fully_qualified_namespace and not self.connection_from_env:
            raise invalid("fully_qualified_namespace", "is required to peek the queue's oldest message (with {0}), "
                                                       "or {1} (local use)", "metrics_resource_id", "connection_from_env")
        if bool(self.queue_name) == bool(self.topic_name):
            raise invalid("queue_name", ": set either {0} or {1} with {2}", "queue_name", "topic_name", "subscription_name")
        if self.topic_name and not self.subscription_name:
            raise invalid("subscription_name", "is required with {0}", "topic_name")
        if self.metrics_resource_id and SERVICE_BUS_NAMESPACE not in self.metrics_resource_id.lower():
            raise invalid("metrics_resource_id", "must be a Service Bus namespace resource id "
                                                 "(.../providers/Microsoft.ServiceBus/namespaces/NAME)")
        self._check_namespace_id()
        return self

    def _check_namespace_id(self) -> None:
        """Counts come from the management plane (a reader role, not Data Owner), which needs the
        namespace's subscription and resource group: required with identity. Only a source that
        reads with a connection string (local use) may go without, and keeps the data-plane count."""
        namespace = parse_namespace_id(self.namespace_resource_id, SERVICE_BUS)
        if self.namespace_resource_id and namespace is None:
            raise invalid("namespace_resource_id", f"must be a Service Bus namespace resource id ({NAMESPACE_ID_SHAPE})")
        if namespace and self.metrics_resource_id:
            metrics = parse_namespace_id(self.metrics_resource_id, SERVICE_BUS)
            if metrics is None or metrics.resource_id.lower() != namespace.resource_id.lower():
                raise invalid("metrics_resource_id", "must name the same namespace as {0}", "namespace_resource_id")
        if self.connection_from_env:
            return
        counted = self.service_bus_namespace
        if counted is None:
            raise invalid("namespace_resource_id", f"is required for a servicebus source read with identity ({NAMESPACE_ID_SHAPE}: "
                                                   "its counts are read from the management plane); or {0} (local use)",
                          "connection_from_env")
        label = (self.fully_qualified_namespace or "").split(".", 1)[0]
        if label and label.lower() != counted.name.lower():
            field_name = "namespace_resource_id" if self.namespace_resource_id else "metrics_resource_id"
            raise invalid(field_name, f"names namespace {counted.name!r}, but {{0}} is {self.fully_qualified_namespace!r}",
                          "fully_qualified_namespace")


@dataclass(frozen=True, slots=True)
class PlanSettings:
    """The App Service Plan a target resizes."""

    __pydantic_config__ = DOCUMENT_CONFIG

    resource_id: Annotated[LongText, Field(
        description="/subscriptions/…/resourceGroups/…/providers/Microsoft.Web/serverfarms/NAME")]
    kind: Annotated[Literal["dedicated", "elastic"], Field(
        description="dedicated (sets sku.capacity) or elastic (Elastic Premium worker count)")] = "dedicated"

    _document = document_keys()

    @model_validator(mode="after")
    def _is_a_plan(self) -> PlanSettings:
        if "/providers/microsoft.web/serverfarms/" not in self.resource_id.lower():
            raise invalid("resource_id", "must be an App Service Plan resource id (.../providers/Microsoft.Web/serverfarms/NAME)")
        return self

    @property
    def resource_group(self) -> str:
        return _resource_id_part(self.resource_id, "resourcegroups")

    @property
    def name(self) -> str:
        return self.resource_id.rstrip("/").rsplit("/", 1)[-1]

    @property
    def subscription_id(self) -> str:
        return _resource_id_part(self.resource_id, "subscriptions")


def _resource_id_part(resource_id: str, key: str) -> str:
    parts = resource_id.strip("/").split("/")
    for index, part in enumerate(parts[:-1]):
        if part.lower() == key:
            return parts[index + 1]
    return ""
