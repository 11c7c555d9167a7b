"""Re-execute the solutions at `tiny` in place, so their outputs are what nbval compares, and make the
learners' notebooks from them, with no outputs at all: a learner sees nothing before running a cell.

Run after changing a notebook or anything its outputs depend on:

    .venv/bin/python scripts/refresh_notebooks.py            # every notebook and solution
    .venv/bin/python scripts/refresh_notebooks.py 02         # those whose name starts with 02

Edit the solution (`notebooks/solutions/NN-*.ipynb`) only: the learner's notebook beside it is
rewritten from it, answer cells blanked and outputs cleared (`runner.learner_version`); the tests
run it with its answers blank (`tests/test_notebooks.py`).

Notebooks run on `local[2]`, the master the tests use, so task counts match the test run.
A notebook whose outputs hold a machine path, a Spark log line or an error is not saved.
"""

from __future__ import annotations

import sys
import time
from pathlib import Path

import nbformat
from nbclient.exceptions import CellExecutionError

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from labformat.lab import runner  # noqa: E402

TEST_PRESET = "tiny"
TEST_MASTER = "local[2]"


def main(argv: list[str]) -> int:
    prefixes = tuple(argv) or ("",)
    failed = 0
    for solution in runner.notebooks(runner.SOLUTIONS_DIR):
        if solution.name.startswith(prefixes):
            learner = runner.learner_version(nbformat.read(solution, as_version=4))
            nbformat.write(learner, runner.NOTEBOOKS_DIR / solution.name)
    for folder in (runner.SOLUTIONS_DIR,):
        for path in runner.notebooks(folder):
            if not path.name.startswith(prefixes):
                continue
            started = time.perf_counter()
            shown = path.relative_to(runner.NOTEBOOKS_DIR.parent)
            try:
                nb = runner.execute(path, TEST_PRESET, master=TEST_MASTER)
            except CellExecutionError as exc:
                failed += 1
                print(f"NOT saved {shown}: a cell failed\n{exc}")
                continue
            slowest = sorted(runner.cell_seconds(nb), key=lambda c: -c[1])[:3]
            nb = runner.strip_run_metadata(nb)
            found = runner.problems(nb)
            if found:
                failed += 1
                print(f"NOT saved {shown}:\n  " + "\n  ".join(found))
                continue
            nbformat.write(nb, path)
            print(f"saved {shown} ({time.perf_counter() - started:.0f} s; slowest cells: "
                  + ", ".join(f"{n}: {s:.1f} s" for n, s in slowest) + ")", flush=True)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
