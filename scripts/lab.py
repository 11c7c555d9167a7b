#!/usr/bin/env python3
"""Set up the project's virtual environment and run the lab, the tests or JupyterLab.

    python3 scripts/lab.py run [ARGS...]    the main job: python -m labformat.lab.main ARGS
    python3 scripts/lab.py test [ARGS...]   the tests: python -m pytest -ra ARGS (no ARGS: the whole
                                            suite on pytest-xdist workers, a file each at a time)
    python3 scripts/lab.py lab [ARGS...]    JupyterLab on notebooks/, at 127.0.0.1, no browser
    python3 scripts/lab.py bench [ARGS...]  the benchmark against the peers: python -m labformat.bench ARGS
    python3 scripts/lab.py check            only set up .venv and check Java
    python3 scripts/lab.py wheelhouse DIR   collect every package the commands install as wheels in DIR

Every sub-command first makes sure `.venv/` (at the repository root) matches
pyproject.toml: when it is missing, or its stamp file does not hold the sha256
of pyproject.toml, the Python version and the extras the command needs, it runs
`python -m venv .venv` and `.venv/bin/pip install -e .` (pip's output goes to
.venv/pip.log). `run`, `lab` and `check` install what a table needs (pyproject.toml's
dependencies), the lab extra (JupyterLab, matplotlib, widgets) and the formats extra
(delta-rs and pyiceberg, which notebook 08 writes with), and the connect extra for an
`sc://` master; `test` adds the test extra (every package), `bench` the bench extra;
extras installed once stay.
When it is up to date this costs a file read and a hash, and prints nothing.
Then the script runs itself again with .venv's interpreter, checks Java, and
does the job.

Offline (a room of laptops, one USB stick): `wheelhouse DIR` collects, as wheels for the
platform and Python it runs on, every package any command installs (the runtime dependencies,
every extra, and the setuptools that builds labformat itself); with LABFORMAT_WHEELHOUSE=DIR
set, setting up .venv runs `pip install --no-index --find-links DIR` and never touches the
network, and names the packages the wheelhouse lacks when it cannot finish.

Set LABFORMAT_NO_VENV=1 to skip .venv and use the interpreter running this
script as it is (e.g. inside the conda environment from environment.yml).

Standard library only, and no syntax newer than Python 3.6, so that an old
interpreter gets the version message instead of a SyntaxError.
"""

import hashlib
import importlib.util
import os
import platform
import re
import signal
import subprocess
import sys

MIN_PYTHON = (3, 11)

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
VENV = os.path.join(ROOT, ".venv")
STAMP = os.path.join(VENV, ".labformat-stamp")
LOCK = os.path.join(VENV, ".labformat-lock")
PIP_LOG = os.path.join(VENV, "pip.log")
PYPROJECT = os.path.join(ROOT, "pyproject.toml")
NO_VENV_ENV = "LABFORMAT_NO_VENV"
WHEELHOUSE_ENV = "LABFORMAT_WHEELHOUSE"
# Written into a wheelhouse: what it was built for, so that a laptop of another kind is told so.
WHEELHOUSE_MANIFEST = "labformat-wheelhouse.txt"
# Imported by the benchmark: its peers, its memory sampler and its charts (all the bench extra's).
BENCH_MODULES = ("deltalake", "pyiceberg", "psutil", "matplotlib")

USAGE = """usage: python3 scripts/lab.py {run,test,lab,bench,pack,check} [ARGS...]

  run [--preset NAME] [ARGS...]  run the lab (python -m labformat.lab.main ARGS; --storage s3: on a local S3 server;
                                 --master URL: on a Spark cluster or a Spark Connect endpoint)
  test [ARGS...]                 run the tests (python -m pytest -ra ARGS; default: the whole suite on xdist workers)
  lab [ARGS...]                  open JupyterLab on notebooks/ (127.0.0.1, no browser)
  bench [ARGS...]                benchmark against the peers (python -m labformat.bench ARGS)
  pack [--output FILE]           pack .venv for a cluster's executors (spark.archives; docs/cluster.md)
  check                          only set up .venv and check Java
  wheelhouse DIR                 collect every package the commands install as wheels in DIR (for this
                                 platform and Python); then LABFORMAT_WHEELHOUSE=DIR installs from it offline

Each one (but wheelhouse) first creates or refreshes .venv/ from pyproject.toml when needed,
from the package index, or with no network from the folder LABFORMAT_WHEELHOUSE names.
"""


