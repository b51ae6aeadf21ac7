"""Which checkpoint layout holds a consumer group's checkpoints, found from the blobs themselves.

KEDA issue 2668: a default layout that did not match what the consumers wrote found no
checkpoints, so every partition counted from its beginning and apps scaled to their maximum
without a word. ``checkpointStrategy: auto`` (the default) looks at the group's blobs instead,
uses the layout that is there (the most recently updated one when both are), and says what it
found in one note: ``checkpoint_layout: blobMetadata (32 of 32 partitions)``. When nothing is
there, the note names the prefixes looked under and the nearest blobs found instead (another
consumer group, the same names in another case, a hub name one typo away), so that a
misconfiguration is one readable line rather than a silent over-scale.

Everything here is pure (blob names and times in, a ``LayoutFinding`` out); the reader in
checkpoints.py does the listing. Layouts and listing costs: docs/collect.md.
"""

from __future__ import annotations

import difflib
import os
from collections.abc import Container, Iterable, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Protocol

AUTO = "auto"
BLOB_METADATA = "blobMetadata"
AZURE_FUNCTION = "azureFunction"
CHECKPOINT_SEGMENT = "checkpoint"
OWNERSHIP_SEGMENT = "ownership"
NOTE_PREFIX = "checkpoint_layout: "
#: How every note of "no layout found" starts (the collector also logs those as warnings).
NO_LAYOUT_NOTE = NOTE_PREFIX + "none"
#: Near misses named in a note; more are summarised as "and N more".
MAX_NEAR_MISSES = 3
#: A hub name at least this similar to the configured one is reported as a likely typo.
TYPO_SIMILARITY = 0.8
_OLDEST = datetime.min.replace(tzinfo=UTC)


@dataclass(frozen=True, slots=True)
class CheckpointLocation:
    """Which consumer group's checkpoints to read."""

    fully_qualified_namespace: str
    event_hub: str
    consumer_group: str

    def prefix(self, *, lower: bool = True) -> str:
        """``{fqns}/{hub}/{cg}/``; the current layout always lower-cases it."""
        text = f"{self.fully_qualified_namespace}/{self.event_hub}/{self.consumer_group}/"
        return text.lower() if lower else text

    def exact_prefixes(self) -> tuple[str, ...]:
        """Where either layout may file this group: lower-cased, and as written when that differs."""
        lower, written = self.prefix(lower=True), self.prefix(lower=False)
        return (lower,) if lower == written else (lower, written)


class ListedBlob(Protocol):
    """What detection needs of a listed blob (``azure.storage.blob.BlobProperties`` has both)."""

    name: str
    last_modified: datetime | None


def classify_blob_name(name: str, prefix: str) -> tuple[str, str] | None:
    """``(segment, partition_id)`` for a current-layout blob under ``prefix``, else ``None``.

    ``segment`` is ``checkpoint`` or ``ownership``; anything else under the prefix (other
    tools' blobs, deeper paths, an empty partition id) is ignored.
    """
    if not name.startswith(prefix):
        return None
    parts = name[len(prefix):].split("/")
    if len(parts) != 2 or parts[0] not in (CHECKPOINT_SEGMENT, OWNERSHIP_SEGMENT) or not parts[1]:
        return None
    return parts[0], parts[1]


def legacy_partition_id(name: str, prefix: str) -> str | None:
    """The partition id of a legacy blob ``{prefix}{pid}``; deeper names are not legacy leases."""
    if not name.startswith(prefix):
        return None
    rest = name[len(prefix):]
    if not rest or "/" in rest:
        return None
    return rest


def listing_prefixes(location: CheckpointLocation) -> tuple[str, ...]:
    """The prefixes to list so that both layouts of the group are seen, in as few calls as possible.

    Listing prefixes are case-sensitive, and the legacy host kept the configured case while the
    current layout lower-cases. When only the consumer group has capitals (``$Default`` on a
    lower-case namespace and hub, the common case), one listing under the shared part (``.../$``)
    covers both spellings and little else (at most the hub's other groups); otherwise each
    spelling is listed on its own, so the cost never grows with the namespace or the container.
    """
    exact = location.exact_prefixes()
    if len(exact) == 1:
        return exact
    shared = os.path.commonprefix(list(exact))
    hub_prefix = f"{location.fully_qualified_namespace}/{location.event_hub}/"
    return (shared,) if len(shared) >= len(hub_prefix) else exact


