"""checkpointStrategy auto, the pure part: which prefixes are listed, which layout is chosen, and
the one-line note (including what is there instead when nothing matches). Real blobs: Azurite,
tests/integration/test_collect_layouts.py."""

from __future__ import annotations

import asyncio
import json
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from scaling.domain.policy import policy_from_dict
from scaling.sources.base import CallGate
from scaling.sources.checkpoints import (
    AutoCheckpointReader,
    AzureFunctionCheckpointReader,
    BlobMetadataCheckpointReader,
    checkpoint_reader_for,
)
from scaling.sources.layouts import (
    AZURE_FUNCTION,
    BLOB_METADATA,
    CheckpointLocation,
    LayoutFinding,
    LayoutPresence,
    describe_near_misses,
    detect_layout,
    listing_prefixes,
)

T0 = datetime(2026, 11, 1, 8, 0, tzinfo=UTC)
LOCATION = CheckpointLocation("Orders-NS.servicebus.windows.net", "Orders-Hub", "$Default")
LOWER = "orders-ns.servicebus.windows.net/orders-hub/$default/"
WRITTEN = "Orders-NS.servicebus.windows.net/Orders-Hub/$Default/"


@dataclass(frozen=True, slots=True)
class Blob:
    name: str
    last_modified: datetime | None = None


def current(pid: str, at: datetime | None = T0, segment: str = "checkpoint", prefix: str = LOWER) -> Blob:
    return Blob(f"{prefix}{segment}/{pid}", at)


def legacy(pid: str, at: datetime | None = T0, prefix: str = WRITTEN) -> Blob:
    return Blob(f"{prefix}{pid}", at)


@pytest.mark.parametrize(
    ("location", "prefixes"),
    [
        pytest.param(CheckpointLocation("ns", "hub", "audit"), ("ns/hub/audit/",), id="all-lower-one-listing"),
        pytest.param(CheckpointLocation("ns", "hub", "$Default"), ("ns/hub/$",), id="only-the-group-has-capitals-one-listing"),
        pytest.param(CheckpointLocation("ns", "hub", "Default"), ("ns/hub/",), id="group-starts-with-a-capital-lists-the-hub"),
        pytest.param(CheckpointLocation("ns", "Hub", "$Default"), ("ns/hub/$default/", "ns/Hub/$Default/"), id="hub-capitals-two"),
        pytest.param(LOCATION, (LOWER, WRITTEN), id="namespace-capitals-two"),
    ],
)
def test_listing_prefixes_cover_both_spellings_without_listing_more_than_the_hub(location, prefixes):
    assert listing_prefixes(location) == prefixes


@pytest.mark.parametrize(
    ("blobs", "layout", "present"),
    [
        pytest.param([current("0"), current("1"), current("0", segment="ownership")], BLOB_METADATA,
                     [(BLOB_METADATA, LOWER, 2)], id="current-only"),
        pytest.param([current("0", segment="ownership")], BLOB_METADATA, [(BLOB_METADATA, LOWER, 1)],
                     id="ownership-only-is-the-current-layout-before-its-first-checkpoint"),
        pytest.param([legacy("0"), legacy("1"), legacy("2")], AZURE_FUNCTION, [(AZURE_FUNCTION, WRITTEN, 3)], id="legacy-as-written"),
        pytest.param([legacy("0", prefix=LOWER)], AZURE_FUNCTION, [(AZURE_FUNCTION, LOWER, 1)], id="legacy-lower-cased"),
        pytest.param([current("0", T0 + timedelta(minutes=1)), legacy("0", T0)], BLOB_METADATA,
                     [(BLOB_METADATA, LOWER, 1), (AZURE_FUNCTION, WRITTEN, 1)], id="both-current-newer"),
        pytest.param([current("0", T0), legacy("0", T0 + timedelta(seconds=1))], AZURE_FUNCTION,
                     [(AZURE_FUNCTION, WRITTEN, 1), (BLOB_METADATA, LOWER, 1)], id="both-legacy-newer"),
        pytest.param([current("0", T0), legacy("0", T0)], BLOB_METADATA,
                     [(BLOB_METADATA, LOWER, 1), (AZURE_FUNCTION, WRITTEN, 1)], id="both-tie-goes-to-current"),
        pytest.param([current("0", None), legacy("0", T0)], AZURE_FUNCTION,
                     [(AZURE_FUNCTION, WRITTEN, 1), (BLOB_METADATA, LOWER, 1)], id="unknown-time-is-oldest"),
        pytest.param([current("0", prefix=LOWER.replace("$default", "audit")), legacy("0", prefix="ns/hub/$Default/"),
                      Blob(LOWER + "checkpoint/0/deeper", T0), Blob(LOWER + "checkpoints/0", T0)], None, [],
                     id="other-groups-and-odd-names-are-nothing"),
        pytest.param([], None, [], id="empty"),
    ],
)
def test_detect_layout_uses_what_is_there_and_the_newest_when_both_are(blobs, layout, present):
    finding = detect_layout(blobs, LOCATION, "checkpoints")
    assert finding.layout == layout
    assert [(p.layout, p.prefix, p.partitions) for p in finding.present] == present
    assert finding.looked_under == (LOWER, WRITTEN) and finding.container == "checkpoints"