def python_version_problem(version_info=None):
    """Return the message for a too-old Python, or None when this one is new enough."""
    version_info = sys.version_info if version_info is None else version_info
    if tuple(version_info[:2]) >= MIN_PYTHON:
        return None
    return "labformat needs Python {}.{} or newer; this is Python {}.{} ({}). Run this script with a newer python3.".format(
        MIN_PYTHON[0], MIN_PYTHON[1], version_info[0], version_info[1], sys.executable
    )


def bin_dir(venv=VENV):
    return os.path.join(venv, "Scripts" if os.name == "nt" else "bin")


def venv_python(venv=VENV):
    return os.path.join(bin_dir(venv), "python.exe" if os.name == "nt" else "python")


# The optional dependencies (pyproject.toml's extras) each command needs on top of what a table
# needs: the lab runs without the test and benchmark packages.
EXTRAS = {"run": ("lab", "formats"), "lab": ("lab", "formats"), "check": ("lab", "formats"), "test": ("test",),
          "bench": ("bench",), "pack": ("pack",)}
MASTER_ENV = "LABFORMAT_SPARK_MASTER"


def _option(args, name):
    """The value of `--name VALUE` or `--name=VALUE` in args, else None."""
    for i, arg in enumerate(args):
        if arg.startswith(name + "="):
            return arg[len(name) + 1:]
        if arg == name and i + 1 < len(args):
            return args[i + 1]
    return None


def extras_for(name, args, environ=None):
    """EXTRAS[name]; the `s3` extra (the local S3 server) when the job or benchmark asks for S3; the
    `connect` extra (a Spark Connect client) when the job's or the lab's master is `sc://...`."""
    environ = os.environ if environ is None else environ
    extras = EXTRAS[name]
    if name == "run" and _option(args, "--storage") == "s3":
        extras += ("s3",)
    elif name == "bench" and any(a.endswith("-s3") for a in args):  # labformat-bloom-s3, delta-rs-s3
        extras += ("s3",)
    if name in ("run", "lab", "check"):
        master = (_option(args, "--master") if name == "run" else None) or environ.get(MASTER_ENV, "")
        if master.startswith("sc://"):
            extras += ("connect",)
    return extras


def expected_stamp(pyproject=PYPROJECT, extras=()):
    """What the stamp holds once .venv has pyproject.toml's dependencies and `extras` installed."""
    with open(pyproject, "rb") as handle:
        digest = hashlib.sha256(handle.read()).hexdigest()
    return "pyproject.toml sha256 {}\npython {}\nextras {}\n".format(
        digest, platform.python_version(), ",".join(sorted(set(extras))))


def installed_extras(venv=VENV, pyproject=PYPROJECT):
    """The extras .venv has for this pyproject.toml and Python, or None when it must be set up again."""
    if not os.path.exists(venv_python(venv)):
        return None
    try:
        with open(os.path.join(venv, ".labformat-stamp")) as handle:
            lines = handle.read().splitlines()
    except OSError:
        return None
    if lines[:2] != expected_stamp(pyproject).splitlines()[:2] or len(lines) != 3 or not lines[2].startswith("extras "):
        return None
    return set(extra for extra in lines[2][len("extras "):].split(",") if extra)


# The test extra lists every other extra's packages again: a .venv that has it has them all.
HOLDS_EVERY_EXTRA = "test"


def venv_is_current(venv=VENV, pyproject=PYPROJECT, extras=()):
    """True when venv has an interpreter, and its stamp matches pyproject.toml, this Python and at least `extras`."""
    installed = installed_extras(venv, pyproject)
    return installed is not None and (HOLDS_EVERY_EXTRA in installed or set(extras) <= installed)


def running_in(venv=VENV):
    return os.path.realpath(sys.prefix) == os.path.realpath(venv)


def _tail(path, lines=40):
    try:
        with open(path, errors="replace") as handle:
            return "".join(handle.readlines()[-lines:])
    except OSError:
        return "(no log at {})\n".format(path)


