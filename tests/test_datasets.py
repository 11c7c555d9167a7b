"""Tests of the drone telemetry generator: keys, determinism, batch composition, plausibility, cache."""

from __future__ import annotations

import math
import re
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from pyspark.sql import functions as F

from labformat import datasets
from labformat.errors import ConfigError

pytestmark = pytest.mark.spark

MONOTONIC_KEY = re.compile(r"^\d{12}_drone\d{4}$")
UUID_LIKE = re.compile(r"^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$")

# One tiny spec with fractions large enough that 2 drones give stable counts.
BUSY = dict(update_fraction=0.2, late_fraction=0.05, duplicate_fraction=0.05)


@pytest.fixture(scope="module")
def tiny_history(spark) -> pd.DataFrame:
    """History of the tiny preset (2 drones x 2 days = 5,760 rows) on the driver, for checks in pandas."""
    return datasets.history(spark, datasets.spec("tiny")).toPandas()


@pytest.fixture(scope="module")
def busy_batch(spark) -> pd.DataFrame:
    """Batch 2 of tiny with BUSY fractions: new day 2024-01-18, previous day 01-17, older days 01-15 and 01-16."""
    return datasets.batch(spark, datasets.spec("tiny", **BUSY), 2).toPandas()


def test_schema_is_exact(spark):
    df = datasets.history(spark, "tiny")
    assert [(f.name, f.dataType.simpleString()) for f in df.schema] == [
        ("record_key", "string"), ("drone_id", "string"), ("ts", "timestamp"), ("day", "string"),
        ("lat", "double"), ("lon", "double"), ("altitude_m", "double"), ("speed_mps", "double"),
        ("heading_deg", "double"), ("battery_pct", "double"), ("temperature_c", "double"),
        ("signal_dbm", "int"), ("status", "string"), ("updated_at", "timestamp"),
    ]  # fmt: skip
    assert df.schema == datasets.SCHEMA
    assert datasets.batch(spark, "tiny", 1).schema == datasets.SCHEMA
    assert datasets.history(spark, datasets.spec("tiny", key_style="random")).schema == datasets.SCHEMA


def test_keys_encode_minute_and_drone_and_sort_in_time_order(tiny_history):
    h = tiny_history
    assert len(h) == 2 * 2 * 1440
    assert h.record_key.str.match(MONOTONIC_KEY).all()
    assert h.record_key.is_unique
    assert h.record_key.notna().all() and h.updated_at.notna().all()
    assert (h.record_key.str[:12] == h.ts.dt.strftime("%Y%m%d%H%M")).all()
    assert (h.record_key.str[13:] == h.drone_id).all()
    assert (h.day == h.ts.dt.strftime("%Y-%m-%d")).all()
    assert set(h.drone_id) == {"drone0000", "drone0001"}
    assert h.ts.min() == pd.Timestamp("2024-01-15 00:00") and h.ts.max() == pd.Timestamp("2024-01-16 23:59")
    by_key = h.sort_values("record_key")
    assert by_key.ts.is_monotonic_increasing
    # A reading is produced after its minute, within the minute that follows.
    delay = (h.updated_at - h.ts).dt.total_seconds()
    assert delay.between(30, 60, inclusive="left").all()


def test_same_seed_same_data_for_any_partition_count(spark):
    tiny = datasets.spec("tiny", **BUSY)
    for make in (lambda n: datasets.history(spark, tiny, num_partitions=n),
                 lambda n: datasets.batch(spark, tiny, 2, num_partitions=n)):
        one, three = datasets.fingerprint(make(1)), datasets.fingerprint(make(3))
        assert one == three
    other_seed = datasets.history(spark, datasets.spec("tiny", seed=7), num_partitions=3)
    assert datasets.fingerprint(other_seed) != datasets.fingerprint(datasets.history(spark, tiny))


