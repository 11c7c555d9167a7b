"""Step 7 of an upsert: records routed to one write task per file group (by Spark's own Murmur3), and the tasks run."""

from __future__ import annotations

from functools import lru_cache

from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F

from labformat.fileformat.base_file_stat import BaseFileStat
from labformat.helper_columns import (
    BUCKET, DROP, FILE_ID, KEY, PART, TARGET, TASK_KEY
)
from labformat.index.base import TagResult
from labformat.model.enums import Operation
from labformat.spark.jobs import WRITE_BASE_FILES, describe
from labformat.write.arrow_writer import WriteSpec
from labformat.write.merge import merge_file_group
from labformat.spark.tasks import map_in_arrow
from labformat.write.write_plan import WritePlan


_MASK32 = 0xFFFFFFFF


def _rotl32(x: int, r: int) -> int:
    return ((x << r) | (x >> (32 - r))) & _MASK32


def spark_hash_long(value: int, seed: int = 42) -> int:
    """Spark's `hash()` of a LongType value (Murmur3_x86_32.hashLong, seed 42), as a signed int.

    The hash partitioner of `repartition(n, col)` uses it, so the driver can pick routing keys
    without a Spark job (one job saved whenever a new number of write targets comes up).
    """
    h = seed & _MASK32
    for word in (value & _MASK32, (value >> 32) & _MASK32):  # the low half first, as hashLong
        k = (word * 0xCC9E2D51) & _MASK32
        k = (_rotl32(k, 15) * 0x1B873593) & _MASK32
        h = (_rotl32(h ^ k, 13) * 5 + 0xE6546B64) & _MASK32
    h ^= 8  # the input's length in bytes
    h = ((h ^ (h >> 16)) * 0x85EBCA6B) & _MASK32
    h = ((h ^ (h >> 13)) * 0xC2B2AE35) & _MASK32
    h ^= h >> 16
    return h - (1 << 32) if h & 0x80000000 else h


@lru_cache(maxsize=64)  # Spark's hash is fixed, so the answer for n never changes
def task_keys(n: int) -> tuple[int, ...]:
    """One value per task index such that Spark's hash partitioner sends it exactly there.

    `repartition(n, col)` places a row in partition pmod(hash(col), n); routing each target's
    rows by its own such value gives every file group a Spark task of its own, with no two
    file groups sharing one (Hudi does this with a custom partitioner).
    """
    found: dict[int, int] = {}
    for value in range(64 * n + 64):
        found.setdefault(spark_hash_long(value) % n, value)  # Python's % is pmod for n > 0
        if len(found) == n:
            break
    missing = [p for p in range(n) if p not in found]
    if missing:
        raise RuntimeError(f"no hash key found for task partitions {missing[:5]}")
    return tuple(found[p] for p in range(n))


def _lookup(pairs: list[tuple[str, int]], key: Column) -> Column:
    """A literal map lookup: no join and no Spark job, where a broadcast join of a route table needs one."""
    if not pairs:
        return F.lit(None).cast("int")
    entries = [F.lit(v) for pair in pairs for v in pair]
    return F.element_at(F.create_map(*entries), key)


def route_records(tag: TagResult, plan: WritePlan, keys: tuple[int, ...]) -> DataFrame:
    """Add TARGET and TASK_KEY to every record that goes to a file group; drop the rest.

    One pass over the tagged records: an update goes to its file group's target, a BUCKET
    record to its bucket's, and an insert to the insert bucket its key's hash share falls in.
    """
    tagged = tag.tagged
    sep = F.lit("\u0000")  # partition paths and file ids never contain it
    if plan.bucket_routes:
        target = _lookup([(f"{p}\u0000{b}", t) for p, b, t in plan.bucket_routes],
                         F.concat(F.col(PART), sep, F.col(BUCKET).cast("string")))
    else:
        target = _lookup([(f"{p}\u0000{f}", t) for p, f, t in plan.update_routes],
                         F.concat(F.col(PART), sep, F.col(FILE_ID)))
        if plan.insert_routes:
            # A uniform share in [0, 1) from the key's hash: inserts spread over the buckets by weight.
            share = F.xxhash64(F.col(KEY)).bitwiseAND(F.lit(0x7FFFFFFFFFFFFFFF)) / F.lit(float(2**63))
            insert_target = None
            for p, _, hi, t in plan.insert_routes:  # in order of share within each partition
                hit = (F.col(PART) == F.lit(p)) & (share < F.lit(hi))
                insert_target = F.when(hit, F.lit(t)) if insert_target is None else insert_target.when(hit, F.lit(t))
            target = F.when(F.col(FILE_ID).isNotNull(), target).otherwise(insert_target)
    task_key = F.element_at(F.array(*[F.lit(k) for k in keys]), F.col(TARGET) + 1)
    return (tagged.withColumn(TARGET, target.cast("int")).filter(F.col(TARGET).isNotNull())
            .withColumn(TASK_KEY, task_key.cast("long")))


def write_file_groups(routed: DataFrame, plan: WritePlan, spec: WriteSpec, operation: Operation
                      ) -> list[BaseFileStat]:
    """Step 7: one task per target file group merges and writes; returns the tasks' write stats."""
    n = len(plan.targets)
    targets = dict(enumerate(plan.targets))
    key = spec.record_key
    columns = list(spec.data_columns) if operation is not Operation.DELETE else [key]
    if key not in columns:
        columns.append(key)
    if DROP in routed.columns and operation is not Operation.DELETE:
        columns.append(DROP)  # a global index's rows that remove a moved record's old copy
    with describe(routed.sparkSession, "route records to file groups", WRITE_BASE_FILES, before="move matched keys"):
        rows = map_in_arrow(routed.repartition(n, TASK_KEY).select(*columns, TARGET),
                            lambda batches: merge_file_group(batches, spec, targets, operation),
                            BaseFileStat.spark_ddl()).collect()
    return [BaseFileStat.from_row(r) for r in rows]
