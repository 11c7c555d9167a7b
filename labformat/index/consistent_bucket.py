"""The consistent-hashing bucket engine (Hudi 0.13, RFC-42): a hash ring per partition; clustering splits buckets as they grow.

A SIMPLE bucket table keeps `hoodie.bucket.index.num.buckets` buckets for ever, so as a partition
grows its buckets' files grow past `max_file_size` (seed 003: "the bucket count is fixed at
creation"). Here each partition has a ring: each bucket (node) owns the XXH32 hashes from the
previous node's value (exclusive) up to its own (inclusive); a key goes to the first node whose
value is at least the key's hash, wrapping to the first node. Splitting a bucket adds one node at
the middle of its range: only that bucket's records move, every other key keeps its file group.

The ring lives where Hudi keeps it, `.hoodie/.bucket_index/consistent_hashing_metadata/<partition>/`:
`00000000000000.hashing_meta` (the initial ring, written by the first write into the partition) and
`<instant>.hashing_meta` for each resize, written before its replacecommit completes. A ring counts
once its instant completed (or it is the initial one); a resize that failed has its ring deleted by
its rollback, and one still running has a ring nobody reads yet. `<instant>.commit` markers are written after
the commit, as Hudi's writers expect them.
"""

from __future__ import annotations

import hashlib
import functools
import json
import struct
import uuid
from dataclasses import dataclass, replace
from typing import Callable, Iterable

import numpy as np
import pyarrow as pa
from pyspark.sql import Column
from pyspark.sql import functions as F

from labformat.helper_columns import BUCKET, FILE_ID, KEY, PART
from labformat.index.base import Lookup, TagRequest, TagResult
from labformat.index.bucket import hash_values
from labformat.model.enums import StatsSource
from labformat.model.report import Source, TagFunnel
from labformat.storage import Storage
from labformat.timeline import Timeline
from labformat.spark.tasks import arrow_udf

HASH_MASK = 0x7FFFFFFF  # Integer.MAX_VALUE: hashes and node values lie in [0, HASH_MASK]
INIT_INSTANT = "00000000000000"
METADATA_DIR = ".hoodie/.bucket_index/consistent_hashing_metadata"
META_SUFFIX = ".hashing_meta"
COMMIT_SUFFIX = ".commit"


@functools.cache
def _xxh32() -> Callable[[bytes], int]:
    import xxhash  # imported once a consistent-hashing table hashes a key: no other table needs it

    return xxhash.xxh32_intdigest


def key_hash(key: str, fields: tuple[str, ...]) -> int:
    """XXH32 (seed 0) of the hash fields' values joined with no separator, & Integer.MAX_VALUE
    (ConsistentBucketIdentifier); a null value is joined as Java joins it, "null"."""
    joined = "".join("null" if v is None else v for v in hash_values(key, fields))
    return _xxh32()(joined.encode("utf-8")) & HASH_MASK


def key_hashes(keys: pa.Array, fields: tuple[str, ...]) -> np.ndarray:
    return np.fromiter((key_hash(k, fields) for k in keys.cast(pa.string()).to_pylist()), np.int64, len(keys))


def _name_uuid(data: bytes) -> str:
    """Java's UUID.nameUUIDFromBytes: an MD5 name-based (version 3) UUID."""
    return str(uuid.UUID(bytes=hashlib.md5(data).digest(), version=3))


@dataclass(frozen=True)
class Node:
    """One bucket on the ring: the highest hash it owns, and its file group's prefix."""

    value: int
    file_id_prefix: str
    tag: str = "NORMAL"

    @property
    def file_id(self) -> str:
        return f"{self.file_id_prefix}-0"


