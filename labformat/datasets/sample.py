"""The committed sample: a few hundred rows of the `tiny` dataset as CSV, for reading without Spark.

`write_sample(spark, out_dir)` writes
- `history.csv`: both drones, the first 3 hours of the history (360 rows);
- `batch_001.csv`: the rows of upsert batch 1 whose reading falls in the first hour
  of its day (new inserts, corrections and stale duplicates alike).
Rows are sorted by (record_key, updated_at); timestamps are ISO 8601 in UTC.
"""

from __future__ import annotations

import shutil
import tempfile
from pathlib import Path

from pyspark.sql import Column, DataFrame, SparkSession
from pyspark.sql import functions as F

from labformat.datasets.drone import batch, history
from labformat.datasets.spec import spec as _spec

SAMPLE_DIR = Path(__file__).resolve().parents[2] / "datasets" / "sample"
HISTORY_MINUTES = 180
BATCH_MINUTES = 60


def _minute_of_day_below(limit: int) -> Column:
    hhmm = F.substring("record_key", 9, 4)  # monotonic keys: yyyyMMddHHmm_droneNNNN
    return hhmm < F.lit(f"{limit // 60:02d}{limit % 60:02d}")


def sample_frames(spark: SparkSession) -> dict[str, DataFrame]:
    """The sample tables by file name (before writing)."""
    tiny = _spec("tiny")
    first_day = tiny.start_date.isoformat()
    return {
        "history.csv": history(spark, tiny).where((F.col("day") == first_day) & _minute_of_day_below(HISTORY_MINUTES)),
        "batch_001.csv": batch(spark, tiny, 1).where(_minute_of_day_below(BATCH_MINUTES)),
    }


def _write_one_csv(df: DataFrame, target: Path) -> None:
    with tempfile.TemporaryDirectory(dir=target.parent) as tmp:
        out = Path(tmp) / "csv"
        (
            df.coalesce(1)
            .sortWithinPartitions("record_key", "updated_at")
            .write.option("header", True)
            .option("timestampFormat", "yyyy-MM-dd'T'HH:mm:ss.SSSSSSXXX")
            .csv(str(out))
        )
        (part,) = out.glob("part-*.csv")
        shutil.move(str(part), target)


def write_sample(spark: SparkSession, out_dir: str | Path = SAMPLE_DIR) -> list[Path]:
    """Write the sample CSVs into `out_dir` (default: `datasets/sample/` of the checkout); return their paths."""
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    # CSV renders timestamps in the session time zone; the sample is always UTC.
    zone = spark.conf.get("spark.sql.session.timeZone")
    spark.conf.set("spark.sql.session.timeZone", "UTC")
    try:
        paths = []
        for name, df in sample_frames(spark).items():
            _write_one_csv(df, out_dir / name)
            paths.append(out_dir / name)
        return paths
    finally:
        if zone is None:
            spark.conf.unset("spark.sql.session.timeZone")
        else:
            spark.conf.set("spark.sql.session.timeZone", zone)
