"""Shared fixtures: one SparkSession for the whole pytest session, tiny data everywhere."""

from __future__ import annotations

import pytest


@pytest.fixture(scope="session")
def spark(tmp_path_factory):
    import labformat as lf

    session = lf.spark_session(
        master="local[2]",
        log_path=str(tmp_path_factory.mktemp("spark-log") / "spark.log"),
        **{
            "spark.sql.shuffle.partitions": "4",
            "spark.default.parallelism": "4",
            "spark.driver.memory": "2g",
            # Tests start many short jobs; a JVM that stops at C1 and uses the serial GC starts faster.
            "spark.driver.extraJavaOptions": "-XX:TieredStopAtLevel=1 -XX:+UseSerialGC",
            "spark.ui.enabled": "true",
        },
    )
    yield session
    session.stop()


def pytest_collection_modifyitems(config, items):
    """Every test that uses the `spark` fixture, directly or through another fixture, is marked `spark`."""
    for item in items:
        if "spark" in getattr(item, "fixturenames", ()) and item.get_closest_marker("spark") is None:
            item.add_marker(pytest.mark.spark)


@pytest.fixture(scope="session")
def s3_server(tmp_path_factory):
    """A local S3 server (SeaweedFS), started once for the session on free ports of 127.0.0.1."""
    from labformat.s3_server import S3Server

    with S3Server.start(tmp_path_factory.mktemp("seaweedfs")) as server:
        yield server


@pytest.fixture(params=["local", pytest.param("s3", marks=pytest.mark.s3)])
def home(request, tmp_path, monkeypatch):
    """Where this test's tables live: a temporary folder, then a fresh prefix on the session's S3
    server. On S3 the standard AWS_* variables point at the server too, so a writer in another
    process (the crash and concurrency tests') finds it as a cluster job would."""
    from tests.helpers import TableHome

    if request.param == "local":
        return TableHome(str(tmp_path), {})
    import uuid

    server = request.getfixturevalue("s3_server")
    for variable, value in server.environment().items():
        monkeypatch.setenv(variable, value)
    return TableHome(server.uri(f"t-{uuid.uuid4().hex[:8]}"), server.storage_options)
