"""The saved workshop notebooks: learners' and solutions' agree, outputs are clean, every chart is there,
and a learner's notebook shows nothing before it runs and answers nothing for the learner.

nbval itself runs the solutions (pytest collects notebooks/solutions/ with --nbval, see conftest.py
at the root) and checks their saved outputs, every exercise answered right among them; these tests
check what nbval cannot: how the saved files were made, and each learner's notebook run with its
answers blank.
"""

from __future__ import annotations

import importlib
import re

import nbformat
import pytest

from labformat.lab import claims, lessons, runner

LEARNER = runner.notebooks(runner.NOTEBOOKS_DIR)
SOLUTIONS = runner.notebooks(runner.SOLUTIONS_DIR)
ALL = LEARNER + SOLUTIONS
ANSWER_TAG = "exercise-answer"

# The issue's six charts, by the `chart` metadata of the cells that draw them.
REQUIRED_CHARTS = {
    "file key ranges": "key-ranges-by-sort-mode",
    "pruning funnel per day": "pruning-funnel-clean",
    "task timeline": "task-timeline-deduplicate",
    "file-size trade-off": "file-size-tradeoff",
    "query skipping": "query-skipping",
    "per-step time": "step-times-clean",
    # The lessons issue's: the month's layout, bloom at the key level and per filter size, a projection.
    "key ranges after a month of upserts": "key-ranges-after-month",
    "key-level bloom funnel": "key-funnel-clean",
    "bloom filter sizes": "bloom-filter-sizes",
    "bulk insert timeline and its 16-core projection": "task-timeline-bulk-insert",
    # The concurrency issue's: two writers on one file group, one commit and one conflict.
    "two writers' race": "race-conflict",
    # Issue 18's: write cost against read cost per day, copy-on-write beside merge-on-read, compactions marked.
    "copy-on-write vs merge-on-read": "cow-vs-mor",
    "compaction frequency": "compaction-sweep",
    # Issue 34's: files read per query on linear, Z-order and Hilbert clustering layouts.
    "clustering layouts": "clustering-layouts",
    "three formats' metadata per commit": "metadata-files-per-commit",
    "files a planner reads per commit (Delta's checkpoints as a sawtooth)": "planner-files-per-commit",
    "a table's first upserts (step 5's estimate and its source)": "first-upserts",
}


def read(path):
    return nbformat.read(path, as_version=4)


def test_the_workshop_is_nine_staged_notebooks_with_solutions_beside_them():
    names = [p.name for p in LEARNER]
    assert names == ["00-setup-and-dataset.ipynb", "01-bulk-insert.ipynb", "02-daily-upserts.ipynb",
                     "03-query-skipping.ipynb", "04-merge-on-read.ipynb", "05-concurrent-writers.ipynb",
                     "06-choosing-an-index.ipynb", "07-incremental-pipelines.ipynb", "08-three-formats.ipynb"]
    assert [p.name for p in SOLUTIONS] == names


@pytest.mark.parametrize("learner", LEARNER, ids=lambda p: p.stem)
def test_solutions_differ_only_in_answer_cells(learner):
    mine, theirs = read(learner), read(runner.SOLUTIONS_DIR / learner.name)
    assert len(mine.cells) == len(theirs.cells)
    answers = 0
    for number, (a, b) in enumerate(zip(mine.cells, theirs.cells), 1):
        tags = a.metadata.get("tags", [])
        assert tags == b.metadata.get("tags", []), f"cell {number}: tags differ"
        if ANSWER_TAG in tags:
            answers += 1
            # Learners get blanks: every assignment in their answer cell is None.
            for line in a.source.splitlines():
                if "=" in line and not line.lstrip().startswith("#"):
                    assert line.split("#")[0].split("=", 1)[1].strip() == "None", f"cell {number}: {line!r}"
            assert "None" not in b.source.split("#")[0], f"cell {number}: the solution leaves a blank"
        elif b.cell_type == "code":
            # An answer outside a tagged cell would reach the learner as it stands.
            assert not re.search(r"^ANSWER_\w*\s*=(?!=)", b.source, re.M), f"cell {number}: untagged answer cell"
        elif number == 1:  # the title cell: the solutions say what they are
            assert b.source.startswith(a.source.split("\n", 1)[0])
        else:
            assert a.source == b.source, f"cell {number} differs outside an answer cell"
    assert answers >= 2, "each notebook has at least two exercises"


@pytest.mark.parametrize("learner", LEARNER, ids=lambda p: p.stem)
def test_the_learners_notebook_is_generated_from_its_solution(learner):
    made = runner.learner_version(read(runner.SOLUTIONS_DIR / learner.name))
    assert [c.source for c in read(learner).cells] == [c.source for c in made.cells], \
        "edit the solution, then run scripts/refresh_notebooks.py"