def _fail_setup(message):
    sys.stderr.write("\n" + _tail(PIP_LOG))
    sys.stderr.write("error: {} (full log: {})\n".format(message, os.path.relpath(PIP_LOG)))
    sys.exit(1)


class _Lock(object):
    """An exclusive lock on a file inside .venv, so two first runs do not install at once."""

    def __init__(self, path):
        self.path = path
        self.handle = None

    def __enter__(self):
        self.handle = open(self.path, "a")
        try:
            import fcntl
        except ImportError:  # not POSIX: no lock
            return self
        fcntl.flock(self.handle.fileno(), fcntl.LOCK_EX)
        return self

    def __exit__(self, *exc):
        self.handle.close()  # closing releases the lock


def ensure_venv(extras=()):
    """Create or refresh .venv when pyproject.toml or the Python version changed, or `extras` are
    missing (keeping the extras it has); silent when up to date. With LABFORMAT_WHEELHOUSE set,
    pip installs from that folder alone."""
    if venv_is_current(extras=extras):
        return
    wheelhouse = os.environ.get(WHEELHOUSE_ENV)
    if wheelhouse:
        problem = wheelhouse_problem(wheelhouse)
        if problem:
            sys.stderr.write("error: {}\n".format(problem))
            sys.exit(1)
        for warning in wheelhouse_warnings(wheelhouse):
            sys.stderr.write("warning: {}\n".format(warning))
    os.makedirs(VENV, exist_ok=True)
    with _Lock(LOCK):
        if venv_is_current(extras=extras):  # another run finished the set-up while we waited
            return
        extras = sorted(set(extras) | (installed_extras() or set()))
        target = ".[{}]".format(",".join(extras)) if extras else "."
        source = "from the wheels in {}, offline".format(wheelhouse) if wheelhouse else "from pyproject.toml"
        print("setting up .venv {} (first run: 1-2 minutes; log: .venv/pip.log)...".format(source), flush=True)
        if os.path.exists(STAMP):
            os.remove(STAMP)
        create = not os.path.exists(venv_python())
        if not create and _venv_version() != platform.python_version():
            _empty_venv_dir()  # built by another Python version: start again (keeps only the lock)
            create = True
        with open(PIP_LOG, "w") as log:
            if create:
                command = [sys.executable, "-m", "venv", VENV]
                if _run_logged(command, log) != 0:
                    _fail_setup(
                        "`{}` failed; on Debian/Ubuntu the venv module comes with "
                        "`apt-get install python3-venv`".format(" ".join(command))
                    )
            command = [venv_python(), "-m", "pip", "install", "--disable-pip-version-check"]
            if wheelhouse:
                # --no-index reaches the isolated environment that builds labformat too: its setuptools
                # comes from the wheelhouse as well.
                command += ["--no-index", "--find-links", os.path.abspath(wheelhouse)]
            status = _run_logged(command + ["-e", target], log)
        if status != 0:
            missing = missing_requirements(_read(PIP_LOG)) if wheelhouse else []
            if missing:
                _fail_setup(
                    "the wheelhouse {} ({}) has no wheel for {} on this machine ({}); build it again with "
                    "`python3 scripts/lab.py wheelhouse {}` on a machine of this kind that reaches the package "
                    "index, or unset {} to install from the index".format(
                        wheelhouse, WHEELHOUSE_ENV, ", ".join(missing), machine_kind(), wheelhouse, WHEELHOUSE_ENV))
            _fail_setup("`.venv/bin/pip install -e '{}'` failed with exit code {}".format(target, status))
        with open(STAMP, "w") as handle:
            handle.write(expected_stamp(extras=extras))


# --- the wheelhouse: every package, as wheels, for installing with no network ------------------


def machine_kind():
    """What a wheel must fit: the Python minor version (cp311 tags), the OS and the CPU."""
    return "Python {}.{} on {} {}".format(sys.version_info[0], sys.version_info[1], platform.system(), platform.machine())