def legacy_blobs(blobs: Iterable[ListedBlob], location: CheckpointLocation) -> tuple[str | None, list[tuple[str, ListedBlob]]]:
    """``(prefix, [(partition_id, blob)])`` of the legacy layout: the as-written names when there
    are any, else the lower-cased ones (the legacy host kept the configured case)."""
    blobs = list(blobs)
    for prefix in reversed(location.exact_prefixes()):  # as written first
        found = [(pid, blob) for blob in blobs if (pid := legacy_partition_id(blob.name, prefix)) is not None]
        if found:
            return prefix, found
    return None, []


@dataclass(frozen=True, slots=True)
class LayoutPresence:
    """One layout's blobs for the group: under which prefix, for which partitions, when last written."""

    layout: str
    prefix: str
    partitions: int
    updated: datetime | None


@dataclass(frozen=True, slots=True)
class LayoutFinding:
    """What ``auto`` found: the layout used (``None``: neither), every layout present (the one
    used first), the prefixes looked under, and, when none matched, what was found instead."""

    layout: str | None
    present: tuple[LayoutPresence, ...] = ()
    looked_under: tuple[str, ...] = ()
    container: str = ""
    container_missing: bool = False
    found_instead: str = ""
    legacy_fallback: frozenset[str] = frozenset()

    def note(self, partition_ids: Sequence[str], checkpoints: Container[str]) -> str:
        """The sample's one-line note, given the hub's partitions and which have a checkpoint."""
        partitions = len(partition_ids)
        checkpointed = sum(1 for pid in partition_ids if pid in checkpoints)
        fallback = sum(1 for pid in partition_ids if pid in self.legacy_fallback and pid in checkpoints)
        if self.container_missing:
            return (f"{NO_LAYOUT_NOTE}: checkpoint container {self.container!r} not found "
                    f"({_from_beginning(partitions)})")
        if self.layout is None:
            looked = " or ".join(repr(prefix) for prefix in self.looked_under)
            return (f"{NO_LAYOUT_NOTE} under {looked} in container {self.container!r} "
                    f"({_from_beginning(partitions)}); found instead: {self.found_instead or 'nothing'}")
        missing = partitions - checkpointed
        coverage = f"{checkpointed} of {partitions} partitions"
        if fallback:
            coverage += (f", {fallback} of them from {AZURE_FUNCTION} checkpoints, where the Functions extension "
                         "starts a partition that has no new checkpoint yet")
        if missing > 0:
            coverage += f"; {_from_beginning(missing)}"
        text = f"{NOTE_PREFIX}{self.layout} ({coverage})"
        if len(self.present) > 1:
            used, other = self.present[0], self.present[1]
            text += (f"; {other.layout} blobs are there too under {other.prefix!r} ({_count(other.partitions)}, "
                     f"updated {_when(other.updated)}), {used.layout} was updated more recently "
                     f"({_when(used.updated)}) and is used")
        return text


def _count(partitions: int) -> str:
    return f"{partitions} partition" if partitions == 1 else f"{partitions} partitions"


def _from_beginning(partitions: int) -> str:
    return "1 partition counts from its beginning" if partitions == 1 else f"{partitions} partitions count from their beginning"


def _when(moment: datetime | None) -> str:
    return "at an unknown time" if moment is None else moment.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def _presence(layout: str, prefix: str, partition_blobs: Sequence[tuple[str, ListedBlob]]) -> LayoutPresence:
    times = [blob.last_modified for _, blob in partition_blobs if blob.last_modified is not None]
    return LayoutPresence(layout, prefix, len({pid for pid, _ in partition_blobs}), max(times, default=None))


def detect_layout(blobs: Iterable[ListedBlob], location: CheckpointLocation, container: str = "") -> LayoutFinding:
    """The layout holding the group's blobs (checkpoint or ownership blobs of the current layout,
    lease blobs of the legacy one); with both, the one written last (a tie goes to the current
    layout, which every maintained SDK writes)."""
    blobs = list(blobs)
    present: list[LayoutPresence] = []
    lower = location.prefix(lower=True)
    current = [(kind[1], blob) for blob in blobs if (kind := classify_blob_name(blob.name, lower)) is not None]
    if current:
        present.append(_presence(BLOB_METADATA, lower, current))
    legacy_prefix, legacy = legacy_blobs(blobs, location)
    if legacy_prefix is not None:
        present.append(_presence(AZURE_FUNCTION, legacy_prefix, legacy))
    present.sort(key=lambda item: (item.updated or _OLDEST, item.layout == BLOB_METADATA), reverse=True)
    return LayoutFinding(present[0].layout if present else None, tuple(present), location.exact_prefixes(), container)