@dataclass(frozen=True)
class Ring:
    """A partition's hashing metadata (Hudi's HoodieConsistentHashingMetadata)."""

    partition_path: str
    instant: str
    num_buckets: int  # the initial count, carried forward unchanged by resizes as Hudi does
    seq_no: int
    nodes: tuple[Node, ...]

    @classmethod
    def initial(cls, partition_path: str, num_buckets: int) -> "Ring":
        """`num_buckets` nodes splitting the hash space evenly, the last at HASH_MASK; each prefix a
        name-based UUID of its range and partition, so every writer makes the same initial ring."""
        step = (HASH_MASK + num_buckets - 1) // num_buckets
        nodes = []
        for i in range(1, num_buckets + 1):
            start, end = step * (i - 1), min(step * i, HASH_MASK)
            prefix = _name_uuid(struct.pack(">qq", start, end) + partition_path.encode("utf-8"))
            nodes.append(Node(end, prefix))
        return cls(partition_path, INIT_INSTANT, num_buckets, 0, tuple(nodes))

    @property
    def values(self) -> np.ndarray:
        return np.array([n.value for n in self.nodes], np.int64)

    def buckets_of(self, hashes: np.ndarray) -> np.ndarray:
        """Each hash's node index: the first node whose value is at least the hash, else the first."""
        return (np.searchsorted(self.values, hashes, side="left") % len(self.nodes)).astype(np.int32)

    def split(self, index: int, instant: str) -> tuple["Ring", tuple[Node, Node]]:
        """This ring with node `index` split at the middle of its range into two new file groups, and
        those two nodes."""
        node = self.nodes[index]
        former = self.nodes[index - 1].value if index > 0 else self.nodes[-1].value - (HASH_MASK + 1)
        mid = (former + node.value) // 2
        if mid == former or mid == node.value:
            raise ValueError(f"bucket {node.file_id} owns too few hashes to split")
        if mid < 0:  # the first node's range wraps past HASH_MASK: its middle lies on the far side
            mid += HASH_MASK + 1
        children = (Node(mid, str(uuid.uuid4())), Node(node.value, str(uuid.uuid4())))
        nodes = sorted([n for i, n in enumerate(self.nodes) if i != index] + list(children), key=lambda n: n.value)
        return replace(self, instant=instant, seq_no=self.seq_no + 1, nodes=tuple(nodes)), children

    def to_json(self) -> str:
        return json.dumps({"version": 0, "partitionPath": self.partition_path, "instant": self.instant,
                           "numBuckets": self.num_buckets, "seqNo": self.seq_no,
                           "nodes": [{"value": n.value, "fileIdPrefix": n.file_id_prefix, "tag": n.tag}
                                     for n in self.nodes]}, indent=2)

    @classmethod
    def from_json(cls, text: str) -> "Ring":
        body = json.loads(text)
        nodes = tuple(sorted((Node(int(n["value"]), n.get("fileIdPrefix") or n.get("fileIdPfx"), n.get("tag", "NORMAL"))
                              for n in body["nodes"]), key=lambda n: n.value))
        return cls(body.get("partitionPath") or "", body["instant"], int(body["numBuckets"]),
                   int(body.get("seqNo", 0)), nodes)


def _dir(partition_path: str) -> str:
    return f"{METADATA_DIR}/{partition_path}" if partition_path else METADATA_DIR


def ring_path(partition_path: str, instant: str) -> str:
    return f"{_dir(partition_path)}/{instant}{META_SUFFIX}"


def load_rings(storage: Storage, timeline: Timeline, num_buckets: int, as_of: str | None = None) -> dict[str, Ring]:
    """Each partition's ring as of `as_of` (None: now): its newest hashing metadata that is the
    initial one or whose instant completed; partitions with none stored are left out."""
    completed = {i.time for i in timeline.completed_writes(as_of)}
    newest: dict[str, tuple[str, str]] = {}
    for info in storage.list(METADATA_DIR, recursive=True):
        if not info.path.endswith(META_SUFFIX):
            continue
        folder, _, name = info.path.rpartition("/")
        instant = name[:-len(META_SUFFIX)]
        if instant != INIT_INSTANT and instant not in completed:
            continue  # a resize still running, or one that failed
        partition = folder[len(METADATA_DIR):].lstrip("/")
        if partition not in newest or instant > newest[partition][0]:
            newest[partition] = (instant, info.path)
    return {p: Ring.from_json(storage.read_bytes(path).decode("utf-8")) for p, (_, path) in newest.items()}


def ring_of(rings: dict[str, Ring], partition_path: str, num_buckets: int) -> Ring:
    return rings.get(partition_path) or Ring.initial(partition_path, num_buckets)