def wheelhouse_requirements(pyproject=PYPROJECT):
    """Every requirement a command can install: the runtime dependencies, every extra (so that `test`,
    `bench`, `pack` and `run --storage s3` work offline too), and what builds labformat itself in pip's
    isolated build environment (pyproject's build-system, and wheel, which older setuptools ask for)."""
    import tomllib  # standard since Python 3.11, which main() has checked

    with open(pyproject, "rb") as handle:
        data = tomllib.load(handle)
    project = data["project"]
    own = requirement_name(project["name"])
    groups = [project.get("dependencies", [])]
    groups += [extra for _, extra in sorted(project.get("optional-dependencies", {}).items())]
    groups.append(list(data.get("build-system", {}).get("requires", [])) + ["wheel"])
    requirements = []
    for group in groups:
        for requirement in group:
            if requirement not in requirements and requirement_name(requirement) != own:
                requirements.append(requirement)
    return requirements


def requirement_name(requirement):
    match = re.match(r"\s*([A-Za-z0-9][A-Za-z0-9._-]*)", requirement)
    return re.sub(r"[-_.]+", "-", match.group(1)).lower() if match else requirement


def missing_requirements(pip_output):
    """The requirements pip found no distribution for, in the order it said so (its own words, e.g.
    `pandas<3,>=2.2`), from a `pip install --no-index` log."""
    found = []
    for pattern in (r"No matching distribution found for (\S+)",
                    r"Could not find a version that satisfies the requirement (\S+)"):
        for requirement in re.findall(pattern, pip_output):
            requirement = requirement.rstrip(";,")  # an extra's: `psutil>=5.9; extra == "test"`
            if requirement not in found:
                found.append(requirement)
    return found


def _read(path):
    try:
        with open(path, errors="replace") as handle:
            return handle.read()
    except OSError:
        return ""


def _manifest(folder):
    """(pyproject sha256 or None, [machine kinds it holds wheels for]) from a wheelhouse's manifest."""
    digest, kinds = None, []
    for line in _read(os.path.join(folder, WHEELHOUSE_MANIFEST)).splitlines():
        if line.startswith("pyproject.toml sha256 "):
            digest = line.split()[-1]
        elif line.startswith("for "):
            kinds.append(line[len("for "):].split(" (built")[0])
    return digest, kinds


def _pyproject_digest(pyproject=PYPROJECT):
    with open(pyproject, "rb") as handle:
        return hashlib.sha256(handle.read()).hexdigest()


def wheelhouse_problem(folder):
    """Why `folder` cannot be a wheelhouse at all (missing, or no wheel in it), or None."""
    if not os.path.isdir(folder):
        return "{}={} is not a folder; build one with `python3 scripts/lab.py wheelhouse {}`".format(
            WHEELHOUSE_ENV, folder, folder)
    if not any(name.endswith(".whl") for name in os.listdir(folder)):
        return "{}={} holds no wheels; build it with `python3 scripts/lab.py wheelhouse {}`".format(
            WHEELHOUSE_ENV, folder, folder)
    return None


def wheelhouse_warnings(folder, pyproject=PYPROJECT):
    """What makes it likely that `folder` lacks a package this machine needs (pip then names it)."""
    digest, kinds = _manifest(folder)
    if digest is None:
        return ["{} has no {}: it was not made by `lab.py wheelhouse`; trying it anyway".format(folder, WHEELHOUSE_MANIFEST)]
    warnings = []
    if kinds and machine_kind() not in kinds:
        warnings.append("the wheelhouse {} was built for {}, and this is {}: compiled packages will be "
                        "missing".format(folder, " and ".join(kinds), machine_kind()))
    if digest != _pyproject_digest(pyproject):
        warnings.append("the wheelhouse {} was built from another pyproject.toml: a package added or "
                        "raised since may be missing".format(folder))
    return warnings


def _python_with_pip():
    """An interpreter of this Python version with pip: this one, else .venv's (set up first)."""
    if importlib.util.find_spec("pip") is not None:
        return sys.executable
    ensure_venv()
    return venv_python()