# --- near misses: what is in the container instead -------------------------------------------------


@dataclass(frozen=True, slots=True)
class _Group:
    namespace: str
    hub: str
    consumer_group: str
    layout: str

    @property
    def prefix(self) -> str:
        return f"{self.namespace}/{self.hub}/{self.consumer_group}/"


def _group_of(name: str) -> tuple[_Group, str] | None:
    parts = name.split("/")
    if len(parts) == 5 and parts[3] in (CHECKPOINT_SEGMENT, OWNERSHIP_SEGMENT) and parts[4] and all(parts[:3]):
        return _Group(*parts[:3], BLOB_METADATA), parts[4]
    if len(parts) == 4 and all(parts):
        return _Group(*parts[:3], AZURE_FUNCTION), parts[3]
    return None


def _similarity(left: str, right: str) -> float:
    return difflib.SequenceMatcher(None, left.casefold(), right.casefold()).ratio()


def _relation(group: _Group, location: CheckpointLocation) -> tuple[int, float, str]:
    """``(rank, similarity, description)``: lower ranks are likelier explanations of the miss."""
    same_namespace = group.namespace.casefold() == location.fully_qualified_namespace.casefold()
    same_hub = group.hub.casefold() == location.event_hub.casefold()
    same_group = group.consumer_group.casefold() == location.consumer_group.casefold()
    hub_similarity = _similarity(group.hub, location.event_hub)
    if same_namespace and same_hub and same_group:
        if group.prefix in location.exact_prefixes():  # only a current-layout writer that did not lower-case
            return 0, 1.0, f"{group.prefix!r}, not lower-cased as that layout requires"
        return 0, 1.0, f"the same names in another case, {group.prefix!r}"
    if same_namespace and same_hub:
        return 1, _similarity(group.consumer_group, location.consumer_group), f"consumer group {group.consumer_group!r}"
    if same_namespace and same_group and hub_similarity >= TYPO_SIMILARITY:
        return 2, hub_similarity, f"event hub {group.hub!r} (a typo of {location.event_hub!r}?)"
    if same_hub and same_group:
        return 3, _similarity(group.namespace, location.fully_qualified_namespace), f"namespace {group.namespace!r}"
    if same_namespace and same_group:
        return 4, hub_similarity, f"event hub {group.hub!r}"
    if same_namespace:
        return 5, hub_similarity, f"event hub {group.hub!r}, consumer group {group.consumer_group!r}"
    return 6, _similarity(group.prefix, location.prefix(lower=False)), repr(group.prefix)


def describe_near_misses(names: Iterable[str], location: CheckpointLocation, *, truncated: bool = False) -> str:
    """What the container holds instead of the group's checkpoints, closest first, in one line."""
    partitions: dict[_Group, set[str]] = {}
    others: list[str] = []
    for name in names:
        parsed = _group_of(name)
        if parsed is None:
            others.append(name)
        else:
            partitions.setdefault(parsed[0], set()).add(parsed[1])
    ranked = sorted(
        ((*_relation(group, location), group, len(pids)) for group, pids in partitions.items()),
        key=lambda item: (item[0], -item[1], -item[4], item[3].prefix, item[3].layout),
    )
    parts = [f"{description} ({group.layout}, {_count(count)})" for _, _, description, group, count in ranked[:MAX_NEAR_MISSES]]
    if len(ranked) > MAX_NEAR_MISSES:
        more = len(ranked) - MAX_NEAR_MISSES
        parts.append(f"and {more} more checkpoint group{'s' if more != 1 else ''}")
    if others:
        parts.append(f"{len(others)} blob{'s' if len(others) != 1 else ''} of no known layout (e.g. {sorted(others)[0]!r})")
    text = "; ".join(parts) if parts else "an empty container"
    return f"{text} (only the first names of the container were looked at)" if truncated else text
