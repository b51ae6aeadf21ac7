"""Checkpoint and ownership readers for the blob checkpoint store, one per ``checkpointStrategy``.

- ``blobMetadata``: the current layout written by every Event Hubs SDK's blob checkpoint store
  and by the Functions extension v5+. Blob ``{fqns}/{hub}/{cg}/checkpoint/{pid}`` (the whole
  name lower-cased), zero-byte body, metadata ``sequencenumber``; ownership blobs
  ``{fqns}/{hub}/{cg}/ownership/{pid}`` with metadata ``ownerid``, renewed by rewriting them.
- ``azureFunction``: the legacy Functions / EventProcessorHost layout. Blob
  ``{fqns}/{hub}/{cg}/{pid}``, JSON body ``{"PartitionId","Owner","Token","Epoch","Offset",
  "SequenceNumber"}``; the owner holds a blob lease on it.

Each read costs one listing call per consumer group (``list_blobs`` with the group's prefix and
``include=["metadata"]``), never one call per partition; only the legacy layout must also
download the small JSON bodies, which happens concurrently through the collector's gate.
- ``auto`` (the default): finds which of the two holds the group's checkpoints from the same
  listing and says so in a note (detection and near misses: layouts.py).

Layouts and ownership rules: docs/collect.md.
"""

from __future__ import annotations

import asyncio
import json
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from datetime import datetime
from typing import Any, Protocol

from azure.core.exceptions import ResourceNotFoundError

from scaling.domain.lag import MAX_INT64
from scaling.sources.base import CallGate, error_text
from scaling.sources.layouts import (
    AUTO,
    AZURE_FUNCTION,
    BLOB_METADATA,
    CHECKPOINT_SEGMENT,
    CheckpointLocation,
    LayoutFinding,
    classify_blob_name,
    describe_near_misses,
    detect_layout,
    legacy_blobs,
    legacy_partition_id,
    listing_prefixes,
)

SEQUENCE_METADATA = "sequencenumber"
OWNER_METADATA = "ownerid"
#: The near-miss listing reads names only, at most one service page of them.
MAX_LISTED_NAMES = 5000
_DIGITS = re.compile(r"[0-9]+")


@dataclass(frozen=True, slots=True)
class OwnershipRecord:
    """Who claimed a partition, and when the claim was last renewed.

    ``leased`` is set by the legacy layout, where a live owner holds a blob lease; the current
    layout leaves it ``None`` and liveness follows from ``last_modified``.
    """

    partition_id: str
    owner_id: str | None
    last_modified: datetime | None
    leased: bool | None = None

    def is_live(self, now: datetime, expiry_seconds: float) -> bool:
        if not self.owner_id:
            return False  # an empty owner id is a released partition
        if self.leased is not None:
            return self.leased
        if self.last_modified is None:
            return False
        return (now - self.last_modified).total_seconds() <= expiry_seconds

    @property
    def is_claim(self) -> bool:
        """Whether the record says the consumer group's instances claim partitions at all: every
        current-layout ownership blob (the load balancer writes them), a legacy blob only when it
        is leased or names an owner (a legacy checkpoint written without leases claims nothing)."""
        return self.leased is None or self.leased or bool(self.owner_id)


@dataclass(frozen=True, slots=True)
class CheckpointSnapshot:
    """What one listing found: checkpoints by partition id, ownership claims, and notes.

    ``layout`` is set by ``auto`` only: what it found, for the sample's ``checkpoint_layout``
    note (which needs the hub's partitions, so the Event Hubs reader writes it).
    """

    checkpoints: Mapping[str, int] = field(default_factory=dict)
    ownership: tuple[OwnershipRecord, ...] = ()
    notes: tuple[str, ...] = ()
    container_found: bool = True
    layout: LayoutFinding | None = None


@dataclass(frozen=True, slots=True)
class OwnershipSummary:
    owner_by_partition: Mapping[str, str]
    live_owners: int
    unowned_partitions: tuple[str, ...]
    #: Whether any record is a claim (``OwnershipRecord.is_claim``): without one, ownership is not
    #: collected (a consumer that claims nothing), with one and no live owner, no instance serves.
    claimed: bool = False


class CheckpointReader(Protocol):
    """Reads one consumer group's checkpoints and ownership."""

    strategy: str

    async def read(self, location: CheckpointLocation, gate: CallGate | None = None) -> CheckpointSnapshot: ...


# --- pure parsing (table-tested) ----------------------------------------------------------------


