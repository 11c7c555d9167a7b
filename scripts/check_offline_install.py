#!/usr/bin/env python3
"""The offline install, checked in full: build a wheelhouse, then set up a copy of this tree from it with no network.

    python3 scripts/check_offline_install.py [--wheelhouse DIR] [--reuse] [--keep]

1. `python3 scripts/lab.py wheelhouse DIR` (a temporary folder unless --wheelhouse; --reuse keeps a
   wheelhouse DIR already holds): every package the commands install, as wheels for this machine.
2. A copy of this tree's tracked files (as a fresh clone has them, with the edits not yet committed)
   in a temporary folder.
3. There, with the network cut (a network namespace of its own, `unshare --net`, where this user may
   make one; else an unreachable index and no pip configuration), and LABFORMAT_WHEELHOUSE=DIR:
   `python3 scripts/lab.py check` (what a table needs and the lab and formats extras, as `run` and
   `lab` install them); .venv's Python imports labformat, pyspark, deltalake, pyiceberg,
   JupyterLab and matplotlib and runs a Spark job on local[2];
   `python3 scripts/lab.py test -q tests/test_model.py` (adds the test extra, then runs tests).

Each step's time is printed; the exit code is 1 when a step failed, naming it. This is the check to
run on one laptop of each kind before the day, with the wheelhouse you will hand out. The suite's
tests/test_wheelhouse.py runs the same commands on a few small packages only (the whole set takes
minutes to install).

Standard library only.
"""

import argparse
import os
import shutil
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
LAB_PY = os.path.join(ROOT, "scripts", "lab.py")
# Port 9 (discard) on loopback: nothing listens, so any attempt to reach the index fails at once.
UNREACHABLE_INDEX = "http://127.0.0.1:9/simple"
SMOKE = """\
import os, deltalake, jupyterlab, matplotlib, nbclient, pyiceberg, pyspark, labformat as lf
spark = lf.spark_session(master="local[2]")
rows = spark.range(100000).selectExpr("id % 7 AS k").groupBy("k").count().count()
spark.stop()
print(f"labformat from {os.path.dirname(lf.__file__)}, pyspark {pyspark.__version__}, deltalake "
      f"{deltalake.__version__}, pyiceberg {pyiceberg.__version__}: a Spark job on local[2] gave {rows} groups")
"""

_netns = None
NETNS = ["unshare", "--net", "sh", "-c", 'ip link set lo up && exec "$@"', "offline"]


def offline_env(env):
    """`env` for pip with no index but the wheelhouse: the index unreachable, no pip configuration
    (a machine's config may add local indexes or find-links), none of pip's link variables."""
    env = {k: v for k, v in env.items() if k not in ("PIP_FIND_LINKS", "PIP_EXTRA_INDEX_URL", "PIP_NO_INDEX")}
    env.update(PIP_INDEX_URL=UNREACHABLE_INDEX, PIP_CONFIG_FILE=os.devnull)
    return env


def _netns_works():
    """Whether this user may run a command in a network namespace of its own (root on Linux, usually)."""
    global _netns
    if _netns is None:
        try:
            _netns = shutil.which("unshare") is not None and shutil.which("ip") is not None and subprocess.call(
                NETNS + ["true"], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, timeout=30) == 0
        except (OSError, subprocess.TimeoutExpired):
            _netns = False
    return _netns


def without_network(command):
    """`command` in a network namespace of its own (loopback only, for Spark), when one can be made here."""
    return NETNS + list(command) if _netns_works() else list(command)


def copy_tree(target):
    """This tree's tracked files (their current content) into `target`: what a clone holds."""
    try:
        listed = subprocess.check_output(["git", "ls-files", "-z"], cwd=ROOT).decode().split("\0")
    except (OSError, subprocess.CalledProcessError):
        listed = None
    if not listed:
        shutil.copytree(ROOT, target, ignore=shutil.ignore_patterns(".git", ".venv", ".cache", "out", "__pycache__"))
        return
    for name in filter(None, listed):
        source = os.path.join(ROOT, name)
        if os.path.isfile(source):
            os.makedirs(os.path.dirname(os.path.join(target, name)), exist_ok=True)
            shutil.copy2(source, os.path.join(target, name))


