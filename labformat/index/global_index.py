"""Global indexes (GLOBAL_SIMPLE, GLOBAL_BLOOM): SIMPLE's or BLOOM's lookup over every partition, and Hudi's rule for a record that changed partition.

A non-global index looks a key up only in the partition its incoming record names, so a record
whose partition value changed is stored a second time. A global index finds the key wherever it
is (reading every partition: what makes it cost more as a table grows, seed 004) and then, as
Hudi's `hoodie.{bloom,simple}.index.update.partition.path` says:

- true (Hudi's default): the record is deleted from its old file group and inserted in its new
  partition (two rows leave the tag step: one with DROP set, routed to the old file group, one
  insert); a key stored in several partitions (by a non-global index before) ends with one copy;
- false: the update goes to the old file group, and the record keeps its old partition path.

A delete removes the key from whichever partition holds it.
"""

from __future__ import annotations

from dataclasses import replace

from pyspark.sql import DataFrame, Window
from pyspark.sql import functions as F

from labformat.index import bloom, simple
from labformat.index.base import DROP, FILE_ID, KEY, OLD_PART, PART, Lookup, TagResult
from labformat.model.enums import IndexType
from labformat.model.file_group import FileSlice

NEW_PART = "_lf_new_partition_path"  # the partition path the incoming record names


def tag(lookup: Lookup, incoming: DataFrame, slices: list[FileSlice], files_in_snapshot: int,
        update_partition_path: bool, deleting: bool) -> TagResult:
    """Tag each record with the file group holding its key in any partition; `slices`: every latest
    file slice of the table."""
    named = incoming.withColumnRenamed(PART, NEW_PART)
    if lookup.options.index_type.lookup is IndexType.SIMPLE:
        found = simple.tag(lookup, named, slices, files_in_snapshot, by_key_only=True)
    else:
        # BLOOM's funnel over one pretend partition: every key meets the files of every partition.
        partition_of = {s.file_id: s.partition_path for s in slices}
        flat = [replace(s, partition_path="") for s in slices]
        found = bloom.tag(lookup, named.withColumn(PART, F.lit("")), flat, files_in_snapshot)
        found.tagged = _with_old_partition(found.tagged.drop(PART), partition_of, lookup)
        found.updates = None  # counted per pretend partition: the profile counts the tagged records instead
    found.tagged = resolve(found.tagged, update_partition_path, deleting)
    return found


def _with_old_partition(tagged: DataFrame, partition_of: dict[str, str], lookup: Lookup) -> DataFrame:
    if not partition_of:
        return tagged.withColumn(OLD_PART, F.lit(None).cast("string"))
    where = lookup.spark.createDataFrame(sorted(partition_of.items()), f"{FILE_ID} string, {OLD_PART} string")
    return tagged.join(F.broadcast(where), on=FILE_ID, how="left")


def resolve(tagged: DataFrame, update_partition_path: bool, deleting: bool) -> DataFrame:
    """PART and FILE_ID of every tagged record by Hudi's rule (module docstring), DROP on the rows
    that only remove a moved record's old copy."""
    matched = F.col(FILE_ID).isNotNull()
    if deleting or not update_partition_path:
        # The key stays where it is: the update (or the delete) goes to the partition holding it.
        part = F.when(matched, F.col(OLD_PART)).otherwise(F.col(NEW_PART))
        return tagged.withColumn(PART, part).withColumn(DROP, F.lit(False)).drop(NEW_PART, OLD_PART)
    moved = matched & (F.col(OLD_PART) != F.col(NEW_PART))
    # A key may sit in several partitions (written under a non-global index): the copy in the new
    # partition, if any, is updated; every other copy is removed; one insert when none was there.
    key = Window.partitionBy(KEY)
    placed = (tagged.withColumn("_lf_at_home", F.max((matched & ~moved).cast("int")).over(key) == 1)
              .withColumn("_lf_first", F.row_number().over(key.orderBy(F.col(FILE_ID).asc_nulls_last())) == 1))
    insert_anew = moved & ~F.col("_lf_at_home") & F.col("_lf_first")
    role = F.explode(F.when(insert_anew, F.array(F.lit(1), F.lit(2)))
                     .when(moved, F.array(F.lit(1))).otherwise(F.array(F.lit(0))))
    # role 0: as tagged; 1: remove the copy in OLD_PART's file group; 2: insert in the new partition.
    roles = placed.withColumn("_lf_role", role).drop("_lf_at_home", "_lf_first")
    return (roles.withColumn(PART, F.when(F.col("_lf_role") == 1, F.col(OLD_PART)).otherwise(F.col(NEW_PART)))
            .withColumn(FILE_ID, F.when(F.col("_lf_role") == 2, F.lit(None).cast("string")).otherwise(F.col(FILE_ID)))
            .withColumn(DROP, F.col("_lf_role") == 1)
            .drop("_lf_role", NEW_PART, OLD_PART))