def test_batch_is_new_day_plus_corrections_plus_stale_duplicates(spark, tiny_history, busy_batch):
    b, per_day = busy_batch, 2 * 1440
    winners = b.sort_values("updated_at").drop_duplicates("record_key", keep="last")
    days = winners.day.value_counts().to_dict()
    # Inserts: every reading of the new day, once.
    assert days.pop("2024-01-18") == per_day
    # Updates: about update_fraction of the previous day.
    assert abs(days.pop("2024-01-17") / per_day - BUSY["update_fraction"]) < 0.04
    # Late corrections: about late_fraction of a day, spread over both older days.
    assert set(days) == {"2024-01-15", "2024-01-16"}
    assert abs(sum(days.values()) / per_day - BUSY["late_fraction"]) < 0.02
    # Corrections are produced after the new day closes; new readings within their minute.
    corrections = winners[winners.day != "2024-01-18"]
    assert (corrections.updated_at >= pd.Timestamp("2024-01-19 00:30")).all()
    # A correction changes the values of the reading it corrects.
    old = tiny_history.set_index("record_key").loc[corrections.record_key[corrections.day < "2024-01-17"]]
    new = corrections.set_index("record_key").loc[old.index]
    assert (new.updated_at > old.updated_at).all()
    assert ((new.temperature_c != old.temperature_c) | (new.battery_pct != old.battery_pct)).all()
    assert (new.ts == old.ts).all() and (new.lat == old.lat).all()

    # Duplicates: about duplicate_fraction of the batch, each an older, different version.
    counts = b.record_key.value_counts()
    assert counts.max() == 2
    dup_keys = counts[counts == 2].index
    assert abs(len(dup_keys) / len(winners) - BUSY["duplicate_fraction"]) < 0.015
    assert len(b) == len(winners) + len(dup_keys)
    # Keeping the newest updated_at per key gives exactly the batch generated without duplicates.
    clean = datasets.batch(spark, datasets.spec("tiny", **{**BUSY, "duplicate_fraction": 0.0}), 2).toPandas()
    pd.testing.assert_frame_equal(
        winners.sort_values("record_key").reset_index(drop=True), clean.sort_values("record_key").reset_index(drop=True)
    )
    stale = b.drop(winners.index).set_index("record_key").sort_index()
    newest = clean.set_index("record_key").loc[stale.index]
    assert len(stale) == len(dup_keys)
    assert (stale.updated_at < newest.updated_at).all()  # strictly older: no ties
    assert ((stale.temperature_c != newest.temperature_c) & (stale.signal_dbm != newest.signal_dbm)).all()


def test_batch_parts_name_each_kind_of_row(spark):
    tiny = datasets.spec("tiny", **BUSY)
    parts = datasets.batch_parts(spark, tiny, 2)
    assert parts.inserts.count() == 2 * 1440
    assert parts.updates.where(F.col("day") != "2024-01-17").count() == 0
    assert parts.late.where(F.col("day") >= "2024-01-17").count() == 0
    assert datasets.fingerprint(parts.union()) == datasets.fingerprint(datasets.batch(spark, tiny, 2))


def test_random_keys_are_the_same_rows_without_time_order(spark, tiny_history):
    tiny_random = datasets.spec("tiny", key_style="random")
    r = datasets.history(spark, tiny_random).toPandas()
    assert len(r) == len(tiny_history)
    assert r.record_key.str.match(UUID_LIKE).all() and r.record_key.is_unique
    values = [c for c in datasets.COLUMNS if c != "record_key"]
    pd.testing.assert_frame_equal(
        r[values].sort_values(["ts", "drone_id"]).reset_index(drop=True),
        tiny_history[values].sort_values(["ts", "drone_id"]).reset_index(drop=True),
    )
    # Rank correlation of key and time: 1 for monotonic keys, about 0 for random ones.
    assert tiny_history.record_key.rank().corr(tiny_history.ts.rank()) > 0.99
    assert abs(r.record_key.rank().corr(r.ts.rank())) < 0.05
    # Corrections of a reading carry that reading's random key, so upserts still find it.
    corrections = datasets.batch(spark, tiny_random, 1).where(F.col("day") < "2024-01-17").toPandas()
    assert len(corrections) > 0 and corrections.record_key.isin(r.record_key).all()


def _metres(lat1, lon1, lat2, lon2):
    north = (lat2 - lat1) * 111_320.0
    east = (lon2 - lon1) * 111_320.0 * np.cos(np.radians(lat1))
    return north, east


