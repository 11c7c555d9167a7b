"""Spark integration: the session builder, per-step job groups, and the Spark UI REST client."""

from labformat.spark.session import check_java, ship_labformat, spark_session
from labformat.spark.ui import SparkUI, last_group

__all__ = ["SparkUI", "check_java", "last_group", "ship_labformat", "spark_session"]
