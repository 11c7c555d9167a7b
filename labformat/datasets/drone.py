"""The drone telemetry generator: deterministic minute readings and daily upsert batches, built in Spark.

Every row is computed by Spark SQL expressions over `spark.range`; nothing is built on
the driver. Every pseudo-random number is a hash of (drone, minute or duty cycle, and a
salt made of the seed and a purpose name) mapped to [0, 1) (`uniform`), so a reading does
not depend on which task computes it: the same spec gives the same rows on one core or
a thousand. Values are rounded (lat/lon to 1e-6 degrees, most others to 0.1), so a
last-bit difference in `sin`/`cos` between JVMs is very unlikely to change a stored value.

The flight model, per drone:
- a home base (lat/lon) and a duty cycle of 180..240 minutes with its own phase;
- each cycle: fly for 30..90 minutes, stay landed 5..15 minutes (status `error`
  instead of `landed` in ~4% of cycles), then charge until the cycle ends;
- a flight is an ellipse that leaves home and returns to it, so positions move
  smoothly and `heading_deg` is the direction of the velocity (0 = north, 90 = east);
- the battery drains 0.7..1.0 %/minute in flight, 0.02 %/minute while landed, and
  charges 1.5 %/minute (capped at 100) while charging, so every flight starts full.

Public:
- `history(spark, spec, *, num_partitions=None)`: the first `spec.history_days` days;
- `batch(spark, spec, day, *, num_partitions=None)`: upsert batch `day` (1..batch_days);
- `batch_parts(spark, spec, day, *, num_partitions=None) -> BatchParts`: the same batch
  split into `inserts`, `updates`, `late` and `duplicates`;
- `fingerprint(df) -> (rows, hash sum)`: an order-independent checksum;
- `uniform(seed, *keys, purpose=...)`, `salt(seed, purpose)`: the randomness, as Columns;
- `SCHEMA`, `COLUMNS`, `RECORD_KEY`, `PRECOMBINE_FIELD`, `PARTITION_FIELD`, `STATUSES`;
- `GENERATOR_CONF`: Spark options that make generation at scale ~6x faster.
`num_partitions` only changes how Spark splits the work, never the rows.
"""

from __future__ import annotations

import datetime as dt
import hashlib
import math
import re
from dataclasses import dataclass

from pyspark.sql import Column, DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.sql.types import DoubleType, IntegerType, StringType, StructField, StructType, TimestampType

from labformat.datasets.spec import MINUTES_PER_DAY, DatasetSpec, check_day
from labformat.datasets.spec import spec as _preset_spec
from labformat.spark.compat import default_parallelism

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

# Spark options under which the generator runs fast. Its model compiles into one Java method
# of ~10 KB; HotSpot never JIT-compiles methods over 8,000 bytes, so that method would run
# interpreted, about 6x slower. With this limit Spark skips whole-stage codegen for such a
# plan and compiles each step on its own. `generate()` applies it while it writes; set it on
# your session to run `history()`/`batch()` at millions of rows.
GENERATOR_CONF = {"spark.sql.codegen.hugeMethodLimit": "8000"}

_EPOCH = dt.date(1970, 1, 1)
_TWO_POW_MINUS_53 = 1.0 / (1 << 53)
_ROWS_PER_PARTITION = 1_000_000


def salt(seed: int, purpose: str) -> int:
    """A signed 64-bit constant for (seed, purpose): the one literal every hash of that purpose mixes in.

    Folding seed and purpose into one literal keeps each hash small in Spark's generated code.
    """
    return int.from_bytes(hashlib.sha256(f"{seed}/{purpose}".encode()).digest()[:8], "big", signed=True)


def uniform(seed: int, *keys: Column, purpose: str) -> Column:
    """A pseudo-random double in [0, 1) that depends only on (seed, purpose, *keys).

    The top 53 bits of Spark's `xxhash64` become the mantissa. The purpose ("home_lat",
    "fix_temp", ...) makes two uses of the same (drone, minute) draw independent numbers.
    """
    hashed = F.xxhash64(*keys, F.lit(salt(seed, purpose)).cast("long"))
    return F.shiftrightunsigned(hashed, 11).cast("double") * _TWO_POW_MINUS_53


