"""Shared fixtures: one SparkSession for the whole pytest session, tiny data everywhere."""

from __future__ import annotations

import os
from pathlib import Path

import pytest


# Set by tests/test_connect.py for the pytest it starts: the session is then a Spark Connect one
# (a server in this process's JVM, reached over gRPC), and the classic-only tests are skipped.
CONNECT_ENV = "LABFORMAT_TEST_CONNECT"
CONNECT_PORT = 15002  # Spark Connect's default port

SESSION_CONF = {
    "spark.sql.shuffle.partitions": "4",
    "spark.default.parallelism": "4",
    "spark.driver.memory": "2g",
    "spark.ui.enabled": "true",
}


@pytest.fixture(scope="session")
def spark(tmp_path_factory):
    import labformat as lf

    log = str(tmp_path_factory.mktemp("spark-log") / "spark.log")
    if os.environ.get(CONNECT_ENV):
        session = connect_session(log)
    else:
        session = lf.spark_session(master="local[2]", log_path=log, **SESSION_CONF)
    yield session
    session.stop()


def connect_session(log_path: str):
    """A Spark Connect session on `local[2]`: pyspark starts the Connect server in this process's JVM."""
    import sys
    import warnings

    from pyspark.sql import SparkSession

    from labformat.spark.session import DEFAULT_CONF, LOCAL_CONF, _jvm_output_to, jvm_options

    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    # The options configure the server as it starts; pyspark then also tries each one as a session
    # option and warns about those only a server start can set.
    warnings.filterwarnings("ignore", message="Failed to set spark", category=UserWarning)
    builder = SparkSession.builder.remote("local[2]").config("spark.connect.grpc.binding.port", str(CONNECT_PORT))
    jvm = jvm_options()  # the server's JVM, like every session's: the class archive and $LABFORMAT_JAVA_OPTIONS
    for key, value in {**DEFAULT_CONF, **LOCAL_CONF, **SESSION_CONF,
                       **({"spark.driver.defaultJavaOptions": jvm} if jvm else {})}.items():
        builder = builder.config(key, value)
    with _jvm_output_to(Path(log_path)):
        session = builder.getOrCreate()
    # Writer processes (tests/concurrent_writer.py) connect to this server as clients of their own.
    os.environ["LABFORMAT_TEST_WRITER_MASTER"] = f"sc://localhost:{CONNECT_PORT}"
    return session


def pytest_collection_modifyitems(config, items):
    """Every test that uses the `spark` fixture, directly or through another fixture, is marked `spark`."""
    on_connect = bool(os.environ.get(CONNECT_ENV))
    for item in items:
        if "spark" in getattr(item, "fixturenames", ()) and item.get_closest_marker("spark") is None:
            item.add_marker(pytest.mark.spark)
        if on_connect and item.get_closest_marker("classic_only") is not None:
            item.add_marker(pytest.mark.skip(reason="needs a classic SparkSession (the JVM on this side)"))


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
