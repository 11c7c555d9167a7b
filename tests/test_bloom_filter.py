"""Unit tests of Hudi's bloom filters: Hadoop's hash and bytes pinned, round trips, false-positive rates, DYNAMIC_V0's rows."""

import base64

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from labformat.errors import CorruptTableError
from labformat.fileformat.bloom_filter import (BloomSpec, DynamicBloomFilter, SimpleBloomFilter, decode,
                                               dynamic_rows, sizing)
from labformat.fileformat.footers import BLOOM_FOOTER, BLOOM_TYPE_FOOTER, KeyFooter, bloom_filter
from labformat.fileformat.murmur import bit_positions, murmur_hash

SIMPLE = BloomSpec("SIMPLE")
DYNAMIC = BloomSpec("DYNAMIC_V0")

# ---- known answers, derived by hand from Hadoop's MurmurHash (m = 0x5bd1e995) ---------------------
#
# Each value was worked through step by step with plain Python integers (a line-by-line
# transcription of org.apache.hadoop.util.hash.MurmurHash, separate from labformat's numpy code):
#   "a", seed 0: h = 0 ^ 1 = 0x1; tail 0x61: h = 0x60; h *= m: 0x6eb797e0; h ^= h >>> 13:
#       0x6eb4e25c; h *= m: 0x92697b8c; h ^= h >>> 15: 0x92685f5e = -1838653602.
#   "abc" (Hadoop's reversed tail: the first trailing byte shifted highest): h = 0x3;
#       ^= 0x61 << 16, ^= 0x62 << 8, ^= 0x63: 0x616260; *= m: 0x4b97a1e0; then 0x4b95fd5d,
#       0x69d31c21, 0x69d3cf87 = 1775488903. (Reference C MurmurHash2 would put 0x63 highest.)
#   "abcd" (one block, no tail): k = 0x64636261; k *= m; k ^= k >>> 24; k *= m: 0xecf5b977;
#       h = 4 * m ^ k = 0x83b21f23; then 0x83b602b3, 0x26877d2f, 0x26873021 = 646393889.
#   "abcde": the block as above, h = 0x27ec369e; tail 0x65: 0x27ec36fb; *= m: 0x56717317;
#       then 0x5673c09c, 0x5f0916cc, 0x5f09a8de = 1594468574.
#   "é" = c3 a9 (Java bytes are signed: sign-extended before the shift): h = 0x2;
#       ^= 0xffffc300 (0xc3 << 8): 0xffffc302; ^= 0xffffffa9: 0x3cab; *= m: 0x87f5f287;
#       then 0x87f1cd28, 0xe91dd048, 0xe91c0273 = -384040333.
KNOWN_HASHES = [("a", 0, -1838653602), ("abc", 0, 1775488903), ("abcd", 0, 646393889),
                ("abcde", 0, 1594468574), ("é", 0, -384040333)]


@pytest.mark.parametrize("key, seed, expected", KNOWN_HASHES)
def test_murmur_hash_matches_hadoop_worked_by_hand(key, seed, expected):
    assert murmur_hash(key, seed) == expected


def test_bit_positions_chain_the_seeds_and_take_javas_absolute_remainder():
    # Hadoop's HashFunction: h1 = murmur("a", 0) = -1838653602, h2 = murmur("a", h1) = 1529584742
    # (worked as above); positions |h % 16|: Java's -1838653602 % 16 = -2 -> 2, 1529584742 % 16 = 6.
    assert murmur_hash("a", -1838653602) == 1529584742
    [(idx, positions)] = list(bit_positions(["a"], 2, 16))
    assert idx.tolist() == [0] and positions.ravel().tolist() == [2, 6]