def parse_sequence_number(raw: Any) -> tuple[int | None, str | None]:
    """A checkpoint's sequence number from blob metadata or a JSON body.

    Returns ``(value, None)``, or ``(None, problem)`` for a missing, empty, negative,
    non-numeric or out-of-range value; the caller then treats the partition as having no
    checkpoint (counted from its beginning) and records the problem as a note.
    """
    if raw is None:
        return None, "missing"
    if isinstance(raw, bool):
        return None, f"not a number: {raw!r}"
    if isinstance(raw, int):
        value = raw
    elif isinstance(raw, str):
        text = raw.strip()
        if not text:
            return None, "empty"
        if not _DIGITS.fullmatch(text):
            return None, f"not a non-negative integer: {raw!r}"
        value = int(text)
    else:
        return None, f"not a number: {raw!r}"
    if value < 0:
        return None, f"negative: {value}"
    if value > MAX_INT64:
        return None, f"beyond int64: {value}"
    return value, None


@dataclass(frozen=True, slots=True)
class LegacyCheckpoint:
    sequence_number: int | None
    owner: str | None
    problem: str | None = None


def parse_legacy_checkpoint(body: bytes | str) -> LegacyCheckpoint:
    """Parse a legacy lease blob body (``SequenceNumber``, ``Owner``, ``Offset``).

    A lease that was created but never checkpointed carries ``"Offset": null`` with
    ``"SequenceNumber": 0``: that is no checkpoint, not a checkpoint at 0.
    """
    try:
        text = body.decode("utf-8-sig") if isinstance(body, bytes) else body.lstrip("\ufeff")
        document = json.loads(text)
    except (UnicodeDecodeError, ValueError) as error:
        return LegacyCheckpoint(None, None, f"body is not JSON ({error.__class__.__name__})")
    if not isinstance(document, Mapping):
        return LegacyCheckpoint(None, None, "body is not a JSON object")
    owner = document.get("Owner")
    owner = owner if isinstance(owner, str) and owner else None
    if "Offset" in document and document["Offset"] is None and document.get("SequenceNumber") in (0, None):
        return LegacyCheckpoint(None, owner)
    value, problem = parse_sequence_number(document.get("SequenceNumber"))
    return LegacyCheckpoint(value, owner, None if problem is None else f"SequenceNumber {problem}")


def summarize_ownership(
    records: Iterable[OwnershipRecord], partition_ids: Sequence[str], now: datetime, expiry_seconds: float
) -> OwnershipSummary:
    """Live owner per partition, the number of distinct live owners, partitions nobody owns.

    A claim not renewed within ``expiry_seconds`` (or released with an empty owner id) is not
    live. Only the hub's current partitions count.
    """
    records = tuple(records)
    known = set(partition_ids)
    owner_by_partition: dict[str, str] = {}
    for record in records:
        if record.partition_id in known and record.is_live(now, expiry_seconds):
            owner_by_partition[record.partition_id] = record.owner_id or ""
    unowned = tuple(pid for pid in partition_ids if pid not in owner_by_partition)
    claimed = any(record.is_claim for record in records)
    return OwnershipSummary(owner_by_partition, len(set(owner_by_partition.values())), unowned, claimed)


def _missing_container_note(container: str) -> str:
    return f"checkpoint container {container!r} not found: every partition counts from its beginning"


# --- readers -------------------------------------------------------------------------------------


async def _list(container: Any, prefix: str) -> list[Any]:
    """All blobs under ``prefix`` with metadata: one listing (paged by the SDK)."""
    return [blob async for blob in container.list_blobs(name_starts_with=prefix, include=["metadata"])]


async def _first_names(container: Any, limit: int) -> tuple[list[str], bool]:
    """The first page (``limit`` names at most) of the whole container, no metadata, and whether
    more pages follow: one call, whatever the container's size."""
    pages = container.list_blobs(results_per_page=limit).by_page()
    async for page in pages:
        return [blob.name async for blob in page], pages.continuation_token is not None
    return [], False