def test_learner_version_blanks_every_answer_and_keeps_no_trace_of_it():
    nb = nbformat.v4.new_notebook()
    nb.cells = [nbformat.v4.new_markdown_cell(f"# 09 · Demo\n\n{runner.SOLUTIONS_NOTE}\n\n**Learning goals**"),
                nbformat.v4.new_code_cell("hour = spec.start\nANSWER_9_1 = len(hour) * 60  # sixty\nANSWER_9_2 = 'x'"),
                nbformat.v4.new_code_cell("ex.count('9.1', ANSWER_9_1, 60, '', '')")]
    nb.cells[1].metadata["tags"] = [ANSWER_TAG]
    made = runner.learner_version(nb)
    assert made.cells[0].source == "# 09 · Demo\n\n**Learning goals**"
    assert made.cells[1].source == "ANSWER_9_1 = None  # your prediction\nANSWER_9_2 = None  # your prediction"
    assert made.cells[2].source == nb.cells[2].source and nb.cells[1].source.startswith("hour")
    nb.cells[1].source = "print(42)"
    with pytest.raises(ValueError, match="assigns no ANSWER_"):
        runner.learner_version(nb)


@pytest.mark.parametrize("learner", LEARNER, ids=lambda p: p.stem)
def test_a_learners_notebook_is_saved_without_outputs(learner):
    nb = read(learner)
    ran = [n for n, c in enumerate(nb.cells, 1) if c.cell_type == "code" and (c.outputs or c.execution_count)]
    assert ran == [], f"cells with saved outputs: {ran}; run scripts/refresh_notebooks.py"
    assert "widgets" not in nb.metadata and "labformat" not in nb.metadata  # no trace of a run


def check_cells(nb) -> list:
    return [c for c in nb.cells if c.cell_type == "code" and "ex." in c.source and "ANSWER_" in c.source]


def shown(cell) -> str:
    return "".join(o.get("text", "") + o.get("data", {}).get("text/plain", "") for o in cell.outputs)


@pytest.mark.parametrize("path", SOLUTIONS, ids=lambda p: p.stem)
def test_every_check_in_a_saved_solution_says_right(path):
    checks = check_cells(read(path))
    verdicts = [shown(c) for c in checks]
    assert checks and all(re.search(r"Exercise [\d.]+[^:\n]*: right!", v) and not re.search(
        r": (wrong, you said|not answered yet)", v) for v in verdicts), verdicts


@pytest.mark.slow
@pytest.mark.parametrize("learner", LEARNER[:1], ids=lambda p: p.stem)
def test_a_learners_notebook_runs_with_blank_answers_and_every_check_says_not_answered(learner, tmp_path):
    """What a learner who runs every cell without answering sees: no exception, and each check cell
    saying the exercise is not answered yet, with its hint. (With the solution's answers filled in,
    every check says right: the saved solutions, which nbval re-runs.)

    One notebook runs in full; for all nine, the repository's conftest evaluates each check cell of
    the solution again, in nbval's kernel, with its answers blank (`runner.blank_check`), which
    shows the same as the learner's run because nothing else reads an answer (next test)."""
    nb = runner.execute(learner, "tiny", master="local[2]", out=tmp_path)
    checks = check_cells(nb)
    assert len(checks) >= 2
    for cell in checks:
        text = shown(cell)
        assert re.search(r"Exercise [\d.]+[^:\n]*: not answered yet\..*Hint: \S", text), (cell.source, text)
    assert runner.problems(runner.strip_run_metadata(nb)) == []


@pytest.mark.parametrize("path", SOLUTIONS, ids=lambda p: p.stem)
def test_answers_are_read_only_by_the_last_statement_of_a_check_cell(path):
    nb = read(path)
    assert runner.answers_read_elsewhere(nb) == []
    blanks = [runner.blank_check(c.source) for c in check_cells(nb)]
    assert all(blanks) and sum(checks for _, checks in blanks) >= 2


def test_blank_check_binds_every_answer_to_none_in_the_last_statement_only():
    expression, checks = runner.blank_check("x = 2\n(ex.count('1', ANSWER_1, x, '', ''), ex.share('2', ANSWER_2, 1, x, '', ''))")
    assert expression.startswith("(lambda ANSWER_1=None, ANSWER_2=None: repr((ex.count(") and checks == 2
    assert runner.blank_check("ANSWER_1 = 3") is None and runner.blank_check("print(ANSWER_1)\nx = 1") is None
    nb = nbformat.v4.new_notebook()
    nb.cells = [nbformat.v4.new_code_cell("ANSWER_1 = 3"),
                nbformat.v4.new_code_cell("y = ANSWER_1 + 1\nex.count('1', ANSWER_1, 4, '', '')"),
                nbformat.v4.new_code_cell("ex.count('1', ANSWER_1, 4, '', '')")]
    nb.cells[0].metadata["tags"] = [ANSWER_TAG]
    assert runner.answers_read_elsewhere(nb) == ["cell 2: ANSWER_1"]