def test_simple_filter_bytes_are_hadoops_writable():
    # Hadoop's BloomFilter.write: int -1 (version), int 2 (hashes), byte 1 (Murmur), int 16
    # (bits), then (16 + 7) // 8 = 2 bytes, bit i under mask 1 << (i % 8): bits 2 and 6 are
    # 0x04 | 0x40 = 0x44 in byte 0. base64 of ff ff ff ff 00 00 00 02 01 00 00 00 10 44 00.
    bloom = SimpleBloomFilter.empty(16, 2)
    bloom.add(["a"])
    assert bloom.to_bytes().hex() == "ffffffff000000020100000010" + "4400"
    assert bloom.to_base64() == "/////wAAAAIBAAAAEEQA"


def test_sizing_is_hudis():
    # BloomFilterUtils: ceil(60000 * -ln(1e-9) / ln(2)^2) = ceil(2587965.6...) = 2587966 bits,
    # ceil(ln 2 * 2587966 / 60000) = ceil(29.897) = 30 hashes: the vector size (0x00277d3e) and
    # hash count (0x1e) in every footer of the Hudi-written tables in hudi-rs's test data.
    assert sizing(60_000, 1e-9) == (2_587_966, 30)
    assert sizing(100, 0.01) == (959, 7)  # ceil(958.5), ceil(6.65)


# Apache Hudi's own filter for one key: the base file byteField=20/shortField=100 of hudi-rs's
# test table v6_complexkeygen_hivestyle (DYNAMIC_V0, 60000 @ 1e-9) holds the single key
# "id:2,name:Bob"; these are the set bits of its only row, unpacked from the footer's bytes.
HUDI_BITS_OF_ID2_BOB = [56577, 143056, 146095, 344306, 471996, 519639, 582191, 644902, 684187, 819502,
                        833758, 849628, 877186, 934949, 958035, 1064615, 1159896, 1164397, 1438941, 1468461,
                        1646023, 1703647, 1717792, 1870065, 1939986, 2131210, 2312128, 2368278, 2436952, 2439179]


def test_positions_of_a_key_equal_those_apache_hudi_set():
    [(_, positions)] = list(bit_positions(["id:2,name:Bob"], 30, 2_587_966))
    assert sorted(positions.ravel().tolist()) == HUDI_BITS_OF_ID2_BOB


def test_dynamic_v0_header_is_the_one_hudi_wrote():
    # The first 40 base64 characters of every two-key footer in those Hudi tables: version -1,
    # 30 hashes, Murmur, 2587966 bits; 60000 keys per row, 2 keys in the last row, 1 row; then
    # the row's own header, starting with -1 again.
    encoded = DYNAMIC.build(["x1", "x2"]).to_base64()
    assert encoded[:40] == "/////wAAAB4BACd9PgAA6mAAAAACAAAAAf////8A"
    assert len(encoded) == 431_380  # as long as Hudi's: 25 + 13 + 323496 bytes, base64


# ---- round trips and rates ---------------------------------------------------------------------------

@settings(max_examples=40, deadline=None)
@given(st.lists(st.text(min_size=1, max_size=30), min_size=1, max_size=200, unique=True),
       st.sampled_from([SIMPLE, DYNAMIC, BloomSpec("SIMPLE", 50, 0.01), BloomSpec("DYNAMIC_V0", 20, 0.01, 70)]))
def test_no_false_negatives_and_exact_round_trips(keys, spec):
    bloom = spec.build(pa.array(keys, pa.string()))
    assert bloom.might_contain(np.array(keys, dtype=object)).all()
    again = decode(bloom.to_base64(), spec.type_code)
    assert again.to_base64() == bloom.to_base64()
    assert again.might_contain(keys).all()


def test_one_hash_per_key_whatever_the_input_container():
    keys = ["a", "bb", "ccc", "dddd", "ééé", "k" * 41]
    bloom = SIMPLE.build(keys)
    chunked = pa.chunked_array([pa.array(keys[:2]), pa.array(keys[2:])])
    assert SIMPLE.build(chunked).to_base64() == SIMPLE.build(pa.array(keys, pa.large_string())).to_base64() \
        == bloom.to_base64()
    assert bloom.might_contain(pa.array(keys).slice(2)).all()  # an Arrow slice: offsets start mid-buffer