def cmd_wheelhouse(args):
    if len(args) != 1 or args[0].startswith("-"):
        sys.stderr.write("usage: python3 scripts/lab.py wheelhouse DIR\n")
        return 2
    import time

    folder = os.path.abspath(args[0])
    os.makedirs(folder, exist_ok=True)
    requirements = wheelhouse_requirements()
    listing = os.path.join(folder, "requirements.txt")
    with open(listing, "w") as handle:
        handle.write("# What `python3 scripts/lab.py wheelhouse` collected (with their dependencies), from pyproject.toml.\n")
        handle.write("".join(requirement + "\n" for requirement in requirements))
    log_path = os.path.join(folder, "pip.log")
    print("collecting {} requirements and their dependencies as wheels for {} in {} (log: {})...".format(
        len(requirements), machine_kind(), folder, log_path), flush=True)
    started = time.time()
    with open(log_path, "w") as log:
        # pip wheel, not pip download: a package published only as source (pyspark) is built once here,
        # so that no laptop needs a compiler or setuptools' build of it.
        status = _run_logged([_python_with_pip(), "-m", "pip", "wheel", "--disable-pip-version-check",
                              "--wheel-dir", folder, "-r", listing], log)
    if status != 0:
        sys.stderr.write("\n" + _tail(log_path))
        sys.stderr.write("error: `pip wheel` failed with exit code {} (full log: {})\n".format(status, log_path))
        return 1
    digest, kinds = _manifest(folder)
    kinds = kinds if digest == _pyproject_digest() else []  # wheels of an older pyproject.toml may lack packages
    kinds = [kind for kind in kinds if kind != machine_kind()] + [machine_kind()]
    with open(os.path.join(folder, WHEELHOUSE_MANIFEST), "w") as handle:
        handle.write("# A labformat wheelhouse (`python3 scripts/lab.py wheelhouse DIR`); install from it with "
                     "{}=DIR python3 scripts/lab.py check\n".format(WHEELHOUSE_ENV))
        handle.write("pyproject.toml sha256 {}\n".format(_pyproject_digest()))
        for kind in kinds:
            handle.write("for {} (built {})\n".format(kind, time.strftime("%Y-%m-%d")) if kind == machine_kind()
                         else "for {}\n".format(kind))
    wheels = [name for name in os.listdir(folder) if name.endswith(".whl")]
    size = sum(os.path.getsize(os.path.join(folder, name)) for name in wheels)
    print("ok: {} wheels, {:.0f} MB, for {}, in {:.0f} s. On a machine of that kind, with no network:\n"
          "  {}={} python3 scripts/lab.py check".format(
              len(wheels), size / 1e6, machine_kind(), time.time() - started, WHEELHOUSE_ENV, folder))
    return 0


def _run_logged(command, log):
    log.write("$ {}\n".format(" ".join(command)))
    log.flush()
    return subprocess.call(command, cwd=ROOT, stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL)


def _venv_version():
    try:
        out = subprocess.check_output([venv_python(), "-c", "import platform; print(platform.python_version())"])
        return out.decode().strip()
    except (OSError, subprocess.CalledProcessError):
        return None


def _empty_venv_dir():
    import shutil

    for entry in os.listdir(VENV):
        path = os.path.join(VENV, entry)
        if path == LOCK:
            continue
        if os.path.isdir(path) and not os.path.islink(path):
            shutil.rmtree(path)
        else:
            os.remove(path)


def check_java():
    """Return Java's major version, or print the reason it cannot start Spark and exit 2."""
    if ROOT not in sys.path:
        sys.path.insert(0, ROOT)
    from labformat.errors import JavaNotFoundError
    from labformat.spark import check_java as labformat_check_java

    try:
        return labformat_check_java()
    except JavaNotFoundError as exc:
        sys.stderr.write("error: {}\n".format(exc))
        sys.exit(2)


def prepare_jvm_archive():
    """Spark's class-data sharing archive, made once per Java and Spark (labformat/spark/cds.py): every
    later Spark JVM, a test's writer process or a notebook's, then starts on about half the CPU. `test`
    makes it first (73 s once); `run` makes it beside its first notebook (labformat.lab.main: the main
    job's nine sessions alone repay it, 00 ran in 40 s instead of 53, 05 in 88 instead of 104); `lab`
    uses it when it is there (a learner would wait for it at the start)."""
    from labformat.spark import cds

    cds.prepare()


def call(command, cwd=None):
    """Run command (in cwd, default: the current folder) and return its exit code.

    A Ctrl-C in the terminal reaches the child too; we wait for it to finish. A SIGINT
    sent to this process alone is passed on when the child has not stopped after a moment.
    """
    process = subprocess.Popen(command, cwd=cwd)
    while True:
        try:
            return process.wait()
        except KeyboardInterrupt:
            try:
                return process.wait(timeout=2)
            except subprocess.TimeoutExpired:
                process.send_signal(signal.SIGINT)
            except KeyboardInterrupt:
                process.send_signal(signal.SIGINT)


