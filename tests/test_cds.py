"""The Spark JVM's class-data sharing archive: named for its Java and Spark, used only when whole, never required."""

import subprocess

from labformat.spark import cds


def test_a_session_maps_the_archive_only_once_it_is_prepared(monkeypatch, tmp_path):
    monkeypatch.setenv("LABFORMAT_CACHE", str(tmp_path))
    monkeypatch.delenv(cds.ENV, raising=False)
    assert cds.java_option() == ""
    path = cds.archive_path()
    assert path.parent == tmp_path / "jvm" and path.suffix == ".jsa"
    path.parent.mkdir()
    path.write_bytes(b"archive")
    assert cds.java_option() == f"-XX:SharedArchiveFile={path}"
    monkeypatch.setenv(cds.ENV, "0")
    assert cds.java_option() == ""


def test_another_spark_gets_another_archive(monkeypatch, tmp_path):
    jars = tmp_path / "jars"
    jars.mkdir()
    (jars / "spark-core.jar").write_bytes(b"x" * 10)
    monkeypatch.setenv("LABFORMAT_CACHE", str(tmp_path))
    monkeypatch.setattr(cds, "_jars", lambda: jars)
    first = cds.archive_path()
    (jars / "spark-core.jar").write_bytes(b"x" * 11)
    assert cds.archive_path() != first


def test_prepare_moves_only_a_whole_archive_into_place(monkeypatch, tmp_path):
    monkeypatch.setenv("LABFORMAT_CACHE", str(tmp_path))
    monkeypatch.delenv(cds.ENV, raising=False)
    seen = []

    def dump(command, **kwargs):
        partial = command[-1]
        seen.append(partial)
        assert not cds.archive_path().exists()  # never in place while being written
        with open(partial, "wb") as f:
            f.write(b"archive")
        return subprocess.CompletedProcess(command, 0, "", "")

    monkeypatch.setattr(cds.subprocess, "run", dump)
    path = cds.prepare(quiet=True)
    assert path == cds.archive_path() and path.read_bytes() == b"archive" and seen[0].endswith(".partial")
    assert cds.prepare(quiet=True) == path and len(seen) == 1  # made once


def test_a_java_that_cannot_dump_leaves_no_archive(monkeypatch, tmp_path):
    monkeypatch.setenv("LABFORMAT_CACHE", str(tmp_path))
    monkeypatch.delenv(cds.ENV, raising=False)

    def fails(command, **kwargs):
        with open(command[-1], "wb") as f:
            f.write(b"half")
        return subprocess.CompletedProcess(command, 1, "Error: cannot dump dynamic archive without base archive", "")

    monkeypatch.setattr(cds.subprocess, "run", fails)
    assert cds.prepare(quiet=True) is None
    assert list((tmp_path / "jvm").iterdir()) == [] and cds.java_option() == ""
