"""Repository-wide pytest set-up: the workshop notebooks run under nbval, strictly, at the `tiny` preset."""

from __future__ import annotations

import ast
import os
import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent

# Read by labformat.lab.workshop inside every notebook kernel nbval starts (kernels inherit the
# environment). Set at import, before any kernel exists; an explicit value from the caller wins.
os.environ.setdefault("LABFORMAT_PRESET", "tiny")
os.environ.setdefault("LABFORMAT_SPARK_MASTER", "local[2]")
# Every Spark JVM of the tests (sessions, notebook kernels' sessions, writer processes, a standalone
# cluster's daemons, the Connect server) JIT-compiles at the first tier only, and collects garbage on
# one thread: on `tiny` data the second tier's compilation is CPU spent on code that runs a few times
# (02 under nbval: 168 CPU-s with Java's defaults, 124-126 with these). The property marks the JVMs
# that took them (tests/test_cds.py).
os.environ.setdefault("LABFORMAT_JAVA_OPTIONS", "-XX:TieredStopAtLevel=1 -XX:+UseSerialGC -Dlabformat.tests=1")
# Under pytest-xdist each worker's notebooks write their scratch tables and summaries to a folder of
# its own, so that two notebooks running at once never share a table's path.
if os.environ.get("PYTEST_XDIST_WORKER"):
    os.environ.setdefault("LABFORMAT_OUT", str(ROOT / "out" / f"tests-{os.environ['PYTEST_XDIST_WORKER']}"))


def pytest_configure(config):
    option = config.option
    if hasattr(option, "nbval"):
        # Strict nbval (outputs compared) on every .ipynb collected; never --nbval-lax.
        if not option.nbval_lax:
            option.nbval = True
        # The kernel is this interpreter (.venv's), whatever kernelspecs the machine has.
        option.nbval_current_env = True
        if option.nbval_sanitize_with is None:
            option.nbval_sanitize_with = str(ROOT / "tests" / "nbval_sanitize.cfg")


# Each check cell of a solution, right after nbval ran it, is evaluated again in the same kernel
# with its answers blank: what the learner's notebook (the solution with None in each answer cell)
# shows there. Every check must say "not answered yet" with a hint; this stands in for running
# each learner's notebook a second time (tests/test_notebooks.py runs one in full).
_NOT_ANSWERED = re.compile(r"Exercise [\d.]+[^:\n]*: not answered yet\..*?Hint: \S", re.S)


@pytest.hookimpl(wrapper=True)
def pytest_runtest_call(item):
    result = yield
    source = getattr(getattr(item, "cell", None), "source", None)
    if source is None or Path(item.fspath).parent != ROOT / "notebooks" / "solutions":
        return result
    from labformat.lab import runner

    blank = runner.blank_check(source)
    if blank is None:
        return result
    expression, checks = blank
    kernel = item.parent.kernel
    msg_id = kernel.kc.execute("", silent=True, store_history=False, user_expressions={"blank": expression})
    while True:
        reply = kernel.kc.get_shell_msg(timeout=600)
        if reply["parent_header"].get("msg_id") == msg_id:
            break
    shown = reply["content"]["user_expressions"]["blank"]
    assert shown["status"] == "ok", f"with blank answers the check raised: {shown.get('ename')}: {shown.get('evalue')}"
    text = ast.literal_eval(shown["data"]["text/plain"])
    assert checks and len(_NOT_ANSWERED.findall(text)) == checks and not re.search(r": (right!|wrong,)", text), \
        f"with blank answers the check shows: {text}"
    return result