def replace_process(command, cwd=None):
    """Become command (POSIX exec: its exit code and signals are its own); elsewhere run it and return its code."""
    if os.name != "posix":
        return call(command, cwd)
    if cwd:
        os.chdir(cwd)
    sys.stdout.flush()
    sys.stderr.flush()
    os.execv(command[0], command)


def cmd_check(args):
    if args:
        sys.stderr.write("error: `check` takes no arguments\n")
        return 2
    major = check_java()
    where = "the current interpreter ({})".format(sys.executable) if os.environ.get(NO_VENV_ENV) else ".venv"
    print("ok: {} is up to date, Java {} found.".format(where, major))
    return 0


def cmd_run(args):
    check_java()
    return replace_process([sys.executable, "-m", "labformat.lab.main"] + args)


def suite_workers(cores=None):
    """pytest-xdist workers for the whole suite: one per core, at least 2, at most 4.

    Most of a test's time is Spark's and the writer processes' latency on tiny data, not CPU, so even
    a 2-core machine finishes the suite sooner on two workers; each worker holds a SparkSession
    (2 GiB of heap), hence the cap."""
    return min(4, max(2, cores or os.cpu_count() or 2))


def cmd_test(args):
    check_java()
    prepare_jvm_archive()
    # No arguments: the whole suite (pyproject's testpaths), which pytest only applies when run from the root,
    # split over workers a file at a time (a notebook's cells share one kernel; a module, its fixtures).
    whole = [] if args else ["-n", str(suite_workers()), "--dist", "loadfile"]
    code = call([sys.executable, "-m", "pytest", "-ra"] + whole + args, cwd=None if args else ROOT)
    if code == 5:
        sys.stderr.write("error: pytest collected no tests (exit code 5); treating that as a failure.\n")
        return 1
    return code


def cmd_lab(args):
    check_java()
    jupyter = os.path.join(os.path.dirname(sys.executable), "jupyter")
    command = [jupyter, "lab", "--notebook-dir", "notebooks", "--ip", "127.0.0.1", "--no-browser"]
    if hasattr(os, "geteuid") and os.geteuid() == 0:
        command.append("--allow-root")  # containers often run as root; Jupyter refuses to start there without it
    return replace_process(command + args, cwd=ROOT)


def cmd_bench(args):
    check_java()
    missing = [name for name in BENCH_MODULES if importlib.util.find_spec(name) is None]
    if missing:
        sys.stderr.write("error: the benchmark's peers are not installed ({}); install them with "
                         "`pip install -e '.[bench]'`\n".format(", ".join(missing)))
        return 2
    return replace_process([sys.executable, "-m", "labformat.bench"] + args)


def cmd_pack(args):
    return replace_process([sys.executable, "-m", "labformat.spark.pack"] + args)


COMMANDS = {"run": cmd_run, "test": cmd_test, "lab": cmd_lab, "bench": cmd_bench, "pack": cmd_pack,
            "check": cmd_check, "wheelhouse": cmd_wheelhouse}
# Commands that need nothing from .venv: they run with the interpreter that started this script.
NO_VENV_COMMANDS = ("wheelhouse",)


def main(argv):
    problem = python_version_problem()
    if problem:
        sys.stderr.write("error: " + problem + "\n")
        return 1
    if not argv or argv[0] in ("-h", "--help", "help"):
        sys.stdout.write(USAGE)
        return 0 if argv else 2
    name, args = argv[0], argv[1:]
    if name not in COMMANDS:
        sys.stderr.write("error: unknown command {!r}\n\n{}".format(name, USAGE))
        return 2
    if not os.environ.get(NO_VENV_ENV) and name not in NO_VENV_COMMANDS:
        ensure_venv(extras_for(name, args))
        if not running_in(VENV):
            python = venv_python()
            os.execv(python, [python, os.path.abspath(__file__)] + argv)
    return COMMANDS[name](args)


if __name__ == "__main__":
    try:
        sys.exit(main(sys.argv[1:]))
    except KeyboardInterrupt:
        sys.stderr.write("\ninterrupted\n")  # an unfinished set-up wrote no stamp: the next run redoes it
        sys.exit(130)