@pytest.mark.parametrize("path", SOLUTIONS, ids=lambda p: p.stem)
def test_saved_outputs_are_clean_and_from_the_tiny_preset(path):
    nb = read(path)
    assert runner.problems(nb) == []
    assert nb.metadata.get("labformat", {}).get("preset") == "tiny"
    # Every code cell ran: nothing saved half-executed.
    assert all(c.execution_count for c in nb.cells if c.cell_type == "code")
    # The first output says the preset, so a stale run at another preset would show in nbval too.
    first = next(c for c in nb.cells if c.cell_type == "code")
    assert "preset tiny:" in first.outputs[0]["text"]


@pytest.mark.parametrize("path", ALL, ids=lambda p: f"{p.parent.name}/{p.stem}")
def test_each_notebook_has_goals_exercises_and_a_check_per_exercise(path):
    nb = read(path)
    text = "\n".join(c.source for c in nb.cells if c.cell_type == "markdown")
    assert "Learning goals" in text
    exercises = [line for line in text.splitlines() if line.startswith("## Exercise ")]
    checks = [c for c in nb.cells if c.cell_type == "code" and "ex." in c.source and "ANSWER_" in c.source]
    assert len(exercises) >= 2 and len(checks) >= len(exercises)


@pytest.mark.parametrize("path", SOLUTIONS, ids=lambda p: p.stem)
def test_every_exact_lesson_claim_held_in_the_saved_tiny_run(path):
    """Each lab states its lessons as claims on its own run; the saved (tiny) run shows every exact one
    held, and nbval re-runs the notebook and compares, so a claim that breaks fails the suite."""
    nb = read(path)
    cells = [c for c in nb.cells if c.cell_type == "code" and "lessons.only(exact=True)" in c.source]
    assert len(cells) == 1, "one cell shows the exact claims"
    assert "nbval-ignore-output" not in cells[0].metadata.get("tags", [])
    shown = "".join(o.get("data", {}).get("text/plain", "") for o in cells[0].outputs)
    # Claims are made by rules (`lessons.check`), each of which declares whether it is exact.
    checked = re.findall(r"\.check\(\s*(?:\w+\.)*(\w+)\s*,", cells[0].source)
    module = importlib.import_module(f"labformat.lab.lessons.{lessons.module_for(path.stem)}")
    exact = sum(claims.RULES[f"{module.__name__}.{name}"].exact for name in checked)
    header = re.search(r"(\d+) claims on exact quantities", shown)
    assert exact >= 3 and shown.count("[held]") == exact and "BROKEN" not in shown, shown
    assert header and int(header.group(1)) == exact, shown


def test_every_chart_of_the_issue_is_drawn_by_a_saved_notebook():
    drawn = {}
    for path in SOLUTIONS:
        nb = read(path)
        for name, png in runner.charts(nb):
            drawn[name] = png
    for chart, name in REQUIRED_CHARTS.items():
        assert name in drawn, f"no notebook draws the {chart} chart ({name})"
        assert drawn[name].startswith(b"\x89PNG"), name


def test_problems_finds_log_lines_machine_paths_errors_and_out_of_order_cells():
    nb = nbformat.v4.new_notebook()
    nb.cells = [nbformat.v4.new_code_cell("a"), nbformat.v4.new_code_cell("b")]
    nb.cells[0].execution_count, nb.cells[1].execution_count = 2, 1
    nb.cells[0].outputs = [nbformat.v4.new_output("stream", name="stderr",
                                                  text="25/11/21 08:00:00 WARN NativeCodeLoader: no hadoop\n")]
    nb.cells[1].outputs = [nbformat.v4.new_output("execute_result", data={"text/plain": f"{runner.NOTEBOOKS_DIR}/x"}),
                           nbformat.v4.new_output("error", ename="ValueError", evalue="bad", traceback=[])]
    found = "\n".join(runner.problems(nb))
    assert "log line" in found and "machine path" in found and "ValueError" in found
    assert "not executed once, top to bottom" in found