@pytest.mark.parametrize("fpp", [0.05, 0.01, 0.001])
@pytest.mark.parametrize("kind", ["SIMPLE", "DYNAMIC_V0"])
def test_measured_false_positive_rate_is_near_the_configured_one(fpp, kind):
    members = [f"2024011509{i % 60:02d}_drone{i:06d}" for i in range(20_000)]
    probes = np.array([f"absent-{i}" for i in range(200_000)], dtype=object)
    rate = BloomSpec(kind, 20_000, fpp).build(members).might_contain(probes).mean()
    # Hudi rounds the hash count up, so the designed rate is a little under fpp; 200k probes
    # put the sampling error far below these bounds.
    assert fpp / 2 <= rate <= fpp * 1.5, rate


def test_a_filter_sized_for_fewer_entries_than_keys_lets_more_false_positives_through():
    keys = [f"2024011509{i % 60:02d}_drone{i:06d}" for i in range(3_000)]
    probes = np.array([f"absent-{i}" for i in range(50_000)], dtype=object)
    rates = {n: BloomSpec("SIMPLE", n, 0.01).build(keys).might_contain(probes).mean() for n in (3_000, 1_000, 300)}
    assert rates[3_000] <= 0.03
    assert rates[1_000] > 10 * rates[3_000] and rates[300] > 0.5
    for n, rate in rates.items():  # and the measured rate follows the formula
        predicted = BloomSpec("SIMPLE", n, 0.01).predicted_fpp(len(keys))
        assert abs(rate - predicted) <= max(0.2 * predicted, 5e-4), (n, rate, predicted)
    assert BloomSpec("SIMPLE", 30, 0.01).build(keys).might_contain(keys).all()  # however overfull


def test_predicted_fpp_is_the_configured_one_at_num_entries():
    for fpp in (0.05, 0.01, 1e-9):
        assert BloomSpec("SIMPLE", 60_000, fpp).predicted_fpp(60_000) == pytest.approx(fpp, rel=0.2)
    assert BloomSpec("SIMPLE", 60_000, 1e-9).predicted_fpp(700) < 1e-30
    assert BloomSpec("SIMPLE", 70, 1e-9).predicted_fpp(700) > 0.9
    # DYNAMIC_V0 adds rows instead: ten times over num_entries, still bounded by max entries.
    assert BloomSpec("DYNAMIC_V0", 70, 1e-9, 1_000).predicted_fpp(700) < 1e-7


# ---- DYNAMIC_V0 growing past its entries -----------------------------------------------------------

def _hudi_rows(keys: int, per_row: int, max_entries: int) -> tuple[list[int], int, int]:
    """InternalDynamicBloomFilter.add, one key at a time, as Hudi's Java runs it: the row each key
    goes to, the rows, and currentNbRecord."""
    rows, current, reached_max, index, out = 1, 0, False, 0, []
    for _ in range(keys):
        if reached_max:
            row = index % rows
            index += 1
        elif current >= per_row and rows * per_row < max_entries:
            rows, current, row = rows + 1, 0, rows
        elif current >= per_row:
            reached_max, row = True, 0
        else:
            row = rows - 1
        out.append(row)
        current += 1
    return out, rows, current


@pytest.mark.parametrize("keys", [0, 1, 99, 100, 101, 200, 201, 300, 301, 302, 1000])
def test_dynamic_rows_follow_hudis_add_key_by_key(keys):
    row, rows, last = dynamic_rows(keys, 100, 250)
    assert (row.tolist(), rows, last) == _hudi_rows(keys, 100, 250)


