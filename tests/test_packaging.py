"""The set-up tooling: pyproject.toml vs environment.yml, README's commands vs .ci/run, scripts/lab.py.

No Spark needed. The tests that run scripts/lab.py in a subprocess never reinstall the
project's .venv: they use it when it is up to date, and LABFORMAT_NO_VENV=1 otherwise.
"""

from __future__ import annotations

import ast
import importlib.util
import os
import re
import shutil
import stat
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
LAB_PY = ROOT / "scripts" / "lab.py"
README_COMMANDS = ["python3 scripts/lab.py run", "python3 scripts/lab.py test"]
LAB_COMMAND = "python3 scripts/lab.py lab"

# conda-forge names whose PyPI name differs.
CONDA_TO_PYPI = {"matplotlib-base": "matplotlib", "python-xxhash": "xxhash"}
# Lines of environment.yml that pyproject.toml does not list.
CONDA_ONLY = {"python", "openjdk", "pip"}

_REQUIREMENT = re.compile(r"^\s*([A-Za-z0-9][A-Za-z0-9._-]*)\s*(?:\[[^\]]*\])?\s*([^;#]*)")


def normalize(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def split_requirement(text: str) -> tuple[str, tuple[str, ...]]:
    """'pandas>=2.2,<3' -> ('pandas', ('<3', '>=2.2')): normalized name, sorted specifier clauses."""
    match = _REQUIREMENT.match(text)
    assert match, f"cannot parse requirement {text!r}"
    spec = match.group(2).replace(" ", "")
    return normalize(match.group(1)), tuple(sorted(clause for clause in spec.split(",") if clause))


def load_lab_module():
    spec = importlib.util.spec_from_file_location("labformat_bootstrap", LAB_PY)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


# --- environment.yml ------------------------------------------------------------------


def parse_environment(text: str) -> dict:
    """Parse the small YAML subset environment.yml is written in (PyYAML may not be installed).

    Returns {"name": str, "channels": [...], "conda": [...], "pip": [...]}. Any line this
    parser does not understand is an error, so a format change cannot slip past the checks.
    """
    result: dict = {"name": None, "channels": [], "conda": [], "pip": []}
    section = None
    for number, raw in enumerate(text.splitlines(), 1):
        line = re.sub(r"(^|\s)#.*$", "", raw).rstrip()
        if not line.strip():
            continue
        indent = len(line) - len(line.lstrip(" "))
        body = line.strip()
        if indent == 0:
            key, _, value = body.partition(":")
            assert _ == ":", f"environment.yml:{number}: expected `key:` at top level, got {raw!r}"
            if key == "name":
                result["name"] = value.strip()
                section = None
            elif key in ("channels", "dependencies"):
                assert not value.strip(), f"environment.yml:{number}: write {key} as a list, one item a line"
                section = key
            else:
                raise AssertionError(f"environment.yml:{number}: unexpected top-level key {key!r}")
            continue
        assert body.startswith("- "), f"environment.yml:{number}: expected a list item, got {raw!r}"
        item = body[2:].strip()
        if section == "channels":
            result["channels"].append(item)
        elif section == "dependencies" and item == "pip:":
            section = "pip"
        elif section == "dependencies":
            result["conda"].append(item)
        elif section == "pip":
            assert indent > 2, f"environment.yml:{number}: the pip: sub-list must come last in dependencies"
            result["pip"].append(item)
        else:
            raise AssertionError(f"environment.yml:{number}: list item outside channels/dependencies: {raw!r}")
    return result


@pytest.fixture(scope="module")
def pyproject() -> dict:
    return tomllib.loads((ROOT / "pyproject.toml").read_text())


@pytest.fixture(scope="module")
def environment() -> dict:
    return parse_environment((ROOT / "environment.yml").read_text())


def pyproject_requirements(pyproject: dict) -> dict[str, tuple[str, ...]]:
    entries = pyproject["project"]["dependencies"] + pyproject["project"]["optional-dependencies"]["test"]
    parsed = [split_requirement(entry) for entry in entries]
    assert len({name for name, _ in parsed}) == len(parsed), "a package is listed twice in pyproject.toml"
    return dict(parsed)


def environment_requirements(environment: dict) -> dict[str, tuple[str, ...]]:
    parsed = []
    for entry in environment["conda"] + environment["pip"]:
        if entry == "-e .":
            continue
        name, spec = split_requirement(entry)
        name = CONDA_TO_PYPI.get(name, name)
        if name not in CONDA_ONLY:
            parsed.append((name, spec))
    assert len({name for name, _ in parsed}) == len(parsed), "a package is listed twice in environment.yml"
    return dict(parsed)


def test_parse_environment_reads_nested_pip_list_and_rejects_unknown_lines():
    text = "name: x\nchannels:\n  - conda-forge\ndependencies:\n  - a>=1  # note\n  - pip:\n      - b<2\n      - -e .\n"
    assert parse_environment(text) == {"name": "x", "channels": ["conda-forge"], "conda": ["a>=1"], "pip": ["b<2", "-e ."]}
    with pytest.raises(AssertionError):
        parse_environment(text + "variables:\n  X: 1\n")


def test_environment_uses_conda_forge_only(environment):
    assert environment["name"] == "labformat"
    assert environment["channels"] == ["conda-forge"]


def test_environment_has_python_java_pip_and_the_project(environment, pyproject):
    conda = dict(split_requirement(entry) for entry in environment["conda"])
    assert conda.get("python") == split_requirement("python" + pyproject["project"]["requires-python"])[1]
    from labformat.spark.session import MIN_JAVA

    assert "openjdk" in conda, "environment.yml must bring Java (openjdk)"
    java = conda["openjdk"]
    assert len(java) == 1 and re.fullmatch(r"=+\d+", java[0]), f"pin one openjdk major version, got {java}"
    assert int(java[0].lstrip("=")) >= MIN_JAVA
    assert "pip" in conda
    assert environment["pip"] and environment["pip"][-1] == "-e .", "the pip: list must end with `-e .`"


def test_environment_lists_the_same_packages_as_pyproject(environment, pyproject):
    expected = set(pyproject_requirements(pyproject))
    actual = set(environment_requirements(environment))
    assert actual == expected, (
        f"only in pyproject.toml: {sorted(expected - actual)}; only in environment.yml: {sorted(actual - expected)}"
    )


def test_environment_versions_match_pyproject(environment, pyproject):
    expected = pyproject_requirements(pyproject)
    actual = environment_requirements(environment)
    differ = {name: (expected[name], actual[name]) for name in expected.keys() & actual.keys() if expected[name] != actual[name]}
    assert not differ, f"version bounds differ (pyproject.toml, environment.yml): {differ}"


def test_split_requirement_normalizes():
    assert split_requirement("Foo_Bar >= 1.0, <2") == ("foo-bar", ("<2", ">=1.0"))
    assert split_requirement("pip") == ("pip", ())
    assert split_requirement("x[extra]>=1; python_version>'3'") == ("x", (">=1",))


# --- README and .ci/run -----------------------------------------------------------------


def fenced_blocks(text: str) -> list[tuple[int, list[str]]]:
    """(line index of the opening fence, command lines without comments/blank lines) per fenced block."""
    blocks, current, start = [], None, 0
    for index, line in enumerate(text.splitlines()):
        if line.startswith("```"):
            if current is None:
                current, start = [], index
            else:
                blocks.append((start, current))
                current = None
        elif current is not None and line.strip() and not line.lstrip().startswith("#"):
            current.append(line.strip())
    assert current is None, "README.md has an unclosed code fence"
    return blocks


def command_lines(script: str) -> list[str]:
    return [line.strip() for line in script.splitlines() if line.strip() and not line.lstrip().startswith("#")]


def test_readme_starts_with_the_two_commands():
    text = (ROOT / "README.md").read_text()
    lines = text.splitlines()
    assert lines[0] == "# labformat tuning lab"
    blocks = fenced_blocks(text)
    assert blocks, "README.md has no fenced code block"
    start, commands = blocks[0]
    assert lines[start] in ("```bash", "```sh", "```shell")
    # Between the title and the commands: one paragraph (the one-sentence description), nothing else.
    between = [line for line in lines[1:start] if line.strip()]
    assert len(between) == 1 and not between[0].startswith("#"), f"expected one sentence before the commands, got {between}"
    assert commands == README_COMMANDS


def test_readme_documents_jupyterlab():
    text = (ROOT / "README.md").read_text()
    assert "## Opening the workshop in JupyterLab" in text
    section = text.split("## Opening the workshop in JupyterLab", 1)[1]
    assert any(commands == [LAB_COMMAND] for _, commands in fenced_blocks(section))


def test_ci_runs_exactly_the_readme_test_command():
    readme_test = fenced_blocks((ROOT / "README.md").read_text())[0][1][1]
    ci = ROOT / ".ci" / "run"
    assert ci.stat().st_mode & stat.S_IXUSR, ".ci/run must be executable"
    text = ci.read_text()
    assert text.startswith("#!/usr/bin/env bash\n") or text.startswith("#!/bin/bash\n")
    commands = command_lines(text)
    assert commands[0] == "set -euo pipefail"
    assert re.fullmatch(r'cd "\$\(dirname "\$0"\)/\.\."', commands[1]), commands[1]
    assert commands[2:] == [readme_test], f".ci/run must run only {readme_test!r}, runs {commands[2:]}"


# --- scripts/lab.py -----------------------------------------------------------------------


def test_lab_py_parses_as_python_3_6_so_old_interpreters_get_the_message():
    ast.parse(LAB_PY.read_text(), feature_version=(3, 6))


def test_lab_py_imports_only_the_standard_library():
    tree = ast.parse(LAB_PY.read_text())
    modules = {alias.name.split(".")[0] for node in ast.walk(tree) if isinstance(node, ast.Import) for alias in node.names}
    modules |= {node.module.split(".")[0] for node in ast.walk(tree) if isinstance(node, ast.ImportFrom)}
    assert modules - {"labformat"} <= set(sys.stdlib_module_names), modules - set(sys.stdlib_module_names)


def test_python_version_guard():
    lab = load_lab_module()
    message = lab.python_version_problem((3, 10, 12))
    assert message and "3.11" in message and "3.10" in message
    assert lab.python_version_problem((3, 11, 0)) is None
    assert lab.python_version_problem((4, 0, 0)) is None


def test_stamp_tracks_pyproject_and_python_version(tmp_path, monkeypatch):
    lab = load_lab_module()
    venv, pyproject = tmp_path / ".venv", tmp_path / "pyproject.toml"
    pyproject.write_text('[project]\nname = "x"\n')
    python = Path(lab.venv_python(str(venv)))
    python.parent.mkdir(parents=True)
    python.write_text("")
    assert not lab.venv_is_current(str(venv), str(pyproject))  # no stamp yet
    (venv / ".labformat-stamp").write_text(lab.expected_stamp(str(pyproject)))
    assert lab.venv_is_current(str(venv), str(pyproject))
    pyproject.write_text('[project]\nname = "y"\n')
    assert not lab.venv_is_current(str(venv), str(pyproject))  # pyproject changed
    (venv / ".labformat-stamp").write_text(lab.expected_stamp(str(pyproject)))
    monkeypatch.setattr(lab.platform, "python_version", lambda: "3.99.0")
    assert not lab.venv_is_current(str(venv), str(pyproject))  # another Python
    monkeypatch.undo()
    python.unlink()
    assert not lab.venv_is_current(str(venv), str(pyproject))  # interpreter gone


def test_the_lab_runs_without_the_test_extras_and_extras_installed_once_stay(tmp_path):
    lab = load_lab_module()
    assert lab.EXTRAS["run"] == lab.EXTRAS["lab"] == ("lab", "formats") and lab.EXTRAS["test"] == ("test",)
    assert lab.EXTRAS["check"] == lab.EXTRAS["run"]  # a learner's laptop set up the day before
    venv, pyproject = tmp_path / ".venv", tmp_path / "pyproject.toml"
    pyproject.write_text('[project]\nname = "x"\n')
    python = Path(lab.venv_python(str(venv)))
    python.parent.mkdir(parents=True)
    python.write_text("")
    stamp = venv / ".labformat-stamp"
    stamp.write_text(lab.expected_stamp(str(pyproject)))  # what a table needs only
    assert lab.venv_is_current(str(venv), str(pyproject), extras=())
    assert not lab.venv_is_current(str(venv), str(pyproject), extras=lab.EXTRAS["run"])
    stamp.write_text(lab.expected_stamp(str(pyproject), extras=lab.EXTRAS["run"]))
    assert lab.venv_is_current(str(venv), str(pyproject), extras=lab.EXTRAS["run"])
    assert not lab.venv_is_current(str(venv), str(pyproject), extras=lab.EXTRAS["test"])
    stamp.write_text(lab.expected_stamp(str(pyproject), extras=("test", "bench")))
    assert lab.installed_extras(str(venv), str(pyproject)) == {"test", "bench"}
    # The test extra holds every other extra's packages: `run` and `check` after `test` install nothing.
    assert lab.venv_is_current(str(venv), str(pyproject), extras=lab.EXTRAS["run"] + ("connect", "s3"))
    assert lab.venv_is_current(str(venv), str(pyproject), extras=("test",))
    assert lab.venv_is_current(str(venv), str(pyproject), extras=())
    stamp.write_text(stamp.read_text().splitlines()[0] + "\n")  # an old or broken stamp: set up again
    assert lab.installed_extras(str(venv), str(pyproject)) is None
    # What a table needs holds nothing only the lab, the other formats, Connect, the tests or the
    # benchmark need: a cluster's executors install it; notebook 08 writes with the formats extra.
    import tomllib

    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    names = lambda entries: {split_requirement(e)[0] for e in entries}  # noqa: E731
    core, extras = names(project["dependencies"]), project["optional-dependencies"]
    assert core == {"pyspark", "pyarrow", "numpy", "pandas", "fastavro", "xxhash", "hilbertcurve", "obstore"}
    assert {"jupyterlab", "matplotlib", "ipywidgets", "nbclient", "nbformat", "tqdm"} == names(extras["lab"])
    assert {"deltalake", "pyiceberg"} == names(extras["formats"]) and "sqlglot" in names(extras["connect"])
    every = set().union(*(names(e) for name, e in extras.items() if name != "test"))
    assert every <= names(extras["test"]), "the test extra lists every other extra's packages"
    assert "matplotlib" in names(extras["bench"]), "the benchmark draws its charts"


def _no_java_env(tmp_path) -> dict:
    """This environment with JAVA_HOME pointing nowhere and no folder holding `java` on PATH."""
    kept = [entry for entry in os.environ.get("PATH", "").split(os.pathsep) if entry and not shutil.which("java", path=entry)]
    env = dict(os.environ, PATH=os.pathsep.join(kept), JAVA_HOME=str(tmp_path / "no-such-jdk"))
    assert shutil.which("java", path=env["PATH"]) is None
    return env


def _lab_py(args, env, cwd=ROOT):
    """Run scripts/lab.py without letting it install: the project's .venv if up to date, else this interpreter."""
    env = dict(env)
    if not load_lab_module().venv_is_current():
        env["LABFORMAT_NO_VENV"] = "1"
    return subprocess.run(
        [sys.executable, str(LAB_PY), *args],
        env=env, cwd=cwd, capture_output=True, text=True, stdin=subprocess.DEVNULL, timeout=300
    )


def _assert_java_message(message: str):
    assert "openjdk-17-jre-headless" in message
    assert "environment.yml" in message


def test_check_java_names_the_fix(tmp_path, monkeypatch):
    from labformat.errors import JavaNotFoundError
    from labformat.spark import check_java

    env = _no_java_env(tmp_path)
    monkeypatch.setenv("PATH", env["PATH"])
    monkeypatch.setenv("JAVA_HOME", env["JAVA_HOME"])
    with pytest.raises(JavaNotFoundError) as info:
        check_java()
    _assert_java_message(str(info.value))


def test_lab_check_without_java_prints_only_the_fix(tmp_path):
    result = _lab_py(["check"], _no_java_env(tmp_path))
    output = result.stdout + result.stderr
    assert result.returncode == 2, output
    _assert_java_message(result.stderr)
    assert "Traceback" not in output
    assert "setting up" not in output, "lab.py reinstalled .venv although it was up to date"
    assert len(result.stderr.strip().splitlines()) == 1, result.stderr


def test_lab_check_with_java_is_quiet(tmp_path):
    if shutil.which("java") is None and not os.environ.get("JAVA_HOME"):
        pytest.skip("no Java on this machine")
    result = _lab_py(["check"], dict(os.environ))
    assert result.returncode == 0, result.stdout + result.stderr
    assert result.stderr == ""
    assert re.fullmatch(r"ok: .* is up to date, Java \d+ found\.\n", result.stdout), result.stdout


def test_the_whole_suite_runs_on_two_to_four_workers_a_file_each(monkeypatch):
    lab = load_lab_module()
    assert [lab.suite_workers(n) for n in (1, 2, 3, 8)] == [2, 2, 3, 4]
    calls = []
    monkeypatch.setattr(lab, "check_java", lambda: 17)
    monkeypatch.setattr(lab, "call", lambda argv, cwd=None: calls.append((argv, cwd)) or 0)
    assert lab.cmd_test([]) == 0 and lab.cmd_test(["tests/test_model.py"]) == 0
    (whole, root), (one, here) = calls
    assert whole[-4:] == ["-n", str(lab.suite_workers()), "--dist", "loadfile"] and root == lab.ROOT
    assert "-n" not in one and one[-1] == "tests/test_model.py" and here is None  # a developer's own arguments, as given


def test_lab_test_turns_no_tests_collected_into_a_failure():
    if shutil.which("java") is None and not os.environ.get("JAVA_HOME"):
        pytest.skip("no Java on this machine")
    result = _lab_py(["test", "-q", "-p", "no:cacheprovider", str(Path(__file__)), "-k", "no_test_has_this_name"],
                     dict(os.environ))
    assert result.returncode == 1, result.stdout + result.stderr
    assert "collected no tests" in result.stderr


def test_lab_rejects_unknown_command():
    result = subprocess.run([sys.executable, str(LAB_PY), "frobnicate"], capture_output=True, text=True,
                            env=dict(os.environ, LABFORMAT_NO_VENV="1"))
    assert result.returncode == 2
    assert "unknown command" in result.stderr


# --- the bootstrap itself, on a throwaway project ----------------------------------------------

FAKE_PYPROJECT = """\
[build-system]
requires = ["setuptools>=68"]
build-backend = "setuptools.build_meta"

[project]
name = "fakelab"
version = "0.0.1"
requires-python = ">=3.11"
dependencies = []

[project.optional-dependencies]
test = []

[tool.setuptools]
packages = []
"""

FAKE_SPARK = """\
class JavaNotFoundError(Exception):
    pass


def check_java():
    return 17
"""


@pytest.mark.slow
def test_bootstrap_installs_once_quietly_then_is_a_silent_no_op(tmp_path):
    """A copy of lab.py on a tiny project: first run sets up .venv with one line of output, the next prints nothing of it."""
    (tmp_path / "scripts").mkdir()
    shutil.copy(LAB_PY, tmp_path / "scripts" / "lab.py")
    (tmp_path / "pyproject.toml").write_text(FAKE_PYPROJECT)
    package = tmp_path / "labformat"
    (package / "spark").mkdir(parents=True)
    (package / "__init__.py").write_text("")
    (package / "errors.py").write_text("from labformat.spark import JavaNotFoundError\n")
    (package / "spark" / "__init__.py").write_text(FAKE_SPARK)
    env = {key: value for key, value in os.environ.items() if key != "LABFORMAT_NO_VENV"}

    def run():
        return subprocess.run(
            [sys.executable, "scripts/lab.py", "check"],
            cwd=tmp_path, env=env, capture_output=True, text=True, stdin=subprocess.DEVNULL, timeout=600
        )

    first = run()
    assert first.returncode == 0, first.stdout + first.stderr + (tmp_path / ".venv" / "pip.log").read_text()
    assert first.stderr == "", "pip's output (warnings included) belongs in .venv/pip.log"
    lines = first.stdout.splitlines()
    assert len(lines) == 2 and lines[0].startswith("setting up .venv") and lines[1].startswith("ok: .venv"), first.stdout
    assert "pip install" in (tmp_path / ".venv" / "pip.log").read_text()
    assert (tmp_path / ".venv" / ".labformat-stamp").exists()

    log_mtime = (tmp_path / ".venv" / "pip.log").stat().st_mtime_ns
    second = run()
    assert second.returncode == 0 and second.stderr == ""
    assert second.stdout.splitlines() == lines[1:], "an up-to-date .venv must not be touched"
    assert (tmp_path / ".venv" / "pip.log").stat().st_mtime_ns == log_mtime

    # A broken pyproject.toml: pip fails, lab.py shows the log's tail, exits 1 and writes no stamp.
    (tmp_path / "pyproject.toml").write_text(FAKE_PYPROJECT + "[tool.broken\n")
    third = run()
    assert third.returncode == 1
    assert "failed" in third.stderr and "pip.log" in third.stderr
    last_log_line = (tmp_path / ".venv" / "pip.log").read_text().strip().splitlines()[-1]
    assert last_log_line in third.stderr, "the tail of pip.log must be shown"
    assert "Traceback" not in third.stdout
    assert not (tmp_path / ".venv" / ".labformat-stamp").exists()
    assert run().returncode == 1, "a failed set-up must be retried, not stamped"


def test_s3_runs_add_the_s3_extra_and_nothing_else_does():
    lab = load_lab_module()
    lab_only = ("lab", "formats")
    assert lab.extras_for("run", ["--storage", "s3"]) == lab.extras_for("run", ["--storage=s3"]) == lab_only + ("s3",)
    assert lab.extras_for("run", ["--preset", "tiny"]) == lab.extras_for("run", ["--storage", "local"]) == lab_only
    assert lab.extras_for("bench", ["--engines", "labformat-bloom", "delta-rs-s3"]) == ("bench", "s3")
    assert lab.extras_for("test", []) == ("test",)


def test_a_spark_connect_master_adds_the_connect_extra(monkeypatch):
    lab = load_lab_module()
    assert lab.extras_for("run", [], environ={}) == ("lab", "formats")
    assert lab.extras_for("run", ["--master", "sc://host:15002"], environ={}) == ("lab", "formats", "connect")
    assert lab.extras_for("run", ["--master=sc://host:15002"], environ={})[-1] == "connect"
    assert lab.extras_for("lab", [], environ={lab.MASTER_ENV: "sc://localhost"})[-1] == "connect"
    assert lab.extras_for("run", ["--master", "local-standalone"], environ={lab.MASTER_ENV: "sc://x"}) == ("lab", "formats")
    assert lab.extras_for("check", [], environ={lab.MASTER_ENV: "sc://x"})[-1] == "connect"
    assert lab.extras_for("test", [], environ={lab.MASTER_ENV: "sc://x"}) == ("test",)  # the test extra has it


def test_pack_writes_a_relocatable_environment_without_pyspark_or_labformat(tmp_path):
    """`scripts/lab.py pack` (labformat.spark.pack): a virtual environment as a tar.gz for `spark.archives`,
    with pyspark (the cluster's own) and labformat (shipped as a zip) left out."""
    import tarfile

    from labformat.spark.pack import pack_environment

    env = tmp_path / "env"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(env)], check=True, timeout=120)
    site = next(env.glob("lib/python*/site-packages"))
    for name in ("pyspark", "labformat", "fastavro"):
        (site / name).mkdir()
        (site / name / "__init__.py").write_text("")
    # pip's editable install of this project: a finder module and the .pth file that installs it.
    (site / "__editable___labformat_0_1_0_finder.py").write_text("def install():\n    pass\n")
    (site / "__editable__.labformat-0.1.0.pth").write_text(
        "import __editable___labformat_0_1_0_finder; __editable___labformat_0_1_0_finder.install()\n")
    archive = pack_environment(env, tmp_path / "env.tar.gz")
    with tarfile.open(archive) as tar:
        names = tar.getnames()
    assert "bin/python" in names and "bin/activate" in names
    assert any(n.endswith("site-packages/fastavro/__init__.py") for n in names)
    assert not [n for n in names if "/pyspark" in n or "labformat" in n], names


def test_the_pack_command_installs_the_pack_extra():
    lab = load_lab_module()
    assert lab.extras_for("pack", []) == ("pack",)
    assert "pack" in tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["optional-dependencies"]