def metadata_snapshot(blobs: Iterable[Any], prefix: str) -> CheckpointSnapshot:
    """Checkpoints and ownership of the current layout from listed blobs (metadata included)."""
    checkpoints: dict[str, int] = {}
    ownership: list[OwnershipRecord] = []
    notes: list[str] = []
    for blob in blobs:
        kind = classify_blob_name(blob.name, prefix)
        if kind is None:
            continue
        segment, partition_id = kind
        metadata = blob.metadata or {}
        if segment == CHECKPOINT_SEGMENT:
            value, problem = parse_sequence_number(metadata.get(SEQUENCE_METADATA))
            if value is None:
                notes.append(f"partition {partition_id}: checkpoint {SEQUENCE_METADATA} {problem}; counted from the beginning")
            else:
                checkpoints[partition_id] = value
        else:
            ownership.append(OwnershipRecord(partition_id, metadata.get(OWNER_METADATA) or None, blob.last_modified))
    return CheckpointSnapshot(checkpoints, tuple(ownership), tuple(notes))


async def legacy_snapshot(container: Any, found: Sequence[tuple[str, Any]], gate: CallGate) -> CheckpointSnapshot:
    """Checkpoints and lease ownership of legacy blobs: the JSON bodies downloaded concurrently."""

    async def download(name: str) -> bytes | None:
        try:
            stream = await container.download_blob(name)
            return await stream.readall()
        except ResourceNotFoundError:
            return None

    bodies = await _gather_all([gate.call(f"downloading {blob.name}", lambda blob=blob: download(blob.name))
                                for _, blob in found])
    checkpoints: dict[str, int] = {}
    ownership: list[OwnershipRecord] = []
    notes: list[str] = []
    for (partition_id, blob), body in zip(found, bodies, strict=True):
        if body is None:
            notes.append(f"partition {partition_id}: checkpoint blob disappeared while reading; counted from the beginning")
            continue
        parsed = parse_legacy_checkpoint(body)
        if parsed.problem:
            notes.append(f"partition {partition_id}: checkpoint {parsed.problem}; counted from the beginning")
        elif parsed.sequence_number is not None:
            checkpoints[partition_id] = parsed.sequence_number
        lease = getattr(blob, "lease", None)
        leased = getattr(lease, "state", None) == "leased"
        ownership.append(OwnershipRecord(partition_id, parsed.owner, blob.last_modified, leased=leased))
    return CheckpointSnapshot(checkpoints, tuple(ownership), tuple(notes))


class BlobMetadataCheckpointReader:
    """The current layout: checkpoints and ownership from one metadata listing.

    ``container`` is an ``azure.storage.blob.aio.ContainerClient`` (or anything with the same
    ``list_blobs`` and ``container_name``).
    """

    strategy = BLOB_METADATA

    def __init__(self, container: Any) -> None:
        self.container = container

    async def read(self, location: CheckpointLocation, gate: CallGate | None = None) -> CheckpointSnapshot:
        gate = gate or CallGate()
        prefix = location.prefix(lower=True)
        try:
            blobs = await gate.call(f"listing checkpoints under {prefix}", lambda: _list(self.container, prefix))
        except ResourceNotFoundError:
            return CheckpointSnapshot(notes=(_missing_container_note(self.container.container_name),), container_found=False)
        return metadata_snapshot(blobs, prefix)


class AzureFunctionCheckpointReader:
    """The legacy Functions / EventProcessorHost layout: JSON lease blobs, one per partition.

    One listing finds the blobs (and their lease state); the bodies are downloaded concurrently
    through the gate. The legacy host kept the configured case of the names, so the as-written
    prefix is listed first and the lower-cased one only when that finds nothing.
    """

    strategy = AZURE_FUNCTION

    def __init__(self, container: Any) -> None:
        self.container = container

    async def read(self, location: CheckpointLocation, gate: CallGate | None = None) -> CheckpointSnapshot:
        gate = gate or CallGate()
        candidates = [location.prefix(lower=False)]
        if candidates[0] != location.prefix(lower=True):
            candidates.append(location.prefix(lower=True))
        found: list[tuple[str, Any]] = []
        try:
            for prefix in candidates:
                blobs = await gate.call(f"listing checkpoints under {prefix}", lambda prefix=prefix: _list(self.container, prefix))
                found = [(pid, blob) for blob in blobs if (pid := legacy_partition_id(blob.name, prefix)) is not None]
                if found:
                    break
        except ResourceNotFoundError:
            return CheckpointSnapshot(notes=(_missing_container_note(self.container.container_name),), container_found=False)
        return await legacy_snapshot(self.container, found, gate)