def test_dynamic_v0_grows_a_row_per_num_entries_keys_up_to_max_entries():
    keys = [f"k{i:05d}" for i in range(1_000)]
    probes = np.array([f"absent-{i}" for i in range(20_000)], dtype=object)
    spec = BloomSpec("DYNAMIC_V0", 100, 0.01, 250)
    sizes = {}
    for n in (100, 101, 250, 301, 1_000):
        bloom = spec.build(keys[:n])
        again = decode(bloom.to_base64(), "DYNAMIC_V0")
        sizes[n] = (len(again.rows), again.last_row_keys)
        assert again.might_contain(keys[:n]).all()
    # 100 keys fill row 1; the 101st opens row 2, the 201st row 3 (3 x 100 >= 250: the last);
    # from the 302nd key on they go round-robin, and the count of the last row keeps growing.
    assert sizes == {100: (1, 100), 101: (2, 1), 250: (3, 50), 301: (3, 101), 1_000: (3, 800)}
    # Within max entries, rows keep the rate near fpp; beyond, it degrades like SIMPLE's.
    within = spec.build(keys[:250]).might_contain(probes).mean()
    simple = BloomSpec("SIMPLE", 100, 0.01).build(keys[:250]).might_contain(probes).mean()
    assert within < 0.05 < simple
    assert spec.build(keys).might_contain(probes).mean() > 0.3


def test_dynamic_v0_with_one_row_holds_simples_bits():
    keys = [f"k{i}" for i in range(500)]
    simple = SimpleBloomFilter.from_bytes(base64.b64decode(SIMPLE.build(keys).to_base64()))
    dynamic = DYNAMIC.build(keys)
    assert len(dynamic.rows) == 1 and np.array_equal(dynamic.rows[0].bits, simple.bits)


# ---- decoding: type codes, corrupt filters, the old layout ------------------------------------------

@pytest.mark.parametrize("encoded, type_code", [
    ("", "SIMPLE"),
    ("not base64!", "SIMPLE"),
    ("/////wAAAAIBAAAAEEQ=", "SIMPLE"),  # truncated: 16 bits need 2 bytes
    ("/////wAAAAIAAAAAEEQA", "SIMPLE"),  # hash type 0 (Jenkins): Hudi never writes it
    ("AAAAAgAAAAIBAAAAEEQA", "SIMPLE"),  # version 2
    ("/////wAAAAIBAAAAEEQA", "DYNAMIC_V0"),  # a SIMPLE filter read as DYNAMIC_V0
    ("/////wAAAAIBAAAAEEQA", "BLOCKED_V9"),  # a type labformat does not know
])
def test_corrupt_or_unknown_filters_are_a_value_error(encoded, type_code):
    with pytest.raises(ValueError):
        decode(encoded, type_code)


def test_a_footer_without_type_code_is_simple_as_hudi_reads_it():
    assert type(decode("/////wAAAAIBAAAAEEQA", None)) is SimpleBloomFilter
    assert type(decode(DYNAMIC.build(["a"]).to_base64(), "dynamic_v0")) is DynamicBloomFilter


# labformat's first layout (LFBF1: SipHash, double hashing), as the old writer encoded the keys
# k1, k2, k3 at fpp 0.01 (64 bits, 15 hashes); its answers for these probes, recorded then.
LEGACY_FOOTER = {b"labformat_bloom_filter": b"TEZCRgFAAAAAAAAAAA8AAAAzbTssZYYt3w==",
                 b"labformat_bloom_filter_type": b"LFBF1_SIPHASH_DOUBLE_HASHING",
                 b"hoodie_min_record_key": b"k1", b"hoodie_max_record_key": b"k3"}


def test_tables_written_before_keep_their_filters_readable():
    footer = KeyFooter.parse(LEGACY_FOOTER)
    assert footer.bloom_type == "LFBF1_SIPHASH_DOUBLE_HASHING"
    answers = footer.bloom_filter().might_contain(["k1", "k2", "k3", "x1", "x2", "x3", "x4", "x5"]).tolist()
    assert answers == [True] * 3 + [False] * 5
    # ... but new footers carry Hudi's filter only.
    with pytest.raises(ValueError, match="Hudi's bloom filters only"):
        footer.entries()