def test_the_legacy_layout_prefers_the_as_written_names_over_lower_cased_ones():
    finding = detect_layout([legacy("0", prefix=LOWER), legacy("0"), legacy("1")], LOCATION)
    assert finding.present == (LayoutPresence(AZURE_FUNCTION, WRITTEN, 2, T0),)


def pids(count: int) -> list[str]:
    return [str(pid) for pid in range(count)]


BOTH = (LayoutPresence(BLOB_METADATA, LOWER, 2, T0 + timedelta(hours=1)), LayoutPresence(AZURE_FUNCTION, WRITTEN, 2, T0))


@pytest.mark.parametrize(
    ("finding", "partition_ids", "checkpointed", "note"),
    [
        pytest.param(LayoutFinding(BLOB_METADATA, (LayoutPresence(BLOB_METADATA, LOWER, 32, T0),)), pids(32), pids(32),
                     "checkpoint_layout: blobMetadata (32 of 32 partitions)", id="all"),
        pytest.param(LayoutFinding(AZURE_FUNCTION, (LayoutPresence(AZURE_FUNCTION, WRITTEN, 3, T0),)), pids(4), ["0", "1", "2", "9"],
                     "checkpoint_layout: azureFunction (3 of 4 partitions; 1 partition counts from its beginning)",
                     id="some-missing-and-one-the-hub-no-longer-has"),
        pytest.param(LayoutFinding(BLOB_METADATA, BOTH), pids(2), pids(2),
                     "checkpoint_layout: blobMetadata (2 of 2 partitions); azureFunction blobs are there too under "
                     f"{WRITTEN!r} (2 partitions, updated 2026-11-01T08:00:00Z), blobMetadata was updated more "
                     "recently (2026-11-01T09:00:00Z) and is used", id="both"),
        pytest.param(LayoutFinding(BLOB_METADATA, BOTH, legacy_fallback=frozenset({"1", "9"})), pids(3), pids(2),
                     "checkpoint_layout: blobMetadata (2 of 3 partitions, 1 of them from azureFunction checkpoints, where "
                     "the Functions extension starts a partition that has no new checkpoint yet; 1 partition counts from "
                     f"its beginning); azureFunction blobs are there too under {WRITTEN!r} (2 partitions, updated "
                     "2026-11-01T08:00:00Z), blobMetadata was updated more recently (2026-11-01T09:00:00Z) and is used",
                     id="both-with-legacy-fallback"),
        pytest.param(LayoutFinding(None, looked_under=(LOWER, WRITTEN), container="c", found_instead="consumer group 'audit'"),
                     pids(2), [], f"checkpoint_layout: none under {LOWER!r} or {WRITTEN!r} in container 'c' (2 partitions count "
                     "from their beginning); found instead: consumer group 'audit'", id="none"),
        pytest.param(LayoutFinding(None, looked_under=(LOWER,), container="c", container_missing=True), pids(1), [],
                     "checkpoint_layout: none: checkpoint container 'c' not found (1 partition counts from its beginning)",
                     id="container-missing"),
    ],
)
def test_the_note_is_one_readable_line(finding, partition_ids, checkpointed, note):
    assert finding.note(partition_ids, set(checkpointed)) == note


def names(prefix: str, count: int, layout: str = BLOB_METADATA) -> list[str]:
    if layout == BLOB_METADATA:
        return [f"{prefix}{segment}/{pid}" for pid in range(count) for segment in ("checkpoint", "ownership")]
    return [f"{prefix}{pid}" for pid in range(count)]


NS = "orders-ns.servicebus.windows.net"