class AutoCheckpointReader:
    """``checkpointStrategy: auto``: finds the layout on every read, then reads it.

    The group's prefixes are listed (one call, two when the configured names have capitals
    outside the consumer group: ``listing_prefixes``); the same listing gives both layouts' blobs
    and times, so detection costs nothing over a configured reader, and a migration between
    layouts is seen at the next run. With both layouts and the current one chosen, a partition
    with no current checkpoint blob takes its legacy checkpoint (``_with_legacy_fallback``).
    Only when neither layout is there is the container listed once more, names only and at
    most ``MAX_LISTED_NAMES``, to say what is there instead.
    """

    strategy = AUTO

    def __init__(self, container: Any, *, max_listed_names: int = MAX_LISTED_NAMES) -> None:
        self.container = container
        self.max_listed_names = max_listed_names

    async def read(self, location: CheckpointLocation, gate: CallGate | None = None) -> CheckpointSnapshot:
        gate = gate or CallGate()
        name = self.container.container_name
        try:
            listings = await _gather_all([
                gate.call(f"listing checkpoints under {prefix}", lambda prefix=prefix: _list(self.container, prefix))
                for prefix in listing_prefixes(location)])
        except ResourceNotFoundError:
            finding = LayoutFinding(None, looked_under=location.exact_prefixes(), container=name, container_missing=True)
            return CheckpointSnapshot(container_found=False, layout=finding)
        blobs = list({blob.name: blob for listing in listings for blob in listing}.values())
        finding = detect_layout(blobs, location, name)
        if finding.layout == BLOB_METADATA:
            snapshot = metadata_snapshot(blobs, location.prefix(lower=True))
            if len(finding.present) > 1:
                snapshot, finding = await self._with_legacy_fallback(snapshot, finding, blobs, location, gate)
        elif finding.layout == AZURE_FUNCTION:
            snapshot = await legacy_snapshot(self.container, legacy_blobs(blobs, location)[1], gate)
        else:
            snapshot = CheckpointSnapshot()
            finding = replace(finding, found_instead=await self._near_misses(location, gate))
        return replace(snapshot, layout=finding)

    async def _with_legacy_fallback(self, snapshot: CheckpointSnapshot, finding: LayoutFinding, blobs: list[Any],
                                    location: CheckpointLocation, gate: CallGate) -> tuple[CheckpointSnapshot, LayoutFinding]:
        """A partition with a legacy checkpoint and no current one starts where the legacy one
        says: the Functions extension v5 reads legacy checkpoints for such partitions (its
        migration path), so counting them from the beginning would over-scale mid-migration.
        Only those partitions' bodies are downloaded; ownership stays the current layout's."""
        prefix = location.prefix(lower=True)
        current = {kind[1] for blob in blobs if (kind := classify_blob_name(blob.name, prefix)) and kind[0] == CHECKPOINT_SEGMENT}
        missing = [(pid, blob) for pid, blob in legacy_blobs(blobs, location)[1] if pid not in current]
        if not missing:
            return snapshot, finding
        legacy = await legacy_snapshot(self.container, missing, gate)
        checkpoints = {**legacy.checkpoints, **snapshot.checkpoints}
        snapshot = replace(snapshot, checkpoints=checkpoints, notes=(*snapshot.notes, *legacy.notes))
        return snapshot, replace(finding, legacy_fallback=frozenset(legacy.checkpoints))

    async def _near_misses(self, location: CheckpointLocation, gate: CallGate) -> str:
        """What the container holds instead; a failure here only weakens the note, never the reading."""
        try:
            names, truncated = await gate.call(f"listing container {self.container.container_name!r}",
                                               lambda: _first_names(self.container, self.max_listed_names))
        except Exception as error:
            return f"unknown (listing the container failed: {error_text(error)})"
        return describe_near_misses(names, location, truncated=truncated)


async def _gather_all(calls: list[Any]) -> list[Any]:
    """Await all, and raise the first failure only after every call finished (no orphans)."""
    results = await asyncio.gather(*calls, return_exceptions=True)
    for result in results:
        if isinstance(result, BaseException):
            raise result
    return results


READERS: dict[str, type] = {
    AUTO: AutoCheckpointReader,
    BLOB_METADATA: BlobMetadataCheckpointReader,
    AZURE_FUNCTION: AzureFunctionCheckpointReader,
}


def checkpoint_reader_for(strategy: str, container: Any) -> CheckpointReader:
    """The reader for a policy's ``checkpointStrategy``."""
    try:
        return READERS[strategy](container)
    except KeyError:
        raise ValueError(f"checkpointStrategy {strategy!r} is not supported (known: {', '.join(READERS)})") from None
