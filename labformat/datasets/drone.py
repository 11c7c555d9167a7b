"""The drone telemetry generator: deterministic minute readings and daily upsert batches, built in Spark.

Every row is computed by Spark column expressions from `spark.range`; nothing is
built on the driver. Every pseudo-random number is `uniform(seed, ...)`, a hash of
(seed, drone, minute or flight, purpose) mapped to [0, 1), so a reading does not
depend on which task computes it: the same spec gives the same rows on one core or
a thousand. Derived values are rounded (lat/lon to 1e-6 degrees, most others to
0.1) so that last-bit differences of `sin`/`cos` between JVMs cannot leak out.

The flight model, per drone:
- a home base (lat/lon) and a duty cycle of 180..240 minutes with its own phase;
- each cycle: fly for 30..90 minutes, stay landed 5..15 minutes (status `error`
  instead of `landed` in ~4% of cycles), then charge until the cycle ends;
- a flight is an ellipse that leaves home and returns to it, so positions move
  smoothly and `heading_deg` is the direction of the velocity (0 = north, 90 = east);
- the battery drains 0.7..1.0 %/minute in flight, 0.02 %/minute while landed, and
  charges 1.5 %/minute (capped at 100) while charging, so every flight starts full.

Public functions:
- `history(spark, spec, *, num_partitions=None)`: the first `spec.history_days` days;
- `batch(spark, spec, day, *, num_partitions=None)`: upsert batch `day` (1..batch_days);
- `batch_parts(spark, spec, day, ...)`: the same batch as its named parts;
- `fingerprint(df)`: an order-independent checksum (count + sum of row hashes).
"""

from __future__ import annotations

import datetime as dt
import math
from dataclasses import dataclass

from pyspark.sql import Column, DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.sql.types import DoubleType, IntegerType, StringType, StructField, StructType, TimestampType

from labformat.datasets.spec import MINUTES_PER_DAY, DatasetSpec, check_day
from labformat.datasets.spec import spec as _preset_spec

# Nullable as Spark reads parquet back; record_key and updated_at are never null by construction.
SCHEMA = StructType(
    [
        StructField("record_key", StringType(), True),
        StructField("drone_id", StringType(), True),
        StructField("ts", TimestampType(), True),
        StructField("day", StringType(), True),
        StructField("lat", DoubleType(), True),
        StructField("lon", DoubleType(), True),
        StructField("altitude_m", DoubleType(), True),
        StructField("speed_mps", DoubleType(), True),
        StructField("heading_deg", DoubleType(), True),
        StructField("battery_pct", DoubleType(), True),
        StructField("temperature_c", DoubleType(), True),
        StructField("signal_dbm", IntegerType(), True),
        StructField("status", StringType(), True),
        StructField("updated_at", TimestampType(), True),
    ]
)
COLUMNS = tuple(SCHEMA.fieldNames())
RECORD_KEY = "record_key"
PRECOMBINE_FIELD = "updated_at"
PARTITION_FIELD = "day"
STATUSES = ("charging", "flying", "landed", "error")

# Home bases are scattered over a ~55 x 55 km area around this point (the Dutch Randstad).
CENTER_LAT, CENTER_LON = 52.20, 4.70
HOME_SPREAD_DEG = 0.25
METERS_PER_DEG_LAT = 111_320.0

# Batch timing: readings arrive 30..60 s after their minute; a batch's corrections are
# produced 30..60 min after the midnight that closes its day; a stale duplicate is
# 1..29 s older than the row it duplicates. These intervals never overlap, so a newer
# version of a key always has a strictly newer `updated_at` and there are no ties.
_ARRIVAL_DELAY_US = (30_000_000, 30_000_000)  # (min, span)
_CORRECTION_DELAY_US = (1_800_000_000, 1_800_000_000)
_DUPLICATE_AGE_US = (1_000_000, 28_000_000)
_US_PER_MINUTE = 60_000_000

_EPOCH = dt.date(1970, 1, 1)
_ROWS_PER_PARTITION = 1_000_000