def test_values_are_plausible(tiny_history):
    h = tiny_history.sort_values(["drone_id", "ts"])
    assert h.battery_pct.between(0, 100).all()
    assert set(h.status) <= set(datasets.STATUSES) and {"flying", "charging", "landed"} <= set(h.status)
    ground = h[h.status != "flying"]
    assert (ground.altitude_m == 0).all() and (ground.speed_mps == 0).all()
    assert (h[h.status == "flying"].altitude_m > 0).all()
    assert h.speed_mps.between(0, 25).all() and h.heading_deg.between(0, 360, inclusive="left").all()
    assert h.signal_dbm.between(-120, -30).all() and h.temperature_c.between(-20, 30).all()

    nxt = h.groupby("drone_id").shift(-1)
    step = (nxt.ts - h.ts) == pd.Timedelta(minutes=1)
    both_flying = step & (h.status == "flying") & (nxt.status == "flying")
    north, east = _metres(h.lat, h.lon, nxt.lat, nxt.lon)
    moved = np.hypot(north, east)
    # Continuous flight: under 25 m/s, and the distance flown matches the reported speed.
    assert both_flying.sum() > 500
    assert (moved[both_flying] < 25 * 60).all()
    mean_speed = (h.speed_mps + nxt.speed_mps) / 2 * 60
    assert (abs(moved - mean_speed)[both_flying] < 0.05 * mean_speed[both_flying] + 2).all()
    # Heading is the direction of motion: compare the mean heading of two minutes with the bearing between them.
    bearing = np.degrees(np.arctan2(east, north))
    a, b = np.radians(h.heading_deg), np.radians(nxt.heading_deg)
    mean_heading = np.degrees(np.arctan2(np.sin(a) + np.sin(b), np.cos(a) + np.cos(b)))
    gap = abs((bearing - mean_heading + 180) % 360 - 180)
    moving = both_flying & (moved > 30)
    assert moving.sum() > 500 and (gap[moving] < 3).all()
    # Landed and charging drones sit at home: they do not move.
    both_ground = step & (h.status != "flying") & (nxt.status != "flying")
    assert both_ground.sum() > 500 and (moved[both_ground] < 1).all()
    # Batteries drain in flight and charge on the charger.
    dbat = nxt.battery_pct - h.battery_pct
    assert (dbat[both_flying] < 0).all()
    charging = step & (h.status == "charging") & (nxt.status == "charging")
    assert (dbat[charging] >= 0).all() and (dbat[charging] > 0).any()
    assert (h[h.status == "charging"].battery_pct.max() == 100) and h.battery_pct.min() < 50


def test_bad_specs_and_days_raise_config_error_naming_them(spark):
    with pytest.raises(ConfigError, match="huge"):
        datasets.spec("huge")
    with pytest.raises(ConfigError, match="drone_count"):
        datasets.spec("tiny", drone_count=3)
    with pytest.raises(ConfigError, match="key_style"):
        datasets.spec("tiny", key_style="sorted")
    with pytest.raises(ConfigError, match="update_fraction"):
        datasets.spec("tiny", update_fraction=1.5)
    with pytest.raises(ConfigError, match="late_fraction"):
        datasets.spec("tiny", late_fraction=-0.1)
    tiny = datasets.spec("tiny")
    for day in (0, tiny.batch_days + 1):
        with pytest.raises(ConfigError, match="batch day"):
            datasets.batch(spark, tiny, day)
    assert datasets.spec("tiny", drones=3).drones == 3 and datasets.PRESETS["tiny"].drones == 2
    # The seed's workload by default; late corrections are a named scenario.
    assert datasets.spec("tiny").late_fraction == 0 and datasets.spec("tiny", scenario="late").late_fraction > 0
    assert datasets.spec("tiny", scenario="late", late_fraction=0.02).late_fraction == 0.02
    with pytest.raises(ConfigError, match="unknown dataset scenario 'lat'"):
        datasets.spec("tiny", scenario="lat")


def test_presets_scale_from_tiny_to_large():
    rows = {name: s.history_rows for name, s in datasets.PRESETS.items()}
    assert rows["tiny"] < 10_000
    assert 400_000 <= rows["small"] <= 1_100_000
    # The laptop default upserts a month: range pruning needs the weeks to show its trend.
    assert datasets.PRESETS["small"].batch_days >= 28
    assert 10_000_000 <= rows["medium"] <= 20_000_000
    assert rows["large"] >= 100_000_000


