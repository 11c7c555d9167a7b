"""scripts/inspect_table.py and labformat.lab.inspect: a table's timeline, file groups, footers and range pruning, read-only."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from labformat.errors import TableNotFoundError
from labformat.fileformat.bloom_filter import BloomSpec
from labformat.fileformat.footers import KeyFooter
from labformat.lab.inspect import inspect_table, render_text, save_charts

ROOT = Path(__file__).resolve().parents[1]
FIRST, SECOND, CLEAN, PENDING = "20240418173213674", "20240418173235694", "20240418173240001", "20240418173300000"


def _snapshot(root: Path) -> dict[str, str]:
    """Every file under the table, with a hash of its bytes: a write anywhere changes it."""
    return {str(p.relative_to(root)): hashlib.sha256(p.read_bytes()).hexdigest()
            for p in sorted(root.rglob("*")) if p.is_file()}


def _base_file(root: Path, partition: str, file_id: str, token: str, instant: str, keys: list[str]) -> dict:
    """A base file as Apache Hudi writes one (meta columns first, key range and DYNAMIC_V0 filter
    under Hudi's footer keys), and its write stat as Hudi's commit JSON holds it."""
    name = f"{file_id}_{token}_{instant}.parquet"
    n = len(keys)
    table = pa.table({"_hoodie_commit_time": [instant] * n,
                      "_hoodie_commit_seqno": [f"{instant}_0_{i}" for i in range(n)],
                      "_hoodie_record_key": keys, "_hoodie_partition_path": [partition] * n,
                      "_hoodie_file_name": [name] * n, "id": keys,
                      "byteField": [int(partition.split("=")[1])] * n})
    (root / partition).mkdir(parents=True, exist_ok=True)
    writer = pq.ParquetWriter(root / partition / name, table.schema)
    writer.write_table(table, row_group_size=2)  # several row groups for a few rows
    spec = BloomSpec("DYNAMIC_V0", 60_000, 1e-9, 100_000)
    writer.add_key_value_metadata(KeyFooter(min(keys), max(keys), spec.build(keys).to_base64(), "DYNAMIC_V0").entries())
    writer.close()
    return {"fileId": file_id, "path": f"{partition}/{name}", "prevCommit": "null", "numWrites": n, "numDeletes": 0,
            "numUpdateWrites": 0, "numInserts": n, "totalWriteBytes": (root / partition / name).stat().st_size,
            "totalWriteErrors": 0, "tempPath": None, "partitionPath": partition,
            "fileSizeInBytes": (root / partition / name).stat().st_size, "minEventTime": None, "maxEventTime": None}


def _commit(root: Path, instant: str, stats: list[dict]) -> None:
    by_partition: dict[str, list[dict]] = {}
    for s in stats:
        by_partition.setdefault(s["partitionPath"], []).append(s)
    body = {"partitionToWriteStats": by_partition, "compacted": False, "operationType": "UPSERT",
            "extraMetadata": {"schema": json.dumps({"type": "record", "name": "hudi_layout_record", "fields": [
                {"name": "id", "type": "string"}, {"name": "byteField", "type": "long"}]})}}
    hoodie = root / ".hoodie"
    (hoodie / f"{instant}.commit.requested").write_text("")
    (hoodie / f"{instant}.inflight").write_text("")
    (hoodie / f"{instant}.commit").write_text(json.dumps(body))


@pytest.fixture
def hudi_table(tmp_path) -> Path:
    """A copy-on-write table in Apache Hudi 0.14's layout (table version 6), hive-style partitions
    byteField=10 and byteField=20. History: FIRST writes one file group per partition, SECOND
    rewrites byteField=10's (two slices) and adds a second one there; then a clean instant and a
    commit still requested. Latest: 3 base files, key ranges [k01, k04], [k10, k12], [k20, k21]."""
    root = tmp_path / "hudi_layout"
    (root / ".hoodie").mkdir(parents=True)
    (root / ".hoodie" / "hoodie.properties").write_text("\n".join([
        "#Properties saved on 2024-04-18T17:32:10.123Z", "hoodie.table.name=hudi_layout",
        "hoodie.table.type=COPY_ON_WRITE", "hoodie.table.version=6", "hoodie.timeline.layout.version=1",
        "hoodie.table.recordkey.fields=id", "hoodie.table.partition.fields=byteField",
        "hoodie.table.keygenerator.class=org.apache.hudi.keygen.SimpleKeyGenerator",
        "hoodie.datasource.write.hive_style_partitioning=true", "hoodie.table.base.file.format=PARQUET",
        "hoodie.populate.meta.fields=true", "hoodie.archivelog.folder=archived", ""]))
    a, b, c = ("a22e8257-e249-45e9-ba46-115bc85adcba-0", "bb7c3a45-387f-490d-aab2-981c3f1a8ada-0",
               "4668e35e-bff8-4be9-9ff2-e7fb17ecb1a7-0")
    _commit(root, FIRST, [_base_file(root, "byteField=10", a, "0-140-198", FIRST, ["k01", "k02", "k03"]),
                          _base_file(root, "byteField=20", b, "1-140-199", FIRST, ["k20", "k21"])])
    second = _base_file(root, "byteField=10", a, "0-161-223", SECOND, ["k01", "k02", "k03", "k04"])
    _commit(root, SECOND, [{**second, "prevCommit": FIRST},
                           _base_file(root, "byteField=10", c, "1-161-224", SECOND, ["k10", "k11", "k12"])])
    (root / ".hoodie" / f"{CLEAN}.clean.requested").write_text("")
    (root / ".hoodie" / f"{CLEAN}.clean.inflight").write_text("")
    (root / ".hoodie" / f"{CLEAN}.clean").write_text("{}")
    (root / ".hoodie" / f"{PENDING}.commit.requested").write_text("")
    return root


def test_inspects_a_table_in_hudis_layout_from_timeline_listing_and_footers(hudi_table, tmp_path):
    before = _snapshot(hudi_table)
    ins = inspect_table(hudi_table, keys=["k02", "k11", "k15", "k99"])

    assert ins.timeline[["instant", "action", "state"]].values.tolist() == [
        [FIRST, "commit", "completed"], [SECOND, "commit", "completed"], [CLEAN, "clean", "completed"],
        [PENDING, "commit", "requested"]]
    assert ins.timeline["rows_written"].tolist()[:2] == [5, 7]
    groups = ins.file_groups.set_index("file_id")
    assert groups["slices"].to_dict() == {"a22e8257-e249-45e9-ba46-115bc85adcba-0": 2,
                                          "bb7c3a45-387f-490d-aab2-981c3f1a8ada-0": 1,
                                          "4668e35e-bff8-4be9-9ff2-e7fb17ecb1a7-0": 1}
    files = ins.base_files.set_index("file_id")
    assert files.loc["a22e8257-e249-45e9-ba46-115bc85adcba-0", ["instant", "min_key", "max_key", "footer_rows",
                                                               "row_groups", "bloom_type"]].tolist() \
        == [SECOND, "k01", "k04", 4, 2, "DYNAMIC_V0"]
    assert (files["bloom_bytes"] == 431_380).all()  # Hudi's default DYNAMIC_V0 filter, base64
    assert sorted(ins.row_groups["rows"].tolist()) == [1, 2, 2, 2, 2]  # latest files, row groups of 2 rows
    first_group = ins.row_groups[ins.row_groups["path"].str.contains(SECOND + ".parquet") &
                                 ins.row_groups["path"].str.startswith("byteField=10/a22e")]
    assert first_group[["min_key", "max_key"]].values.tolist() == [["k01", "k02"], ["k03", "k04"]]
    # Keys given by hand are looked up in every partition: k02 and k11 fall in one range each,
    # k15 and k99 in none.
    assert ins.pruning[["key", "files_in_partition", "kept_by_range"]].values.tolist() == [
        ["k02", 3, 1], ["k11", 3, 1], ["k15", 3, 0], ["k99", 3, 0]]

    text = render_text(ins)
    for expected in ("Table hudi_layout", "SimpleKeyGenerator", "Timeline: 4 instants (3 completed)",
                     "File groups: 3 in 2 partition(s), 4 file slices", "Row groups: 5",
                     "Range pruning for 4 keys: keeps 0.5 of 3.0 base files per key"):
        assert expected in text, expected
    charts = save_charts(ins, tmp_path / "charts")
    assert sorted(p.name for p in charts) == ["file_sizes.png", "key_ranges.png", "range_pruning.png", "timeline.png"]
    assert all(p.stat().st_size > 1000 for p in charts)
    assert _snapshot(hudi_table) == before  # no byte changed, no file added


def test_sampled_keys_come_from_the_tables_files_and_stay_in_their_partition(hudi_table):
    before = _snapshot(hudi_table)
    ins = inspect_table(hudi_table, sample=8, seed=3)
    assert len(ins.pruning) == 8
    in_table = {"byteField=10": {"k01", "k02", "k03", "k04", "k10", "k11", "k12"}, "byteField=20": {"k20", "k21"}}
    for row in ins.pruning.itertuples():
        assert row.key in in_table[row.partition_path]
        assert row.files_in_partition == (2 if row.partition_path == "byteField=10" else 1)
        assert row.kept_by_range == 1  # disjoint ranges: exactly the file that holds it
    assert inspect_table(hudi_table, sample=8, seed=3).pruning.equals(ins.pruning)  # seeded
    assert _snapshot(hudi_table) == before


def test_charts_are_refused_inside_the_table_and_a_non_table_is_named(hudi_table, tmp_path):
    ins = inspect_table(hudi_table, sample=2)
    with pytest.raises(ValueError, match="outside the table"):
        save_charts(ins, hudi_table / "charts")
    assert not (hudi_table / "charts").exists()
    with pytest.raises(TableNotFoundError, match="no .hoodie/hoodie.properties"):
        inspect_table(tmp_path / "nothing-here")


def test_the_script_prints_the_inspection_and_saves_charts(hudi_table, tmp_path, capsys):
    import importlib.util

    spec = importlib.util.spec_from_file_location("inspect_table_script", ROOT / "scripts" / "inspect_table.py")
    script = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(script)
    before = _snapshot(hudi_table)
    assert script.main([str(hudi_table), "--charts", str(tmp_path / "out"), "--key", "k03"]) == 0
    out = capsys.readouterr().out
    assert "Range pruning for 1 keys: keeps 1.0 of 3.0" in out and out.count("chart: ") == 4
    assert _snapshot(hudi_table) == before
    assert script.main([str(tmp_path / "nothing-here")]) == 2
    assert "holds no Hudi table" in capsys.readouterr().err


@pytest.mark.spark
def test_inspects_a_labformat_table_without_changing_it(spark, tmp_path):
    """Bulk insert 40 rows (sorted: 4 files of 10 keys), upsert 5 of them: 4 file groups, one
    with two slices; every sampled key falls in exactly one file's range."""
    import labformat as lf

    rows = [(f"k{i:03d}", i, 1) for i in range(40)]
    t = lf.Table.create(spark, tmp_path / "t", record_key="id", precombine_field="ts", partition_field=None,
                        options={"index_type": "BLOOM"})
    t.bulk_insert(spark.createDataFrame(rows, "id string, value long, ts long"),
                  {"bulk_insert_sort_mode": "GLOBAL_SORT", "bulk_insert_parallelism": 4, "bloom_num_entries": 100})
    t.upsert(spark.createDataFrame([(f"k{i:03d}", -i, 2) for i in range(5)], "id string, value long, ts long"),
             {"bloom_num_entries": 100, "small_file_limit": 0})
    before = _snapshot(tmp_path / "t")
    ins = inspect_table(tmp_path / "t", sample=10)
    assert ins.timeline["state"].tolist() == ["completed", "completed"]
    assert ins.timeline["operation"].tolist() == ["BULK_INSERT", "UPSERT"]
    latest = {s.path: s for s in t.file_slices()}
    assert set(ins.base_files["path"]) == set(latest)
    assert ins.base_files["footer_rows"].sum() == 40 and set(ins.base_files["bloom_type"]) == {"SIMPLE"}
    assert ins.file_groups["slices"].sum() == len(ins.file_slices) == len(latest) + 1
    assert (ins.pruning["kept_by_range"] == 1).all() and len(ins.pruning) == 10
    save_charts(ins, tmp_path / "charts")
    assert _snapshot(tmp_path / "t") == before


def test_inspects_a_merge_on_read_table_with_its_log_files(spark, tmp_path):
    """v6 MOR, bulk insert of 40 rows in 4 files, then an upsert of 5 keys of the first file: its
    latest slice gains one log file, the others none; the table is left as it was."""
    import labformat as lf

    t = lf.Table.create(spark, tmp_path / "m", record_key="id", precombine_field="ts", partition_field=None,
                        table_type="MERGE_ON_READ")
    t.bulk_insert(spark.createDataFrame([(f"k{i:03d}", i, 1) for i in range(40)], "id string, value long, ts long"),
                  {"bulk_insert_sort_mode": "GLOBAL_SORT", "bulk_insert_parallelism": 4})
    t.upsert(spark.createDataFrame([(f"k{i:03d}", -i, 2) for i in range(5)], "id string, value long, ts long"),
             {"small_file_limit": 0})
    before = _snapshot(tmp_path / "m")
    ins = inspect_table(tmp_path / "m", sample=5)
    assert ins.timeline["action"].tolist() == ["deltacommit", "deltacommit"]
    groups = ins.file_groups.set_index("file_id")
    with_logs = {s.file_id: (len(s.log_paths), s.log_bytes) for s in t.file_slices() if s.has_logs}
    assert len(with_logs) == 1 and groups["log_files"].sum() == 1
    (file_id, (count, size)), = with_logs.items()
    assert (groups.loc[file_id, "log_files"], groups.loc[file_id, "log_bytes"]) == (count, size) and size > 0
    assert "1 log files in the latest slices" in render_text(ins)
    assert _snapshot(tmp_path / "m") == before