def test_key_footer_writes_hudis_entries_and_reads_them_back():
    simple = KeyFooter("a", "z", SIMPLE.build(["a", "z"]).to_base64())
    assert simple.entries().keys() == {BLOOM_FOOTER, "hoodie_min_record_key", "hoodie_max_record_key"}
    dynamic = KeyFooter("a", "z", DYNAMIC.build(["a", "z"]).to_base64(), "DYNAMIC_V0")
    assert dynamic.entries()[BLOOM_TYPE_FOOTER] == "DYNAMIC_V0"
    for footer in (simple, dynamic):
        kv = {k.encode(): v.encode() for k, v in footer.entries().items()}
        assert KeyFooter.parse(kv) == footer
        assert footer.bloom_filter().might_contain(["a", "z", "m"]).tolist() == [True, True, False]
    old_key = {b"com.uber.hoodie.bloomfilter": simple.bloom.encode()}  # Hudi's key before Apache
    assert KeyFooter.parse(old_key).bloom == simple.bloom
    assert KeyFooter.parse({b"labformat_bloom_filter_type": b"SOMEONE_ELSES", b"labformat_bloom_filter": b"x"}) \
        == KeyFooter(None, None, None)


def test_a_corrupt_footer_filter_is_a_corrupt_table_error_naming_the_file(tmp_path):
    pq.write_table(pa.table({"_hoodie_record_key": ["a"]}), tmp_path / "f.parquet")
    writer = pq.ParquetWriter(tmp_path / "g.parquet", pa.schema([("_hoodie_record_key", pa.string())]))
    writer.add_key_value_metadata({BLOOM_FOOTER: "/////wAAAAIBAAAAEEQ=", BLOOM_TYPE_FOOTER: "SIMPLE"})
    writer.close()
    assert bloom_filter(tmp_path.as_uri(), "f.parquet") is None  # no filter: not an error
    with pytest.raises(CorruptTableError, match="g.parquet"):
        bloom_filter(tmp_path.as_uri(), "g.parquet")


def test_bloom_options():
    from labformat import config as C
    from labformat.errors import ConfigError

    default = C.write_options(None)
    assert (default.bloom_filter_type, default.bloom_num_entries, default.bloom_dynamic_max_entries) \
        == ("SIMPLE", 60_000, 100_000)
    by_key = C.write_options({"hoodie.bloom.index.filter.type": "dynamic_v0",
                        "hoodie.bloom.index.filter.dynamic.max.entries": "5000",
                        "hoodie.index.bloom.num_entries": "700"})
    assert (by_key.bloom_filter_type, by_key.bloom_dynamic_max_entries, by_key.bloom_num_entries) \
        == ("DYNAMIC_V0", 5000, 700)
    for bad in ({"bloom_filter_type": "BLOCKED"}, {"bloom_num_entries": 0}, {"bloom_num_entries": 1.5},
                {"bloom_dynamic_max_entries": 0}):
        with pytest.raises(ConfigError, match=next(iter(bad))):
            C.write_options(bad)


# ---- the BLOOM index's task on files in Apache Hudi's layout -------------------------------------

def _hudi_base_file(path, keys: list[str], spec: BloomSpec) -> None:
    """A base file as Apache Hudi writes one: the five meta columns first, the key range and the
    filter under Hudi's footer keys (the type code only for DYNAMIC_V0)."""
    n = len(keys)
    table = pa.table({"_hoodie_commit_time": ["20240418173213674"] * n,
                      "_hoodie_commit_seqno": [f"20240418173213674_0_{i}" for i in range(n)],
                      "_hoodie_record_key": keys, "_hoodie_partition_path": ["byteField=20"] * n,
                      "_hoodie_file_name": [path.name] * n, "id": list(range(n))})
    writer = pq.ParquetWriter(path, table.schema)
    writer.write_table(table)
    writer.add_key_value_metadata(KeyFooter(min(keys), max(keys), spec.build(keys).to_base64(), spec.type_code).entries())
    writer.close()