def save_initial_rings(storage: Storage, partitions: Iterable[str], num_buckets: int) -> None:
    """The initial ring of each partition that has none yet. Every writer makes the same one, so a
    file already there (another writer's, or a retried write's) is the same ring."""
    for partition in partitions:
        path = ring_path(partition, INIT_INSTANT)
        if not storage.exists(path):
            storage.create_exclusive(path, Ring.initial(partition, num_buckets).to_json().encode("utf-8"))
            storage.create_exclusive(f"{_dir(partition)}/{INIT_INSTANT}{COMMIT_SUFFIX}", b"")


def save_ring(storage: Storage, ring: Ring) -> None:
    """A resize's ring, written before its instant completes (readers skip it until then)."""
    storage.replace(ring_path(ring.partition_path, ring.instant), ring.to_json().encode("utf-8"))


def mark_committed(storage: Storage, ring: Ring) -> None:
    storage.create_exclusive(f"{_dir(ring.partition_path)}/{ring.instant}{COMMIT_SUFFIX}", b"")


def bucket_columns(part_column: Column, key_column: Column, rings: dict[str, Ring], num_buckets: int,
                   fields: tuple[str, ...]) -> tuple[Column, Column]:
    """(bucket index, file id) of each record, as Spark columns computed in Arrow batches."""
    tables = {p: (r.values, [n.file_id for n in r.nodes]) for p, r in rings.items()}
    initial = Ring.initial("", num_buckets).values  # the same values in every partition

    def ring_for(partition: str) -> tuple[np.ndarray, list[str]]:
        if partition not in tables:
            tables[partition] = (initial, [n.file_id for n in Ring.initial(partition, num_buckets).nodes])
        return tables[partition]

    def locate(parts: pa.Array, keys: pa.Array) -> tuple[list[str], np.ndarray]:
        hashes = key_hashes(keys, fields)
        parts = parts.cast(pa.string()).to_pylist()
        index = np.empty(len(parts), np.int32)
        for partition in set(parts):
            rows = np.array([i for i, p in enumerate(parts) if p == partition])
            values, _ = ring_for(partition)
            index[rows] = np.searchsorted(values, hashes[rows], side="left") % len(values)
        return parts, index

    @arrow_udf("int")
    def ring_bucket(parts: pa.Array, keys: pa.Array) -> pa.Array:
        return pa.array(locate(parts, keys)[1], pa.int32())

    @arrow_udf("string")
    def ring_file_id(parts: pa.Array, keys: pa.Array) -> pa.Array:
        parts, index = locate(parts, keys)
        return pa.array([ring_for(p)[1][i] for p, i in zip(parts, index)], pa.string())

    columns: tuple[Column, Column] = (ring_bucket(part_column, key_column), ring_file_id(part_column, key_column))
    return columns


@dataclass(frozen=True)
class ConsistentBucketIndex:
    """BUCKET with consistent hashing: a key's bucket is its place on its partition's ring."""

    lookup: Lookup

    def tag(self, request: TagRequest) -> TagResult:
        """Tag each record with its bucket on its partition's ring and that bucket's file group: the
        one there, or the one its first records will make."""
        lookup, incoming, slices = self.lookup, request.records, request.slices
        files_in_snapshot = request.files_in_snapshot
        table = lookup.ctx
        rings = load_rings(table.storage, table.timeline, table.config.bucket_num)
        bucket, file_id = bucket_columns(F.col(PART), F.col(KEY), rings, table.config.bucket_num,
                                         lookup.options.bucket_hash_fields)
        funnel = TagFunnel(files_in_snapshot=files_in_snapshot, files_in_affected_partitions=len(slices),
                           files_scanned=0, keys_read=0,
                           note="CONSISTENT_HASHING hashes each key onto its partition's ring: no file opened, "
                                "no key read")
        tagged = incoming.withColumn(BUCKET, bucket).withColumn(FILE_ID, file_id)
        return TagResult(tagged, funnel, Source(StatsSource.HASH, "the partition's hash ring (.hoodie/.bucket_index/)"))