@pytest.mark.slow
def test_run_workshop_writes_executed_notebooks_charts_and_the_summary(tmp_path):
    """The main job's runner on a two-cell notebook (no Spark): what lands in out/."""
    folder = tmp_path / "nbs"
    folder.mkdir()
    nb = nbformat.v4.new_notebook()
    nb.cells = [
        nbformat.v4.new_code_cell("import matplotlib.pyplot as plt\nplt.plot([1, 2], [3, 4]);"),
        nbformat.v4.new_code_cell("from labformat.lab import workshop as ws\n"
                                  "ws.record_summary('00-demo', {'rows': 5760, 'preset seen': ws.preset()})\n"
                                  "table = ws.scratch('demo-table')\ntable.mkdir()\n"
                                  "(table / 'f.parquet').write_bytes(b'x' * 10)"),
    ]
    nb.cells[0].metadata["chart"] = "demo-line"
    nbformat.write(nb, folder / "00-demo.ipynb")
    nbformat.write(nb, folder / "notes.ipynb")  # not NN-title: not part of the workshop

    out = tmp_path / "out"
    done = runner.run_workshop(out, "tiny", folder)
    assert [e.name for e in done] == ["00-demo"]
    executed = read(out / "notebooks" / "00-demo.ipynb")
    assert executed.metadata["labformat"]["preset"] == "tiny" and runner.problems(executed) == []
    assert (out / "charts" / "00-demo-line.png").read_bytes().startswith(b"\x89PNG")
    summary = (out / "summary.md").read_text()
    assert "| rows | 5,760 |" in summary and "| preset seen | tiny |" in summary
    assert "`charts/00-demo-line.png`" in summary
    assert not (out / "work" / "tiny").exists()  # the notebook's scratch tables, removed once it ran


@pytest.mark.slow
def test_jupyterlab_has_the_widget_extension_matching_ipywidgets():
    """`scripts/lab.py lab` opens this JupyterLab: without the front-end extension widgets show as text."""
    import re
    import subprocess
    import sys
    from importlib.metadata import version
    from pathlib import Path

    jupyter = Path(sys.executable).with_name("jupyter")
    listing = subprocess.run([str(jupyter), "labextension", "list"], capture_output=True, text=True, timeout=120,
                             env={**__import__("os").environ, "NO_COLOR": "1"})
    text = re.sub(r"\x1b\[[0-9;]*m", "", listing.stdout + listing.stderr)
    line = next((each for each in text.splitlines() if "@jupyter-widgets/jupyterlab-manager" in each), "")
    assert "enabled" in line and "OK" in line, text
    # ipywidgets 8 talks to the jupyterlab_widgets 3 front end (its manager v5).
    assert version("ipywidgets").startswith("8.") and version("jupyterlab_widgets").startswith("3.")


def test_the_main_job_waits_for_the_jvm_archive_before_any_notebook_but_00(monkeypatch, tmp_path):
    """00 counts but times nothing: it alone runs beside the class-data sharing dump."""
    from labformat.spark import cds

    folder = tmp_path / "nbs"
    folder.mkdir()
    for name in ("00-setup", "01-bulk", "02-upserts"):
        nbformat.write(nbformat.v4.new_notebook(), folder / f"{name}.ipynb")
    events = []

    def execute(source, preset, out=None):
        if source.stem == "01-bulk" and "fail" in events:
            raise RuntimeError("a cell failed")
        events.append(source.stem)
        return nbformat.v4.new_notebook()

    monkeypatch.setattr(runner, "execute", execute)
    monkeypatch.setattr(cds, "prepare_in_background", lambda: events.append("dump started") or "a dump")
    monkeypatch.setattr(cds, "prepare", lambda: events.append("dump in the foreground"))
    monkeypatch.setattr(cds, "wait_for", lambda process: events.append("waited") if process else None)
    monkeypatch.setattr(cds, "stop", lambda process: events.append("stopped") if process else None)
    runner.run_workshop(tmp_path / "out", "tiny", folder, prepare_archive=True)
    assert events == ["dump started", "00-setup", "waited", "01-bulk", "02-upserts"]
    events.clear()
    runner.run_workshop(tmp_path / "out", "tiny", folder, only=("02",), prepare_archive=True)
    assert events == ["dump in the foreground", "02-upserts"]  # a timed notebook first: nothing beside it
    events.clear()
    runner.run_workshop(tmp_path / "out", "tiny", folder, only=("00",), prepare_archive=True)
    assert events == ["dump started", "00-setup", "waited"]  # 00 alone: the job still ends with the archive made
    events[:] = ["fail"]
    with pytest.raises(RuntimeError):
        runner.run_workshop(tmp_path / "out", "tiny", folder, only=("00", "01"), prepare_archive=True)
    assert events == ["fail", "dump started", "00-setup", "waited", "stopped"]  # nothing left running
    events.clear()
    runner.run_workshop(tmp_path / "out", "tiny", folder)
    assert events == ["00-setup", "01-bulk", "02-upserts"]  # the tests' runs: no archive business
