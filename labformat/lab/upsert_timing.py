"""Where an upsert's time goes: steps 1 to 6 timed alone (no write), indexes compared on them, what the tag and write steps move.

`plan_only` runs an upsert's planning (deduplicate, latest file slices, tag, small files, record
size, assign inserts) exactly as `Table.upsert` does, then ends it as an empty write ends: no
instant is started and nothing is written, so the same table serves any number of timed runs
without a copy, and a run costs its tag step, not a rewrite of the files it touches.
"""

from __future__ import annotations

from typing import Any, Iterable, Mapping

import pandas as pd

import labformat as lf
from labformat import config as C
from labformat import datasets
from labformat.lab import workshop
from labformat.lab.frames import key_ranges_frame
from labformat.model.enums import IndexType, Operation, SortMode
from labformat.write.operation import execute
from labformat.write.upsert import Upsert

# Steps that plan on the driver, between the tag step's Spark job and the write's.
PLANNING_STEPS = ("validate", "latest_file_slices", "small_files", "record_size", "assign_inserts",
                  "start_instant", "commit")


class _PlanOnly(Upsert):
    """An upsert that stops after step 6: its plan says there is nothing to write."""

    def plan(self, run):
        state = super().plan(run)
        state.nothing_to_do = True
        return state


def plan_only(table: lf.Table, batch, options: Mapping[str, Any] | None = None) -> lf.WriteReport:
    """Steps 1 to 6 of an upsert of `batch` into `table`, timed, nothing written (its report has no instant)."""
    return execute(_PlanOnly(batch, Operation.UPSERT), table.context(), C.write_options(dict(options or {})))


def compare_index_tags(base: lf.Table, spec: datasets.DatasetSpec, indexes: Iterable[str], day: int = 1,
                       options: Mapping[str, Any] | None = None, repeats: int = 5, workdir=None,
                       progress: bool = False) -> tuple[pd.DataFrame, pd.DataFrame]:
    """Batch `day` through each index: one real upsert each on a fresh copy of the history (what it reads,
    rewrites and creates), then its tag step alone (`plan_only`) `repeats` times per index, the indexes
    interleaved (order reversed every other repetition) after one untimed run each.

    BLOOM and SIMPLE run on `base`; BUCKET needs its own layout, so the history is bulk inserted once
    into a BUCKET table. Returns (upserts: one row per index: bucket_num, keys_read_by_tag,
    files_rewritten, rows_rewritten, files_created, file_groups_after, seconds, tag_s, write_s;
    tags: one row per timed run: index, repeat, tag_s, deduplicate_s, keys_read_by_tag).
    """
    from tqdm.auto import tqdm

    from labformat.lab.sweeps import copy_table

    spark = base.spark
    cached = datasets.generate(spark, spec)
    batch = datasets.load_batch(spark, cached, day)
    options = dict(options or {})
    indexes = [IndexType(i) for i in indexes]
    origins = {}
    for index in indexes:
        if index is IndexType.BUCKET:
            bucket = lf.Table.create(spark, workshop.scratch("index-bucket-base", workdir), record_key=datasets.RECORD_KEY,
                                     precombine_field=datasets.PRECOMBINE_FIELD, partition_field=None,
                                     options={"index_type": IndexType.BUCKET})
            bucket.bulk_insert(datasets.load_history(spark, cached), {**options, "bulk_insert_sort_mode": SortMode.GLOBAL_SORT})
            origins[index] = bucket
        else:
            origins[index] = base
    upserts = []
    for index in indexes:
        copy = copy_table(origins[index], f"index-{index.lower()}", workdir)
        try:
            report = copy.upsert(batch, {**options, "index_type": index})
        finally:
            workshop.drop(copy.path)
        upserts.append({"index": index.value,
                        "bucket_num": origins[index].config.bucket_num if index is IndexType.BUCKET else None,
                        "keys_read_by_tag": report.funnel.keys_read, "files_rewritten": report.files_rewritten,
                        "rows_rewritten": sum(f.rows for f in report.files if not f.created),
                        "files_created": report.files_created,
                        "file_groups_after": len(key_ranges_frame(origins[index])) + report.files_created,
                        "seconds": report.seconds, "tag_s": report.step("tag").seconds,
                        "write_s": report.step("write").seconds})
    for index in indexes:  # every index's code path has run once before any is timed
        plan_only(origins[index], batch, {**options, "index_type": index})
    runs = [(r, i) for r in range(1, repeats + 1) for i in (indexes if r % 2 else indexes[::-1])]
    tags = []
    for repeat, index in tqdm(runs, desc="tag steps", disable=not progress):
        report = plan_only(origins[index], batch, {**options, "index_type": index})
        tags.append({"index": index.value, "repeat": repeat, "tag_s": report.step("tag").seconds,
                     "deduplicate_s": report.step("deduplicate").seconds, "keys_read_by_tag": report.funnel.keys_read})
    return pd.DataFrame(upserts).set_index("index"), pd.DataFrame(tags)


def step_shares(days: pd.DataFrame) -> pd.DataFrame:
    """Per upsert day of `DailyRun.to_pandas()`: seconds, and the share of them in the tag step (with
    step 1's shuffle, which runs in its Spark job), in the write step, and in the planning steps
    (`PLANNING_STEPS`, on the driver), with the tasks of the tag and write steps."""
    total = days["seconds"].astype(float)
    planning = sum(days[f"{s}_s"].fillna(0) for s in PLANNING_STEPS if f"{s}_s" in days.columns)
    return pd.DataFrame({"day": days["day"], "seconds": total,
                         "tag_s": days["tag_s"], "write_s": days["write_s"],
                         "deduplicate_s": days["deduplicate_s"],
                         "tag_share": days["tag_s"] / total, "write_share": days["write_s"] / total,
                         "planning_share": planning / total,
                         "tag_tasks": days["tag_tasks"], "write_tasks": days["write_tasks"]}).set_index("day")


def tag_and_write_bytes(table: lf.Table, report: lf.WriteReport) -> dict[str, int]:
    """What the tag and write steps of `report` (an upsert of `table`) read and wrote, from the files on
    disk (metadata only): the footers range pruning read (every base file of the snapshot before it,
    each carrying its bloom filter), the record-key column chunks the exact check read (of the files
    it opened: those the upsert rewrote, when the filters let nothing through in vain), and the bytes
    the write step read (those files, whole) and wrote."""
    from labformat.fileformat.footers import read_footer

    funnel = report.funnel
    if funnel.after_bloom != funnel.matched:
        raise lf.LabformatError("the exact check opened files the upsert did not rewrite: their bytes are not counted here")
    names = [i.time for i in table.timeline() if i.action.value in ("commit", "replacecommit")]
    if report.instant not in names or names.index(report.instant) == 0:
        raise lf.LabformatError(f"{report.instant} is not an upsert after an earlier commit of {table.path}")
    before = table.file_slices(as_of=names[names.index(report.instant) - 1])
    rewritten = {f.file_id for f in report.files if not f.created}
    footers = keys = 0
    for s in before:
        meta = read_footer(table.storage.base_uri, s.path)
        footers += meta.serialized_size
        if s.file_id in rewritten:
            for g in range(meta.num_row_groups):
                group = meta.row_group(g)
                keys += sum(group.column(c).total_compressed_size for c in range(group.num_columns)
                            if group.column(c).path_in_schema == "_hoodie_record_key")
    return {"footers_read": len(before), "footer_bytes": footers, "files_checked": len(rewritten),
            "key_column_bytes": keys, "write_read_bytes": report.details.bytes_read,
            "write_written_bytes": report.bytes_written}