@pytest.mark.parametrize("spec", [SIMPLE, DYNAMIC, BloomSpec("DYNAMIC_V0", 50, 1e-9, 120)])
def test_the_bloom_index_checks_keys_against_a_file_in_hudis_layout(tmp_path, spec):
    from labformat.helper_columns import FILE_ID, KEY, PART
    from labformat.index.bloom import check_file

    name = "bb7c3a45-387f-490d-aab2-981c3f1a8ada-0_0-140-198_20240418173213674.parquet"
    in_file = [f"id:{i},name:n{i}" for i in range(150)]
    _hudi_base_file(tmp_path / name, in_file, spec)
    candidates = ["id:3,name:n3", "id:149,name:n149", "id:3,name:n4", "id:999,name:x"]
    table = pa.table({PART: ["byteField=20"] * 4, KEY: candidates, FILE_ID: ["bb7c3a45"] * 4})
    out = check_file(table, tmp_path.as_uri(), name).to_pylist()  # the filter comes from the footer
    assert sorted(r[KEY] for r in out if r[KEY] is not None) == ["id:149,name:n149", "id:3,name:n3"]
    [stats] = [r for r in out if r[KEY] is None]
    assert (stats["candidates"], stats["after_bloom"], stats["matched"]) == (4, 2, 2)


def test_exact_key_check_reports_each_key_found_once(tmp_path):
    """Task (c): the keys that passed the bloom filter and really are in the file, each once,
    even when a bulk insert left a key twice in that file."""
    from labformat.helper_columns import FILE_ID, KEY, PART
    from labformat.index.bloom import check_file

    in_file = ["k1", "k2", "k2", "k5", "k7"]
    pq.write_table(pa.table({"_hoodie_record_key": in_file}), tmp_path / "f1.parquet")
    bloom = ("SIMPLE", BloomSpec("SIMPLE", 5).build(in_file).to_base64())
    candidates = ["k2", "k3", "k7", "k9"]
    table = pa.table({PART: ["p"] * 4, KEY: candidates, FILE_ID: ["f1"] * 4})
    out = check_file(table, tmp_path.as_uri(), "f1.parquet", {"f1.parquet": bloom}).to_pylist()
    found = sorted(r[KEY] for r in out if r[KEY] is not None)
    assert found == ["k2", "k7"]
    [stats] = [r for r in out if r[KEY] is None]
    assert (stats["candidates"], stats["matched"]) == (4, 2) and stats["after_bloom"] >= 2
    assert all(r[FILE_ID] == "f1" and r[PART] == "p" for r in out)


def test_the_exact_check_counts_the_keys_it_reads(tmp_path):
    """keys_read: every row of a file the exact check opened; none when no candidate passed the
    filter, all of them for a file without a filter (Hudi writes none without meta fields)."""
    from labformat.helper_columns import FILE_ID, KEY, PART
    from labformat.index.bloom import check_file

    in_file = [f"k{i:03d}" for i in range(300)]
    pq.write_table(pa.table({"_hoodie_record_key": in_file}), tmp_path / "f1.parquet")
    exact = ("SIMPLE", BloomSpec("SIMPLE", 300).build(in_file).to_base64())
    full = ("SIMPLE", BloomSpec("SIMPLE", 3).build(in_file).to_base64())  # every bit set

    def stats(bloom, candidates):
        table = pa.table({PART: ["p"] * len(candidates), KEY: candidates, FILE_ID: ["f1"] * len(candidates)})
        blooms = {"f1.parquet": bloom} if bloom is not None else None
        [row] = [r for r in check_file(table, tmp_path.as_uri(), "f1.parquet", blooms).to_pylist() if r[KEY] is None]
        return row

    absent = [f"x{i}" for i in range(20)]
    assert (stats(exact, absent)["after_bloom"], stats(exact, absent)["keys_read"]) == (0, 0)
    row = stats(full, absent)  # an overfull filter passes them all: a false positive costs a file read
    assert (row["after_bloom"], row["matched"], row["keys_read"]) == (20, 0, 300)
    row = stats(exact, absent + ["k007"])
    assert (row["after_bloom"], row["matched"], row["keys_read"]) == (1, 1, 300)
    row = stats(None, absent + ["k007"])  # the file's footer has no filter
    assert (row["after_bloom"], row["matched"], row["keys_read"]) == (21, 1, 300)


