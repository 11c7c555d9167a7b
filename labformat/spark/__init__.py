"""Spark integration: the one session builder (and, later, the Spark UI REST client)."""

from labformat.spark.session import check_java, spark_session

__all__ = ["check_java", "spark_session"]
