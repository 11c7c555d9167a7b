"""Spark integration: the one session builder (and, later, the Spark UI REST client)."""

from labformat.spark.session import check_java, spark_session
from labformat.spark.ui import SparkUI, last_group

__all__ = ["SparkUI", "check_java", "last_group", "spark_session"]
