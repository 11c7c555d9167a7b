"""The class-data sharing archive's workload (run by `cds.prepare`): a session that bulk inserts, upserts and queries, then exits.

    python -m labformat.cds_dump <archive path>
"""

from __future__ import annotations

import os
import sys
import tempfile


def dump(target: str) -> None:
    """Run what a labformat session usually runs, then let the JVM exit and write `target`."""
    import labformat as lf
    from labformat.spark.session import spark_session
    from pyspark.sql import functions as F

    spark = spark_session(master="local[2]", **{"spark.driver.extraJavaOptions": f"-XX:ArchiveClassesAtExit={target}",
                                                "spark.ui.enabled": "false"})
    with tempfile.TemporaryDirectory() as folder:
        rows = (spark.range(2000, numPartitions=2)
                .select(F.format_string("202401150%03d_d%02d", F.col("id") % 1000, F.col("id") % 7).alias("record_key"),
                        F.lit("2024-01-15").alias("day"), (F.col("id") * 1.5).alias("value"),
                        F.current_timestamp().alias("updated_at")))
        table = lf.Table.create(spark, os.path.join(folder, "t"), record_key="record_key",
                                precombine_field="updated_at", partition_field="day")
        table.bulk_insert(rows.where(F.col("id") < 1000))
        table.upsert(rows.where(F.col("id") >= 500))
        table.read().where(F.col("record_key") > "202401150500").count()
    # The class path the archive is tied to, for `cds._maps` to check it against.
    jvm = spark.sparkContext._jvm
    assert jvm is not None  # a classic session's driver
    with open(f"{target}.classpath", "w") as out:
        out.write(jvm.java.lang.System.getProperty("java.class.path"))
    from pyspark import SparkContext

    process = getattr(SparkContext._gateway, "proc", None)
    spark.stop()
    if process is not None:
        # The JVM exits when its stdin closes (PythonGatewayServer), writing the archive as it goes.
        process.stdin.close()
        if process.wait(timeout=300) != 0:
            sys.exit(f"the JVM exited with {process.returncode} while writing the archive")


if __name__ == "__main__":
    dump(sys.argv[1])