@pytest.mark.spark
def test_a_dynamic_v0_table_writes_hudis_footers_and_upserts_through_them(spark, tmp_path):
    """hoodie.bloom.index.filter.type=DYNAMIC_V0, 10 keys per row up to 25: a GLOBAL_SORT bulk
    insert of 60 keys into 2 files gives each a filter of several rows, laid out as Hudi lays out
    that many keys; an upsert of 5 of them and 2 new keys finds exactly the 5 through them."""
    import labformat as lf

    opts = {"hoodie.bloom.index.filter.type": "DYNAMIC_V0", "hoodie.index.bloom.num_entries": 10,
            "hoodie.bloom.index.filter.dynamic.max.entries": 25}
    t = lf.Table.create(spark, tmp_path / "t", record_key="id", precombine_field="ts", partition_field=None,
                        options={"index_type": "BLOOM"})
    rows = [(f"k{i:03d}", i, 1) for i in range(60)]
    t.bulk_insert(spark.createDataFrame(rows, "id string, value long, ts long"),
                  {**opts, "bulk_insert_sort_mode": "GLOBAL_SORT", "bulk_insert_parallelism": 2})
    sizes = []
    for s in t.file_slices():
        meta = pq.read_metadata(tmp_path / "t" / s.path)
        footer = KeyFooter.parse(meta.metadata)
        assert footer.bloom_type == "DYNAMIC_V0"
        bloom = footer.bloom_filter()
        rows, last = dynamic_rows(meta.num_rows, 10, 25)[1:]
        assert (len(bloom.rows), bloom.per_row, bloom.last_row_keys) == (rows, 10, last)
        sizes.append(len(bloom.rows))
    assert max(sizes) >= 2 and sum(pq.read_metadata(tmp_path / "t" / s.path).num_rows for s in t.file_slices()) == 60
    batch = [(f"k{i:03d}", -i, 2) for i in (1, 17, 30, 44, 59)] + [("k999", 0, 2), ("j000", 0, 2)]
    report = t.upsert(spark.createDataFrame(batch, "id string, value long, ts long"), opts)
    assert (report.rows_updated, report.rows_inserted) == (5, 2)
    assert report.funnel.keys_matched == 5 and report.funnel.keys_false_positives == 0
    values = {r.id: r.value for r in t.read().collect()}
    assert len(values) == 62 and values["k017"] == -17 and values["k016"] == 16


def test_the_bloom_index_still_reads_a_base_file_of_a_table_written_before(tmp_path):
    """A base file with labformat's first filter in its footer (tables written before Hudi's
    filter) is checked through that filter: the legacy answers recorded above."""
    from labformat.helper_columns import FILE_ID, KEY, PART
    from labformat.index.bloom import check_file

    table = pa.table({"_hoodie_record_key": ["k1", "k2", "k3"]})
    writer = pq.ParquetWriter(tmp_path / "old.parquet", table.schema)
    writer.write_table(table)
    writer.add_key_value_metadata({k.decode(): v.decode() for k, v in LEGACY_FOOTER.items()})
    writer.close()
    candidates = ["k1", "k3", "x1", "x2"]
    batch = pa.table({PART: ["p"] * 4, KEY: candidates, FILE_ID: ["old"] * 4})
    out = check_file(batch, tmp_path.as_uri(), "old.parquet").to_pylist()
    [stats] = [r for r in out if r[KEY] is None]
    assert (stats["after_bloom"], stats["matched"]) == (2, 2)  # x1, x2 ruled out by the old filter
