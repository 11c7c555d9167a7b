"""The Spark JVM's class-data sharing archive: named for its Java and Spark, used only when whole and proven, never required."""

import pytest

from labformat.spark import cds, java


def _ready_archive(path, content=b"archive"):
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(content)
    cds._checked(path).write_text(str(len(content)))


def test_a_session_maps_the_archive_only_once_it_is_prepared_and_whole(monkeypatch, tmp_path):
    monkeypatch.setenv("LABFORMAT_CACHE", str(tmp_path / "a folder with spaces"))
    monkeypatch.delenv(cds.ENV, raising=False)
    assert cds.java_option() == ""
    path = cds.archive_path()
    assert path.parent == tmp_path / "a folder with spaces" / "jvm" and path.suffix == ".jsa"
    path.parent.mkdir(parents=True)
    path.write_bytes(b"archive")
    assert cds.java_option() == ""  # no check mark: never proven to map
    _ready_archive(path)
    assert cds.java_option() == f'-XX:SharedArchiveFile="{path}"'  # quoted: Spark splits options like a shell
    path.write_bytes(b"arch")  # truncated since: a JVM mapping it would crash
    assert cds.java_option() == ""
    _ready_archive(path)
    assert cds.java_option("-Xmx1g -Xshare:off") == ""  # the caller decides sharing
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


def _fake_dump(monkeypatch, returncode=0, maps=""):
    seen = []

    class Dump:
        def __init__(self, command, **kwargs):
            self.pid, self.partial = 999_999_999, command[-1]
            seen.append(self.partial)

        def communicate(self, timeout=None):
            with open(self.partial, "wb") as f:
                f.write(b"archive")
            with open(f"{self.partial}.classpath", "w") as f:
                f.write("/spark/jars/a.jar")
            self.returncode = returncode
            return ("Error: cannot dump dynamic archive without base archive" if returncode else ""), None

    monkeypatch.setattr(cds.subprocess, "Popen", Dump)
    monkeypatch.setattr(cds, "_maps", lambda archive: maps)
    return seen


def test_prepare_moves_only_a_proven_archive_into_place_once(monkeypatch, tmp_path):
    monkeypatch.setenv("LABFORMAT_CACHE", str(tmp_path))
    monkeypatch.delenv(cds.ENV, raising=False)
    seen = _fake_dump(monkeypatch)
    path = cds.prepare(quiet=True)
    assert path == cds.archive_path() and path.read_bytes() == b"archive" and seen[0].endswith(".partial")
    assert cds.java_option() and sorted(p.name for p in path.parent.iterdir()) == [".lock", path.name, path.name + ".ok"]
    assert cds.prepare(quiet=True) == path and len(seen) == 1  # made once


def test_a_dump_that_fails_or_does_not_map_leaves_nothing_behind(monkeypatch, tmp_path):
    monkeypatch.setenv("LABFORMAT_CACHE", str(tmp_path))
    monkeypatch.delenv(cds.ENV, raising=False)
    for returncode, maps in ((1, ""), (0, "a JVM could not map it (exit 134)")):
        _fake_dump(monkeypatch, returncode, maps)
        assert cds.prepare(quiet=True) is None
        assert [p.name for p in (tmp_path / "jvm").iterdir()] == [".lock"] and cds.java_option() == ""


def test_an_unusable_cache_folder_only_costs_the_speed_up(monkeypatch, tmp_path):
    (tmp_path / "a-file").write_text("not a folder")
    monkeypatch.setenv("LABFORMAT_CACHE", str(tmp_path / "a-file" / "cache"))
    monkeypatch.delenv(cds.ENV, raising=False)
    assert cds.prepare(quiet=True) is None and cds.java_option() == ""


def test_a_jvm_refuses_an_archive_that_is_not_one(tmp_path):
    """The check prepare makes before it trusts a dump: a real JVM with sharing required."""
    bogus = tmp_path / "spark.jsa.1.partial"
    bogus.write_bytes(b"\0" * 4096)
    (tmp_path / "spark.jsa.1.partial.classpath").write_text(str(tmp_path))
    assert cds._maps(bogus).startswith("a JVM could not map it")


def test_a_jvm_gets_the_archive_and_labformat_java_options_unless_they_turn_sharing_off(monkeypatch, tmp_path):
    from labformat.spark.session import jvm_options

    monkeypatch.setenv("LABFORMAT_CACHE", str(tmp_path))
    monkeypatch.delenv(cds.ENV, raising=False)
    _ready_archive(cds.archive_path())
    monkeypatch.setenv(java.OPTIONS_ENV, "-Dlabformat.x=1")
    assert jvm_options() == f'-XX:SharedArchiveFile="{cds.archive_path()}" -Dlabformat.x=1'
    assert jvm_options("-Xshare:off") == "-Dlabformat.x=1"  # the caller's options decide sharing
    monkeypatch.setenv(java.OPTIONS_ENV, "-Xshare:off")
    assert jvm_options() == "-Xshare:off"  # and so do the variable's
    monkeypatch.delenv(java.OPTIONS_ENV)
    assert jvm_options() == f'-XX:SharedArchiveFile="{cds.archive_path()}"'


@pytest.mark.classic_only
def test_the_session_jvm_runs_with_labformat_java_options(spark):
    """The root conftest sets $LABFORMAT_JAVA_OPTIONS for every test JVM: the session's really runs with them."""
    extra = java.extra_options().split()
    assert extra, "the tests set LABFORMAT_JAVA_OPTIONS (conftest.py)"
    running = list(spark._jvm.java.lang.management.ManagementFactory.getRuntimeMXBean().getInputArguments())
    assert [o for o in extra if o not in running] == []


def test_the_background_dump_starts_only_when_the_archive_is_missing(monkeypatch, tmp_path):
    monkeypatch.setenv("LABFORMAT_CACHE", str(tmp_path))
    monkeypatch.delenv(cds.ENV, raising=False)
    started = []
    monkeypatch.setattr(cds.subprocess, "Popen", lambda command, **kwargs: started.append(command) or "child")
    assert cds.prepare_in_background() == "child" and started[0][-2:] == ["-m", "labformat.spark.cds"]
    assert cds.log_path().exists()  # where its output goes
    _ready_archive(cds.archive_path())
    assert cds.prepare_in_background() is None and len(started) == 1  # ready: nothing to do
    monkeypatch.setenv(cds.ENV, "0")
    cds.archive_path().unlink()
    assert cds.prepare_in_background() is None  # turned off


def test_a_failed_background_dump_says_why_and_an_interrupted_job_stops_it(monkeypatch, tmp_path, capsys):
    import subprocess
    import sys
    import time

    monkeypatch.setenv("LABFORMAT_CACHE", str(tmp_path))
    monkeypatch.delenv(cds.ENV, raising=False)
    cds.archive_path().parent.mkdir(parents=True)
    cds.log_path().write_text("Preparing ...\n"
                              "  no archive (a JVM could not map it (exit 134)); Spark starts without it\nno archive\n")
    cds.wait_for(subprocess.Popen([sys.executable, "-c", "raise SystemExit(1)"]))
    said = capsys.readouterr().out
    assert "exit 1: no archive (a JVM could not map it (exit 134)); Spark starts without it / no archive" in said
    assert str(cds.log_path()) in said
    # A job that fails or is interrupted stops its dump rather than leave it running.
    child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(120)"])
    started = time.monotonic()
    cds.stop(child)
    assert child.poll() is not None and time.monotonic() - started < 40
    cds.stop(None)  # nothing started: nothing to do