def test_generate_writes_once_and_reads_back(spark, tmp_path, monkeypatch):
    tiny = datasets.spec("tiny", batch_days=2)
    monkeypatch.setenv("LABFORMAT_CACHE", str(tmp_path / "cache"))
    assert datasets.default_cache_dir(tiny) == tmp_path / "cache" / "datasets" / f"tiny-monotonic-{tiny.digest}"

    cached = datasets.generate(spark, tiny)
    assert Path(cached.root) == datasets.default_cache_dir(tiny) and Path(cached.marker_path).is_file()
    assert len(cached.batch_paths) == 2 and cached.history_rows == tiny.history_rows
    assert datasets.fingerprint(datasets.load_history(spark, cached)) == datasets.fingerprint(datasets.history(spark, tiny))
    reloaded = datasets.load_batch(spark, cached, 2)
    assert reloaded.schema == datasets.SCHEMA
    assert datasets.fingerprint(reloaded) == datasets.fingerprint(datasets.batch(spark, tiny, 2))
    assert cached.batch_rows == [datasets.load_batch(spark, cached, 1).count(), reloaded.count()]

    # A second call finds the marker and writes nothing.
    files = sorted(Path(cached.root).rglob("*"))
    stamps = [f.stat().st_mtime_ns for f in files]
    assert datasets.generate(spark, tiny) == cached
    assert sorted(Path(cached.root).rglob("*")) == files and [f.stat().st_mtime_ns for f in files] == stamps

    # Without the marker (an interrupted run) the loaders refuse the folder and generate() rebuilds it.
    Path(cached.marker_path).unlink()
    with pytest.raises(datasets.DatasetNotCachedError):
        datasets.load_history(spark, cached)
    rebuilt = datasets.generate(spark, tiny)
    assert Path(rebuilt.marker_path).is_file() and rebuilt.batch_rows == cached.batch_rows
    with pytest.raises(ConfigError, match="batch day 3"):
        datasets.load_batch(spark, cached, 3)
    # A different spec gets a different folder.
    assert datasets.default_cache_dir(datasets.spec("tiny", batch_days=2, seed=1)) != Path(cached.root)


def test_committed_sample_is_what_the_generator_writes(spark, tmp_path):
    committed = Path(__file__).resolve().parents[1] / "datasets" / "sample"
    written = datasets.write_sample(spark, tmp_path)
    assert [p.name for p in written] == ["history.csv", "batch_001.csv"]
    for path in written:
        assert path.read_bytes() == (committed / path.name).read_bytes(), \
            f"{path.name}: run `python -m labformat.datasets sample`"
    assert 200 <= sum(len(p.read_text().splitlines()) - 1 for p in written) <= 1000


def test_uniform_is_in_unit_interval_and_spread(spark):
    u = spark.range(20_000).select(datasets.uniform(1, F.col("id"), purpose="test").alias("u"))
    row = u.agg(F.min("u"), F.max("u"), F.avg("u")).first()
    assert 0 <= row[0] < 0.001 and 0.999 < row[1] < 1 and abs(row[2] - 0.5) < 0.01
    assert math.isclose(u.where("u < 0.25").count() / 20_000, 0.25, abs_tol=0.01)


def test_a_spec_with_other_batches_copies_the_cached_history(spark, tmp_path, monkeypatch):
    monkeypatch.setenv("LABFORMAT_CACHE", str(tmp_path / "cache"))
    first = datasets.generate(spark, datasets.spec("tiny", batch_days=1))
    clean = datasets.spec("tiny", batch_days=1, scenario="late")
    other_seed = datasets.spec("tiny", batch_days=1, seed=7)
    copied = datasets.generate(spark, clean)
    # Same history rows, byte for byte (copied, not regenerated); the batches follow the new spec.
    names = lambda c: sorted(p.name for p in Path(c.history_path).glob("*.parquet"))  # noqa: E731
    assert names(copied) == names(first)
    for name in names(first):
        assert (Path(copied.history_path) / name).read_bytes() == (Path(first.history_path) / name).read_bytes()
    assert datasets.fingerprint(datasets.load_batch(spark, copied, 1)) == datasets.fingerprint(
        datasets.batch(spark, clean, 1))
    # A seed changes the history: that one is generated, and differs.
    regenerated = datasets.generate(spark, other_seed)
    assert datasets.fingerprint(datasets.load_history(spark, regenerated)) != datasets.fingerprint(
        datasets.load_history(spark, first))


def test_a_second_generator_waits_for_the_first_and_reuses_its_dataset(spark, tmp_path):
    """Two processes asking for the same dataset (a notebook and the benchmark, two notebooks) must not
    delete each other's files: the second waits on the first's lock, then finds the dataset complete."""
    import shutil
    import threading

    from labformat.datasets.cache import _generation_lock

    spec = datasets.spec("tiny")
    done = datasets.generate(spark, spec)
    root = tmp_path / "cache"
    found = []
    with _generation_lock(root):
        # No Spark session: the waiting call must never need one.
        waiter = threading.Thread(target=lambda: found.append(datasets.generate(None, spec, root)))
        waiter.start()
        waiter.join(timeout=1.0)
        assert waiter.is_alive()  # blocked on the lock, not generating
        shutil.copytree(done.root, root, dirs_exist_ok=True)  # what the first generator leaves behind
    waiter.join(timeout=30)
    assert not waiter.is_alive() and found[0].history_rows == done.history_rows