def uniform(seed: int, *parts: Column | str | int) -> Column:
    """A pseudo-random double in [0, 1) that depends only on (seed, *parts).

    The top 53 bits of Spark's `xxhash64` become the mantissa. Strings are purposes
    ("home_lat", "fix_temp", ...) so that two uses of the same (drone, minute) draw
    independent numbers.
    """
    cols = [F.lit(seed).cast("long")] + [p if isinstance(p, Column) else F.lit(p) for p in parts]
    return F.shiftrightunsigned(F.xxhash64(*cols), 11).cast("double") * (1.0 / (1 << 53))


def _resolve(spec: DatasetSpec | str) -> DatasetSpec:
    return _preset_spec(spec) if isinstance(spec, str) else spec


def _partitions(spark: SparkSession, rows: int, num_partitions: int | None) -> int:
    if num_partitions is not None:
        return max(1, int(num_partitions))
    cores = spark.sparkContext.defaultParallelism
    return max(1, min(max(cores, -(-rows // _ROWS_PER_PARTITION)), max(1, rows // 10_000)))


def _start_minute(spec: DatasetSpec) -> int:
    """Minutes since the Unix epoch at `spec.start`: readings are a function of absolute time."""
    return (spec.start_date - _EPOCH).days * MINUTES_PER_DAY


def _grid(spark: SparkSession, spec: DatasetSpec, first_day: int, days: int, num_partitions: int | None) -> DataFrame:
    """Every (drone, minute) of `days` days from 0-based day `first_day`, minute-major (time order)."""
    rows = spec.drones * days * MINUTES_PER_DAY
    first_minute = _start_minute(spec) + first_day * MINUTES_PER_DAY
    ids = spark.range(0, rows, 1, _partitions(spark, rows, num_partitions))
    return ids.select(
        (F.col("id") % spec.drones).alias("_drone"),
        (F.lit(first_minute).cast("long") + F.expr(f"id div {spec.drones}")).alias("_minute"),
    )


def _readings(grid: DataFrame, seed: int) -> DataFrame:
    """The original reading of each (`_drone`, `_minute`): all SCHEMA columns plus the two internals."""
    d, m = F.col("_drone"), F.col("_minute")

    def per_drone(purpose: str) -> Column:
        return uniform(seed, d, purpose)

    def per_cycle(purpose: str) -> Column:
        return uniform(seed, d, F.col("_cycle"), purpose)

    def per_minute(purpose: str) -> Column:
        return uniform(seed, d, m, purpose)

    # The drone: home base and duty cycle.
    df = grid.withColumns(
        {
            "_home_lat": F.lit(CENTER_LAT) + (per_drone("home_lat") * 2 - 1) * HOME_SPREAD_DEG,
            "_home_lon": F.lit(CENTER_LON) + (per_drone("home_lon") * 2 - 1) * HOME_SPREAD_DEG,
            "_period": F.lit(180) + F.floor(per_drone("period") * 61).cast("long"),
            "_temp_bias": (per_drone("temp_bias") * 2 - 1) * 1.0,
        }
    )
    df = df.withColumn("_k", m + F.floor(per_drone("phase") * F.col("_period")).cast("long"))
    df = df.withColumns({"_cycle": F.expr("_k div _period"), "_t": F.expr("_k % _period")})
    # The cycle: flight length, landing, fault flag and the shape of the loop flown.
    df = df.withColumns(
        {
            "_fly": F.lit(30) + F.floor(per_cycle("fly") * 61).cast("long"),
            "_land": F.lit(5) + F.floor(per_cycle("land") * 11).cast("long"),
            "_fault": per_cycle("fault") < 0.04,
            "_radius": F.lit(1500.0) + per_cycle("radius") * 2500.0,
            "_aspect": F.lit(0.4) + per_cycle("aspect") * 0.6,
            "_bearing": per_cycle("bearing") * (2 * math.pi),
            "_spin": F.when(per_cycle("spin") < 0.5, F.lit(-1.0)).otherwise(F.lit(1.0)),
            "_drain": F.lit(0.7) + per_cycle("drain") * 0.3,
            "_cruise": F.lit(60.0) + per_cycle("cruise") * 60.0,
        }
    )
    t, fly, land = F.col("_t"), F.col("_fly"), F.col("_land")
    flying = t < fly
    df = df.withColumns(
        {
            "_status": F.when(flying, "flying")
            .when(t < fly + land, F.when(F.col("_fault"), "error").otherwise("landed"))
            .otherwise("charging"),
            # Flight phase in (0, 2*pi): the ellipse starts and ends at home.
            "_phi": F.least(t + 1, fly).cast("double") / (fly + 1) * (2 * math.pi),
            "_omega": F.lit(2 * math.pi) / ((fly + 1) * 60.0),  # rad per second
            "_b2": F.col("_bearing") + F.col("_spin") * (math.pi / 2),
        }
    )
    phi, r, a = F.col("_phi"), F.col("_radius"), F.col("_aspect")
    b1, b2 = F.col("_bearing"), F.col("_b2")
    # Offsets along the loop's major axis (b1) and minor axis (b2), and their rates.
    x1, x2 = r * (1 - F.cos(phi)), a * r * F.sin(phi)
    v1, v2 = r * F.sin(phi) * F.col("_omega"), a * r * F.cos(phi) * F.col("_omega")
    df = df.withColumns(
        {
            "_north": F.when(flying, x1 * F.cos(b1) + x2 * F.cos(b2)).otherwise(0.0),
            "_east": F.when(flying, x1 * F.sin(b1) + x2 * F.sin(b2)).otherwise(0.0),
            "_vn": F.when(flying, v1 * F.cos(b1) + v2 * F.cos(b2)).otherwise(0.0),
            "_ve": F.when(flying, v1 * F.sin(b1) + v2 * F.sin(b2)).otherwise(0.0),
        }
    )
    end_of_flight = F.lit(100.0) - F.col("_drain") * fly
    end_of_landing = end_of_flight - 0.02 * land
    df = df.withColumns(
        {
            "_lat": F.col("_home_lat") + F.col("_north") / METERS_PER_DEG_LAT,
            "_lon": F.col("_home_lon") + F.col("_east") / (METERS_PER_DEG_LAT * F.cos(F.radians(F.col("_home_lat")))),
            # Climb over the first minutes, descend over the last ones.
            "_alt": F.when(
                flying,
                F.col("_cruise") * F.least(F.lit(1.0), (t + 1) / 4.0, (fly - t) / 4.0) + per_minute("alt_noise") * 2 - 1,
            ).otherwise(0.0),
            "_speed": F.sqrt(F.col("_vn") ** 2 + F.col("_ve") ** 2),
            # On the ground the drone keeps the heading it landed with (the loop's end direction).
            "_heading": F.pmod(
                F.degrees(F.when(flying, F.atan2(F.col("_ve"), F.col("_vn"))).otherwise(F.atan2(F.sin(b2), F.cos(b2)))),
                F.lit(360.0),
            ),
            "_battery": F.when(flying, F.lit(100.0) - F.col("_drain") * (t + 1))
            .when(t < fly + land, end_of_flight - 0.02 * (t - fly + 1))
            .otherwise(F.least(F.lit(100.0), end_of_landing + 1.5 * (t - fly - land + 1))),
            "_minute_of_day": F.pmod(m, F.lit(MINUTES_PER_DAY)),
            "_day_num": F.expr(f"_minute div {MINUTES_PER_DAY}").cast("int"),
        }
    )
    # Air temperature: a daily wave peaking at 15:00, colder with altitude, warm batteries on the charger.
    hour_frac = F.col("_minute_of_day") / float(MINUTES_PER_DAY)
    distance_km = F.sqrt(F.col("_north") ** 2 + F.col("_east") ** 2) / 1000.0
    temperature = (
        F.lit(8.0)
        + F.sin((hour_frac - 0.375) * (2 * math.pi)) * 6.0
        + F.col("_temp_bias")
        + (per_minute("temp_noise") - 0.5) * 0.6
        - F.col("_alt") * 0.0065
        + F.when(F.col("_status") == "charging", 3.0).otherwise(0.0)
    )
    signal = (
        F.when(F.col("_status") == "error", F.lit(-92.0))
        .when(flying, F.lit(-55.0) - F.log10(distance_km + 1) * 20.0)
        .otherwise(F.lit(-48.0))
        + (per_minute("signal_noise") * 2 - 1) * 4.0
    )
    day = F.date_from_unix_date(F.col("_day_num")).cast("string")
    drone_id = F.concat(F.lit("drone"), F.lpad(d.cast("string"), 4, "0"))
    hhmm = F.concat(
        F.lpad(F.expr("_minute_of_day div 60").cast("string"), 2, "0"),
        F.lpad(F.pmod(F.col("_minute_of_day"), F.lit(60)).cast("string"), 2, "0"),
    )
    arrival = F.lit(_ARRIVAL_DELAY_US[0]) + F.floor(per_minute("arrival") * _ARRIVAL_DELAY_US[1]).cast("long")
    return df.select(
        F.concat(F.regexp_replace(day, "-", ""), hhmm, F.lit("_"), drone_id).alias("record_key"),
        drone_id.alias("drone_id"),
        F.timestamp_seconds(m * 60).alias("ts"),
        day.alias("day"),
        F.round(F.col("_lat"), 6).alias("lat"),
        F.round(F.col("_lon"), 6).alias("lon"),
        F.round(F.greatest(F.col("_alt"), F.lit(0.0)), 1).alias("altitude_m"),
        F.round(F.col("_speed"), 2).alias("speed_mps"),
        F.round(F.col("_heading"), 1).alias("heading_deg"),
        F.round(F.col("_battery"), 1).alias("battery_pct"),
        F.round(temperature, 1).alias("temperature_c"),
        F.round(signal).cast("int").alias("signal_dbm"),
        F.col("_status").alias("status"),
        F.timestamp_micros(m * _US_PER_MINUTE + arrival).alias("updated_at"),
        d,
        m,
    )


def _signed_step(u_sign: Column, u_size: Column, low: float, span: float) -> Column:
    """A nonzero change of size low..low+span with a random sign."""
    return F.when(u_sign < 0.5, F.lit(-1.0)).otherwise(F.lit(1.0)) * (F.lit(low) + u_size * span)


def _corrected(df: DataFrame, seed: int, day: int, batch_end_us: int) -> DataFrame:
    """Corrections issued by batch `day`: recalibrated temperature and battery, a newer `updated_at`."""
    d, m = F.col("_drone"), F.col("_minute")

    def u(purpose: str) -> Column:
        return uniform(seed, d, m, purpose, day)

    delay = F.lit(_CORRECTION_DELAY_US[0]) + F.floor(u("fix_time") * _CORRECTION_DELAY_US[1]).cast("long")
    return df.withColumns(
        {
            "temperature_c": F.round(F.col("temperature_c") + _signed_step(u("fix_temp_sign"), u("fix_temp"), 0.2, 1.3), 1),
            "battery_pct": F.round(
                F.least(F.lit(100.0), F.greatest(F.lit(0.0), F.col("battery_pct") + _signed_step(u("fix_bat_sign"), u("fix_bat"), 0.5, 1.5))),
                1,
            ),
            "updated_at": F.timestamp_micros(F.lit(batch_end_us) + delay),
        }
    )


def _stale_duplicates(winners: DataFrame, seed: int, day: int, fraction: float) -> DataFrame:
    """For `fraction` of the batch's rows, an older version of the same key with different values."""
    d, m = F.col("_drone"), F.col("_minute")

    def u(purpose: str) -> Column:
        return uniform(seed, d, m, purpose, day)

    age = F.lit(_DUPLICATE_AGE_US[0]) + F.floor(u("dup_age") * _DUPLICATE_AGE_US[1]).cast("long")
    return (
        winners.where(u("dup") < fraction)
        .withColumns(
            {
                "temperature_c": F.round(F.col("temperature_c") + _signed_step(u("dup_temp_sign"), u("dup_temp"), 0.3, 1.0), 1),
                "signal_dbm": F.col("signal_dbm") + F.when(u("dup_sig_sign") < 0.5, F.lit(-1)).otherwise(F.lit(1)) * (1 + F.floor(u("dup_sig") * 3).cast("int")),
                "updated_at": F.timestamp_micros(F.unix_micros(F.col("updated_at")) - age),
            }
        )
    )


def _random_key(monotonic_key: Column) -> Column:
    """A UUID-like key (8-4-4-4-12 hex) from the md5 of the monotonic key: stable per reading, unordered in time."""
    h = F.md5(monotonic_key)
    return F.concat_ws("-", *(F.substring(h, pos, length) for pos, length in ((1, 8), (9, 4), (13, 4), (17, 4), (21, 12))))


def _finish(df: DataFrame, spec: DatasetSpec) -> DataFrame:
    if spec.key_style == "random":
        df = df.withColumn("record_key", _random_key(F.col("record_key")))
    # `to` also marks every column nullable, as SCHEMA (and parquet read back) has them.
    return df.to(SCHEMA)


def history(spark: SparkSession, spec: DatasetSpec | str, *, num_partitions: int | None = None) -> DataFrame:
    """The initial `spec.history_days` days of readings (one per drone per minute), in time order.

    `num_partitions` only changes how Spark splits the work, never the rows.
    """
    spec = _resolve(spec)
    return _finish(_readings(_grid(spark, spec, 0, spec.history_days, num_partitions), spec.seed), spec)


@dataclass(frozen=True)
class BatchParts:
    """Upsert batch `day` split by why each row is there (all in SCHEMA, keyed per the spec's key_style)."""

    day: int
    inserts: DataFrame  # every reading of the new day
    updates: DataFrame  # corrections of the previous day's readings
    late: DataFrame  # corrections of readings in older days
    duplicates: DataFrame  # stale copies of some of the rows above: same key, older updated_at

    def union(self) -> DataFrame:
        return self.inserts.unionByName(self.updates).unionByName(self.late).unionByName(self.duplicates)


def _batch_internal(spark: SparkSession, spec: DatasetSpec, day: int, num_partitions: int | None) -> tuple[DataFrame, ...]:
    check_day(spec, day)
    new_day = spec.history_days + day - 1
    prev_day = new_day - 1
    # Corrections are produced after the midnight that closes the new day.
    batch_end_us = (_start_minute(spec) + (new_day + 1) * MINUTES_PER_DAY) * _US_PER_MINUTE
    seed = spec.seed

    inserts = _readings(_grid(spark, spec, new_day, 1, num_partitions), seed)

    previous = _grid(spark, spec, prev_day, 1, num_partitions)
    previous = previous.where(uniform(seed, F.col("_drone"), F.col("_minute"), "update") < spec.update_fraction)
    updates = _corrected(_readings(previous, seed), seed, day, batch_end_us)

    first_old = max(0, prev_day - spec.late_window_days)
    old_days = prev_day - first_old
    if old_days > 0 and spec.late_fraction > 0:
        # late_fraction is relative to one day's readings, spread evenly over the window.
        p = min(1.0, spec.late_fraction / old_days)
        older = _grid(spark, spec, first_old, old_days, num_partitions)
        older = older.where(uniform(seed, F.col("_drone"), F.col("_minute"), "late", day) < p)
    else:
        older = _grid(spark, spec, 0, 1, num_partitions).limit(0)
    late = _corrected(_readings(older, seed), seed, day, batch_end_us)

    winners = inserts.unionByName(updates).unionByName(late)
    duplicates = _stale_duplicates(winners, seed, day, spec.duplicate_fraction)
    return inserts, updates, late, duplicates


def batch_parts(spark: SparkSession, spec: DatasetSpec | str, day: int, *, num_partitions: int | None = None) -> BatchParts:
    """Upsert batch `day` (1..spec.batch_days) as named parts; `batch()` is their union."""
    spec = _resolve(spec)
    parts = _batch_internal(spark, spec, day, num_partitions)
    return BatchParts(day, *(_finish(p, spec) for p in parts))


def batch(spark: SparkSession, spec: DatasetSpec | str, day: int, *, num_partitions: int | None = None) -> DataFrame:
    """Daily upsert batch `day` (1..spec.batch_days): the new day's inserts, corrections of the
    previous day, late corrections of older days, and stale in-batch duplicates (newest `updated_at` wins)."""
    return batch_parts(spark, spec, day, num_partitions=num_partitions).union()


def fingerprint(df: DataFrame) -> tuple[int, int]:
    """(row count, sum of row hashes): equal for equal multisets of rows, whatever their order or partitioning."""
    row = df.select(F.count(F.lit(1)).alias("n"), F.sum(F.xxhash64(*df.columns).cast("decimal(38,0)")).alias("h")).first()
    return int(row["n"]), int(row["h"] or 0)