@pytest.mark.parametrize(
    ("listed", "truncated", "described"),
    [
        pytest.param(names(f"{NS}/orders-hub/audit/", 32), False, "consumer group 'audit' (blobMetadata, 32 partitions)",
                     id="other-consumer-group"),
        pytest.param(names("ORDERS-NS.servicebus.windows.net/Orders-Hub/$DEFAULT/", 4, AZURE_FUNCTION), False,
                     "the same names in another case, 'ORDERS-NS.servicebus.windows.net/Orders-Hub/$DEFAULT/' "
                     "(azureFunction, 4 partitions)", id="namespace-in-another-case"),
        pytest.param(names(WRITTEN, 2), False, f"{WRITTEN!r}, not lower-cased as that layout requires (blobMetadata, 2 partitions)",
                     id="current-layout-not-lower-cased"),
        pytest.param(names(f"{NS}/order-hub/$default/", 8), False,
                     "event hub 'order-hub' (a typo of 'Orders-Hub'?) (blobMetadata, 8 partitions)", id="hub-typo"),
        pytest.param(names("orders-dr.servicebus.windows.net/orders-hub/$default/", 8), False,
                     "namespace 'orders-dr.servicebus.windows.net' (blobMetadata, 8 partitions)", id="other-namespace"),
        pytest.param(names(f"{NS}/payments/$default/", 2), False, "event hub 'payments' (blobMetadata, 2 partitions)",
                     id="unrelated-hub"),
        pytest.param(names("other.servicebus.windows.net/x/y/", 1), False,
                     "'other.servicebus.windows.net/x/y/' (blobMetadata, 1 partition)", id="unrelated-group"),
        pytest.param(["dapr-orders-hub-$default-0", "dapr-orders-hub-$default-1"], False,
                     "2 blobs of no known layout (e.g. 'dapr-orders-hub-$default-0')", id="unknown-layout"),
        pytest.param([], False, "an empty container", id="empty"),
        pytest.param(names(f"{NS}/orders-hub/audit/", 1), True,
                     "consumer group 'audit' (blobMetadata, 1 partition) (only the first names of the container were looked at)",
                     id="truncated"),
        pytest.param(names(f"{NS}/zzz/$default/", 1) + names(f"{NS}/orders-hub/audit/", 1) + names(f"{NS}/orders-archive/$default/", 1)
                     + names(f"{NS}/orders-hub/$default-2/", 1) + ["readme.txt"], False,
                     "consumer group '$default-2' (blobMetadata, 1 partition); consumer group 'audit' (blobMetadata, "
                     "1 partition); event hub 'orders-archive' (blobMetadata, 1 partition); and 1 more checkpoint group; "
                     "1 blob of no known layout (e.g. 'readme.txt')", id="closest-first-at-most-three"),
    ],
)
def test_near_misses_say_what_is_there_instead_closest_first(listed, truncated, described):
    assert describe_near_misses(listed, LOCATION, truncated=truncated) == described


@pytest.mark.parametrize(
    ("strategy", "reader"),
    [("auto", AutoCheckpointReader), ("blobMetadata", BlobMetadataCheckpointReader), ("azureFunction", AzureFunctionCheckpointReader)],
)
def test_every_strategy_has_its_reader(strategy, reader):
    assert isinstance(checkpoint_reader_for(strategy, object()), reader)


def test_an_unknown_strategy_names_the_known_ones():
    with pytest.raises(ValueError, match="checkpointStrategy 'dapr' is not supported \\(known: auto, blobMetadata, azureFunction\\)"):
        checkpoint_reader_for("dapr", object())


def test_auto_is_the_default_and_what_the_sample_policy_and_the_infra_example_use():
    repo = Path(__file__).resolve().parents[2]
    parsed = policy_from_dict({"targets": [{"name": "t", "plan": {"resource_id": "/subscriptions/s/resourceGroups/r/providers/"
                                                                  "Microsoft.Web/serverfarms/p"},
                                            "sources": [{"kind": "eventhub", "name": "h", "eventHubName": "h",
                                                         "fullyQualifiedNamespace": "ns", "checkpointAccountUrl": "https://a"}]}]})
    assert parsed.targets[0].sources[0].checkpoint_strategy == "auto"
    sample = json.loads((repo / "policy.sample.json").read_text(encoding="utf-8"))
    infra = json.loads((repo / "infra" / "main.parameters.json").read_text(encoding="utf-8"))
    text = json.dumps([sample, infra])
    # the sample is in the canonical snake_case, the infra example in KEDA's camelCase (an alias)
    assert text.count('"checkpoint_strategy": "auto"') + text.count('"checkpointStrategy": "auto"') == 2
    assert '"blobMetadata"' not in text


class UnlistableContainer:
    """The group's prefixes list (empty); listing the whole container is refused."""

    container_name = "checkpoints"

    def list_blobs(self, **kwargs):
        if "name_starts_with" not in kwargs:
            raise PermissionError("AuthorizationPermissionMismatch")

        async def nothing():
            return
            yield

        return nothing()


def test_a_failed_near_miss_listing_shortens_the_note_but_never_fails_the_reading():
    snapshot = asyncio.run(AutoCheckpointReader(UnlistableContainer()).read(CheckpointLocation("ns", "hub", "cg"), CallGate(2, 1.0)))
    assert snapshot.checkpoints == {} and snapshot.layout.layout is None
    assert snapshot.layout.note(["0"], snapshot.checkpoints) == (
        "checkpoint_layout: none under 'ns/hub/cg/' in container 'checkpoints' (1 partition counts from its beginning); "
        "found instead: unknown (listing the container failed: PermissionError: AuthorizationPermissionMismatch)")