def resolve_spec(spec: DatasetSpec | str) -> DatasetSpec:
    """A DatasetSpec, given one or a preset name."""
    return _preset_spec(spec) if isinstance(spec, str) else spec


def _partitions(spark: SparkSession, rows: int, num_partitions: int | None) -> int:
    if num_partitions is not None:
        return max(1, int(num_partitions))
    cores = default_parallelism(spark)
    return max(1, min(max(cores, -(-rows // _ROWS_PER_PARTITION)), max(1, rows // 10_000)))


def _start_minute(spec: DatasetSpec) -> int:
    """Minutes since the Unix epoch at `spec.start`: readings are a function of absolute time."""
    return (spec.start_date - _EPOCH).days * MINUTES_PER_DAY


def _grid(spark: SparkSession, spec: DatasetSpec, first_day: int, days: int, num_partitions: int | None) -> DataFrame:
    """Every (drone, minute) of `days` days from 0-based day `first_day`, minute-major (time order)."""
    rows = spec.drones * days * MINUTES_PER_DAY
    first_minute = _start_minute(spec) + first_day * MINUTES_PER_DAY
    ids = spark.range(0, rows, 1, _partitions(spark, rows, num_partitions))
    return _select(ids, f"id % {spec.drones} AS _drone", f"CAST({first_minute} AS BIGINT) + id div {spec.drones} AS _minute")


def _u(seed: int, keys: str, purpose: str, day: int | None = None) -> str:
    """SQL twin of `uniform`: a [0, 1) double from the hash of (keys..., salt of seed and purpose[ and batch day])."""
    if day is not None:
        purpose = f"{purpose}@{int(day)}"
    return (f"(CAST(shiftrightunsigned(xxhash64({keys}, CAST({salt(seed, purpose)} AS BIGINT)), 11) AS DOUBLE)"
            f" * {_TWO_POW_MINUS_53!r})")


# Spark SQL reads `1.5` as DECIMAL(2,1), and decimal arithmetic is an order of magnitude slower
# than double arithmetic: every fractional literal gets the `D` (double) suffix.
_FRACTIONAL_LITERAL = re.compile(r"(?<![\w.'])(\d+\.\d+)(?![\w.])")


def _doubles(sql: str) -> str:
    return _FRACTIONAL_LITERAL.sub(r"\1D", sql)


def _select(df: DataFrame, *sql: str) -> DataFrame:
    return df.selectExpr(*(_doubles(e) for e in sql))


def _where(df: DataFrame, sql: str) -> DataFrame:
    return df.where(_doubles(sql))


def _round(sql: str, digits: int) -> str:
    """SQL rounding `sql` to `digits` decimals, half up.

    Plain double arithmetic (Spark's ROUND goes through BigDecimal, several times slower);
    the integer divided by 10**digits is the double nearest that decimal, as ROUND's is.
    """
    scale = f"{10 ** digits}.0"
    return f"(FLOOR(({sql}) * {scale} + 0.5) / {scale})"


def _stage(df: DataFrame, **columns: str) -> DataFrame:
    """Add SQL-expression columns in one projection (one JVM round trip, not dozens)."""
    return _select(df, "*", *(f"{sql} AS {name}" for name, sql in columns.items()))


def _readings(grid: DataFrame, seed: int) -> DataFrame:
    """The original reading of each (`_drone`, `_minute`) of `grid`: all SCHEMA columns, then `grid`'s own columns.

    Written as SQL expressions: the whole model is a few dozen of them, and building
    them one Column call at a time costs thousands of JVM round trips per DataFrame.
    """

    def drone(purpose: str) -> str:
        return _u(seed, "_drone", purpose)

    def cycle(purpose: str) -> str:
        return _u(seed, "_drone, _cycle", purpose)

    def minute(purpose: str) -> str:
        return _u(seed, "_drone, _minute", purpose)

    two_pi = repr(2 * math.pi)
    # The drone: home base and duty cycle.
    df = _stage(
        grid,
        _home_lat=f"{CENTER_LAT} + ({drone('home_lat')} * 2 - 1) * {HOME_SPREAD_DEG}",
        _home_lon=f"{CENTER_LON} + ({drone('home_lon')} * 2 - 1) * {HOME_SPREAD_DEG}",
        _period=f"180 + CAST(FLOOR({drone('period')} * 61) AS BIGINT)",
        _phase=drone("phase"),
        _temp_bias=f"{drone('temp_bias')} * 2 - 1",
    )
    # Minutes since the drone's duty cycles began, split into cycle number and minute within it.
    k = "(_minute + CAST(FLOOR(_phase * _period) AS BIGINT))"
    df = _stage(df, _cycle=f"{k} div _period", _t=f"{k} % _period")
    # The cycle: flight length, landing, fault flag, the loop flown and how hard it drains the battery.
    df = _stage(
        df,
        _fly=f"30 + CAST(FLOOR({cycle('fly')} * 61) AS BIGINT)",
        _land=f"5 + CAST(FLOOR({cycle('land')} * 11) AS BIGINT)",
        _fault=f"{cycle('fault')} < 0.04",
        _radius=f"1500.0 + {cycle('radius')} * 2500.0",
        _aspect=f"0.4 + {cycle('aspect')} * 0.6",
        _bearing=f"{cycle('bearing')} * {two_pi}",
        _spin=f"IF({cycle('spin')} < 0.5, -1.0, 1.0)",
        _drain=f"0.7 + {cycle('drain')} * 0.3",
        _cruise=f"60.0 + {cycle('cruise')} * 60.0",
    )
    df = _stage(
        df,
        _flying="_t < _fly",
        # Every case spelled out (no ELSE), which also keeps the column nullable like SCHEMA.
        _status="CASE WHEN _t < _fly THEN 'flying' "
        "WHEN _t < _fly + _land THEN IF(_fault, 'error', 'landed') "
        "WHEN _t >= _fly + _land THEN 'charging' END",
        # Flight phase in (0, 2 pi]: the loop starts and ends at home.
        _phi=f"CAST(LEAST(_t + 1, _fly) AS DOUBLE) / (_fly + 1) * {two_pi}",
        _omega=f"{two_pi} / ((_fly + 1) * 60.0)",  # rad per second
        _b2=f"_bearing + _spin * {math.pi / 2!r}",  # the loop's minor axis
    )
    # Offsets along the major axis (_bearing) and minor axis (_b2), and their rates of change.
    x1, x2 = "_radius * (1 - COS(_phi))", "_aspect * _radius * SIN(_phi)"
    v1, v2 = "_radius * SIN(_phi) * _omega", "_aspect * _radius * COS(_phi) * _omega"
    df = _stage(
        df,
        _north=f"IF(_flying, {x1} * COS(_bearing) + {x2} * COS(_b2), 0.0)",
        _east=f"IF(_flying, {x1} * SIN(_bearing) + {x2} * SIN(_b2), 0.0)",
        _vn=f"IF(_flying, {v1} * COS(_bearing) + {v2} * COS(_b2), 0.0)",
        _ve=f"IF(_flying, {v1} * SIN(_bearing) + {v2} * SIN(_b2), 0.0)",
    )
    end_of_flight = "(100.0 - _drain * _fly)"
    end_of_landing = f"({end_of_flight} - 0.02 * _land)"
    df = _stage(
        df,
        _lat=f"_home_lat + _north / {METERS_PER_DEG_LAT}",
        _lon=f"_home_lon + _east / ({METERS_PER_DEG_LAT} * COS(RADIANS(_home_lat)))",
        # Climb over the first minutes, descend over the last ones.
        _alt=f"IF(_flying, _cruise * LEAST(1.0, (_t + 1) / 4.0, (_fly - _t) / 4.0) + {minute('alt_noise')} * 2 - 1, 0.0)",
        _speed="SQRT(_vn * _vn + _ve * _ve)",
        # On the ground the drone keeps the heading it landed with (the loop's end direction).
        _heading="PMOD(DEGREES(IF(_flying, ATAN2(_ve, _vn), ATAN2(SIN(_b2), COS(_b2)))), 360.0)",
        _battery=f"CASE WHEN _flying THEN 100.0 - _drain * (_t + 1) "
        f"WHEN _t < _fly + _land THEN {end_of_flight} - 0.02 * (_t - _fly + 1) "
        f"ELSE LEAST(100.0, {end_of_landing} + 1.5 * (_t - _fly - _land + 1)) END",
        _minute_of_day=f"PMOD(_minute, {MINUTES_PER_DAY})",
        _date=f"DATE_FROM_UNIX_DATE(CAST(_minute div {MINUTES_PER_DAY} AS INT))",
        _drone_id="CONCAT('drone', LPAD(CAST(_drone AS STRING), 4, '0'))",
    )
    # Air temperature: a daily wave peaking at 15:00, colder with altitude, warm batteries on the charger.
    temperature = (
        f"8.0 + SIN((_minute_of_day / {float(MINUTES_PER_DAY)} - 0.375) * {two_pi}) * 6.0 + _temp_bias"
        f" + ({minute('temp_noise')} - 0.5) * 0.6 - _alt * 0.0065 + IF(_status = 'charging', 3.0, 0.0)"
    )
    signal = (
        "CASE WHEN _status = 'error' THEN -92.0 "
        "WHEN _flying THEN -55.0 - LOG10(SQRT(_north * _north + _east * _east) / 1000.0 + 1) * 20.0 "
        f"ELSE -48.0 END + ({minute('signal_noise')} * 2 - 1) * 4.0"
    )
    # yyyyMMddHHmm as a number first: integer arithmetic is cheaper than formatting and padding strings.
    stamp = (
        "(CAST(YEAR(_date) AS BIGINT) * 10000 + MONTH(_date) * 100 + DAY(_date)) * 10000"
        " + (_minute_of_day div 60) * 100 + _minute_of_day % 60"
    )
    arrival = f"{_ARRIVAL_DELAY_US[0]} + CAST(FLOOR({minute('arrival')} * {_ARRIVAL_DELAY_US[1]}) AS BIGINT)"
    return _select(
        df,
        f"CONCAT(CAST({stamp} AS STRING), '_', _drone_id) AS record_key",
        "_drone_id AS drone_id",
        "TIMESTAMP_SECONDS(_minute * 60) AS ts",
        "CAST(_date AS STRING) AS day",
        f"{_round('_lat', 6)} AS lat",
        f"{_round('_lon', 6)} AS lon",
        f"{_round('GREATEST(_alt, 0.0)', 1)} AS altitude_m",
        f"{_round('_speed', 2)} AS speed_mps",
        f"PMOD({_round('_heading', 1)}, 360.0) AS heading_deg",  # 359.97 rounds to 360.0, which is 0.0
        f"{_round('_battery', 1)} AS battery_pct",
        f"{_round(temperature, 1)} AS temperature_c",
        f"CAST(FLOOR({signal} + 0.5) AS INT) AS signal_dbm",
        "_status AS status",
        f"TIMESTAMP_MICROS(_minute * {_US_PER_MINUTE} + {arrival}) AS updated_at",
        *grid.columns,  # the internals (_drone, _minute, and _kind in batches)
    )


def _signed_step(u_sign: str, u_size: str, low: float, span: float) -> str:
    """SQL for a nonzero change of size low..low+span with a random sign."""
    return f"(IF({u_sign} < 0.5, -1.0, 1.0) * ({low} + {u_size} * {span}))"


def _corrected(df: DataFrame, seed: int, day: int, batch_end_us: int, where: str) -> DataFrame:
    """Rows matching SQL `where` become corrections issued by batch `day`:
    recalibrated temperature and battery, and a newer `updated_at`."""

    def u(purpose: str) -> str:
        return _u(seed, "_drone, _minute", purpose, day)

    delay = f"{_CORRECTION_DELAY_US[0]} + CAST(FLOOR({u('fix_time')} * {_CORRECTION_DELAY_US[1]}) AS BIGINT)"
    fixed = {
        "temperature_c": _round(f"temperature_c + {_signed_step(u('fix_temp_sign'), u('fix_temp'), 0.2, 1.3)}", 1),
        "battery_pct": _round("LEAST(100.0, GREATEST(0.0, battery_pct + "
                              f"{_signed_step(u('fix_bat_sign'), u('fix_bat'), 0.5, 1.5)}))", 1),
        "updated_at": f"TIMESTAMP_MICROS({batch_end_us} + {delay})",
    }
    return _select(df, *(f"IF({where}, {fixed[c]}, {c}) AS {c}" if c in fixed else c for c in df.columns))


def _with_stale_duplicates(winners: DataFrame, seed: int, day: int, fraction: float) -> DataFrame:
    """Emit `fraction` of the rows twice: `_copy = 2` is an older version of the same key with different values."""

    def u(purpose: str) -> str:
        return _u(seed, "_drone, _minute", purpose, day)

    # Generated alongside its winner (one pass), not by reading the winners a second time.
    both = _select(winners, "*", f"EXPLODE(SEQUENCE(1, IF({u('dup')} < {float(fraction)!r}, 2, 1))) AS _copy")
    age = f"{_DUPLICATE_AGE_US[0]} + CAST(FLOOR({u('dup_age')} * {_DUPLICATE_AGE_US[1]}) AS BIGINT)"
    stale = {
        "temperature_c": _round(f"temperature_c + {_signed_step(u('dup_temp_sign'), u('dup_temp'), 0.3, 1.0)}", 1),
        "signal_dbm": f"signal_dbm + IF({u('dup_sig_sign')} < 0.5, -1, 1) * (1 + CAST(FLOOR({u('dup_sig')} * 3) AS INT))",
        "updated_at": f"TIMESTAMP_MICROS(UNIX_MICROS(updated_at) - ({age}))",
    }
    return _select(both, *(f"IF(_copy = 2, {stale[c]}, {c}) AS {c}" if c in stale else c for c in both.columns))


def _random_key_sql(monotonic_key: str) -> str:
    """SQL for a UUID-like key (8-4-4-4-12 hex) from the md5 of the monotonic key: stable per reading, unordered in time."""
    h = f"MD5({monotonic_key})"
    groups = [f"SUBSTRING({h}, {pos}, {length})" for pos, length in ((1, 8), (9, 4), (13, 4), (17, 4), (21, 12))]
    return "CONCAT(" + ", '-', ".join(groups) + ")"


def _finish(df: DataFrame, spec: DatasetSpec) -> DataFrame:
    """Drop the internals and apply the spec's key style: exactly SCHEMA."""
    key = _random_key_sql("record_key") if spec.key_style == "random" else "record_key"
    return df.selectExpr(f"{key} AS record_key", *COLUMNS[1:])


def history(spark: SparkSession, spec: DatasetSpec | str, *, num_partitions: int | None = None) -> DataFrame:
    """The initial `spec.history_days` days of readings (one per drone per minute), in time order.

    `num_partitions` only changes how Spark splits the work, never the rows.
    """
    spec = resolve_spec(spec)
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


# Why a batch row is there; kept in the internal `_kind` column until the batch is split or finished.
_INSERT, _UPDATE, _LATE = 0, 1, 2


def _late_sampling(spec: DatasetSpec, old_days: int) -> tuple[int, float]:
    """(segments per day, probability per segment) for picking late corrections.

    Each older day of each drone is cut into `segments` equal runs of minutes; a run holds
    at most one late correction, with probability `p`, at a random minute of the run. The
    expected total is late_fraction x one day's readings, keys never repeat, and the work
    is proportional to the corrections, not to the length of the late window.
    """
    if old_days == 0 or spec.late_fraction == 0:
        return 0, 0.0
    per_drone_day = spec.late_fraction * MINUTES_PER_DAY / old_days
    segments = min(MINUTES_PER_DAY, max(1, math.ceil(2 * per_drone_day)))  # p near 1/2: a random count
    return segments, min(1.0, per_drone_day / segments)


def _batch_rows(spark: SparkSession, spec: DatasetSpec, day: int, num_partitions: int | None) -> DataFrame:
    """Every row of batch `day` with the internals `_kind` (insert, update, late) and `_copy` (2 = stale duplicate)."""
    check_day(spec, day)
    seed, drones = spec.seed, spec.drones
    new_day = spec.history_days + day - 1
    prev_day = new_day - 1
    first_old = max(0, prev_day - spec.late_window_days)
    old_days = prev_day - first_old
    segments, p_late = _late_sampling(spec, old_days)
    start = _start_minute(spec)
    # Corrections are produced after the midnight that closes the new day.
    batch_end_us = (start + (new_day + 1) * MINUTES_PER_DAY) * _US_PER_MINUTE

    # One range, two regions: ids below `recent` are every minute of the previous and the new
    # day (minute-major); the ids above are the late-correction runs of the older days.
    recent = drones * 2 * MINUTES_PER_DAY
    total = recent + drones * old_days * segments
    ids = spark.range(0, total, 1, _partitions(spark, total, num_partitions))
    grid = _select(
        ids,
        f"IF(id < {recent}, id, id - {recent}) % {drones} AS _drone",
        f"IF(id < {recent}, id div {drones}, -1) AS _recent_minute",
        f"IF(id < {recent}, -1, (id - {recent}) div {drones}) AS _run",
    )
    run_start = f"(_run % {segments}) * {MINUTES_PER_DAY} div {segments}" if segments else "0"
    run_length = f"((_run % {segments}) + 1) * {MINUTES_PER_DAY} div {segments} - {run_start}" if segments else "1"
    grid = _select(
        grid,
        "_drone",
        f"CASE WHEN _recent_minute >= {MINUTES_PER_DAY} THEN {_INSERT} WHEN _recent_minute >= 0 THEN {_UPDATE}"
        f" ELSE {_LATE} END AS _kind",
        f"CASE WHEN _recent_minute >= 0 THEN {start + prev_day * MINUTES_PER_DAY} + _recent_minute"
        f" ELSE {start + first_old * MINUTES_PER_DAY} + (_run div {max(segments, 1)}) * {MINUTES_PER_DAY} + {run_start}"
        f" + CAST(FLOOR({_u(seed, '_drone, _run', 'late_minute', day)} * ({run_length})) AS BIGINT) END AS _minute",
        "_run",
    )
    grid = _where(
        grid,
        f"_kind = {_INSERT}"
        f" OR (_kind = {_UPDATE} AND {_u(seed, '_drone, _minute', 'update')} < {float(spec.update_fraction)!r})"
        f" OR (_kind = {_LATE} AND {_u(seed, '_drone, _run', 'late', day)} < {p_late!r})",
    ).drop("_run")
    winners = _corrected(_readings(grid, seed), seed, day, batch_end_us, f"_kind != {_INSERT}")
    return _with_stale_duplicates(winners, seed, day, spec.duplicate_fraction)


def batch_parts(spark: SparkSession, spec: DatasetSpec | str, day: int, *, num_partitions: int | None = None) -> BatchParts:
    """Upsert batch `day` (1..spec.batch_days) as named parts; `batch()` is their union (in another row order)."""
    spec = resolve_spec(spec)
    rows = _batch_rows(spark, spec, day, num_partitions)
    inserts, updates, late = (_finish(_where(rows, f"_kind = {kind} AND _copy = 1"), spec) for kind in (_INSERT, _UPDATE, _LATE))
    return BatchParts(day, inserts, updates, late, _finish(_where(rows, "_copy = 2"), spec))


def batch(spark: SparkSession, spec: DatasetSpec | str, day: int, *, num_partitions: int | None = None) -> DataFrame:
    """Daily upsert batch `day` (1..spec.batch_days): the new day's inserts, corrections of the
    previous day, late corrections of older days, and stale in-batch duplicates (newest `updated_at` wins).

    Row order: corrections of the previous day, the new day's readings, then late
    corrections, each in time order; a stale duplicate follows its newer twin.
    """
    spec = resolve_spec(spec)
    return _finish(_batch_rows(spark, spec, day, num_partitions), spec)


def fingerprint(df: DataFrame) -> tuple[int, int]:
    """(row count, sum of row hashes): equal for equal multisets of rows, whatever their order or partitioning."""
    row = df.select(F.count(F.lit(1)).alias("n"), F.sum(F.xxhash64(*df.columns).cast("decimal(38,0)")).alias("h")).first()
    assert row is not None  # an aggregate has one row
    return int(row["n"]), int(row["h"] or 0)