def step(title, command, cwd, env, results, offline=False, shown=None):
    """Run `command` (with the network cut when `offline`), print its time, record (title, seconds, exit code)."""
    print("\n== {}: {}{}".format(title, shown or " ".join(command), " (network cut)" if offline and _netns_works() else ""),
          flush=True)
    started = time.perf_counter()
    code = subprocess.call(without_network(command) if offline else command, cwd=cwd, env=env, stdin=subprocess.DEVNULL)
    seconds = time.perf_counter() - started
    results.append((title, seconds, code))
    print("== {}: {} in {:.0f} s".format(title, "ok" if code == 0 else "FAILED (exit {})".format(code), seconds), flush=True)
    return code == 0


def wheelhouse_mb(folder):
    return sum(os.path.getsize(os.path.join(folder, n)) for n in os.listdir(folder) if n.endswith(".whl")) / 1e6


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--wheelhouse", help="the wheelhouse folder (default: a temporary one, removed at the end)")
    parser.add_argument("--reuse", action="store_true", help="use the wheelhouse in --wheelhouse as it is, if it holds one")
    parser.add_argument("--keep", action="store_true", help="keep the temporary copy of the tree (and its .venv)")
    args = parser.parse_args(argv)

    scratch = tempfile.mkdtemp(prefix="labformat-offline-")
    wheelhouse = os.path.abspath(args.wheelhouse or os.path.join(scratch, "wheelhouse"))
    clone = os.path.join(scratch, "clone")
    env = {k: v for k, v in os.environ.items() if k not in ("LABFORMAT_NO_VENV", "VIRTUAL_ENV")}
    results = []
    try:
        built = os.path.exists(os.path.join(wheelhouse, "labformat-wheelhouse.txt"))
        if not (args.reuse and built):
            if not step("build the wheelhouse", [sys.executable, LAB_PY, "wheelhouse", wheelhouse], ROOT, env, results):
                return report(results, wheelhouse, clone)
        started = time.perf_counter()
        copy_tree(clone)
        results.append(("copy the tree's tracked files", time.perf_counter() - started, 0))
        offline = dict(offline_env(env), LABFORMAT_WHEELHOUSE=wheelhouse, SPARK_LOCAL_IP="127.0.0.1")
        python = os.path.join(clone, ".venv", "bin", "python")
        ok = (step("set up .venv offline", [sys.executable, "scripts/lab.py", "check"], clone, offline, results, True)
              and step("import and run Spark", [python, "-c", SMOKE], clone, offline, results, True,
                       shown=".venv/bin/python -c <import labformat, pyspark, deltalake, pyiceberg, jupyterlab; a Spark job>")
              and step("add the test extra offline, run tests/test_model.py",
                       [sys.executable, "scripts/lab.py", "test", "-q", "-p", "no:cacheprovider", "tests/test_model.py"],
                       clone, offline, results, True))
        return report(results, wheelhouse, clone, ok)
    finally:
        if args.keep:
            print("kept: {}".format(scratch))
        else:
            shutil.rmtree(scratch, ignore_errors=True)  # a --wheelhouse given lives outside it


def report(results, wheelhouse, clone, ok=False):
    print("\nstep | seconds | result")
    for title, seconds, code in results:
        print("{} | {:.0f} | {}".format(title, seconds, "ok" if code == 0 else "FAILED (exit {})".format(code)))
    if os.path.isdir(wheelhouse):
        print("wheelhouse {}: {:.0f} MB of wheels".format(wheelhouse, wheelhouse_mb(wheelhouse)))
    print("network cut by a network namespace: {}".format("yes" if _netns else "no (an unreachable index only)"))
    print("load average at the end: {}".format(" ".join(str(round(x, 1)) for x in os.getloadavg()))
          if hasattr(os, "getloadavg") else "")
    print("offline install: {}".format("ok" if ok else "FAILED"))
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
