"""Rebuild a table's metadata table (file listing, column stats, bloom filters) from its base files.

    python scripts/rebuild_metadata.py PATH/TO/TABLE
"""

import sys

import labformat as lf

if __name__ == "__main__":
    if len(sys.argv) != 2:
        sys.exit(__doc__)
    spark = lf.spark_session()
    report = lf.Table.open(spark, sys.argv[1]).rebuild_metadata()
    print(f"rebuilt the metadata of instant {report.details.of_instant}: {report.details.files} base files in "
          f"{report.seconds:.1f} s")
