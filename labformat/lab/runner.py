"""Runs the workshop notebooks headless (nbclient): executed copies, their charts as PNG, and a one-page summary.

Used by the lab's main job (`python3 scripts/lab.py run`) and by `scripts/refresh_notebooks.py`,
which re-executes the saved notebooks at `tiny` so their outputs are what nbval compares.
"""

from __future__ import annotations

import ast
import base64
import contextlib
import json
import os
import re
import time
from dataclasses import dataclass
from pathlib import Path

import nbformat

from labformat.lab import claims, workshop
from labformat.spark.session import MASTER_ENV

NOTEBOOKS_DIR = workshop.REPO_ROOT / "notebooks"
SOLUTIONS_DIR = NOTEBOOKS_DIR / "solutions"
_NOTEBOOK_NAME = re.compile(r"^\d\d-[a-z0-9-]+\.ipynb$")
# What must never be saved in a notebook: Spark/log4j lines and this machine's paths.
_LOG_LINE = re.compile(r"^(\d\d/\d\d/\d\d \d\d:\d\d:\d\d )?(WARN|INFO|ERROR|DEBUG) [A-Za-z.$]+:", re.M)


@dataclass(frozen=True)
class Executed:
    """One executed notebook: where it was written, its charts, and how long it ran."""

    name: str
    path: Path
    charts: tuple[Path, ...]
    seconds: float
    slowest: tuple[tuple[int, float], ...] = ()  # (cell number, seconds) of its slowest cells


def notebooks(folder: Path = NOTEBOOKS_DIR) -> list[Path]:
    """The staged notebooks of `folder` (NN-title.ipynb), in order."""
    return sorted(p for p in Path(folder).iterdir() if _NOTEBOOK_NAME.match(p.name))


@contextlib.contextmanager
def _environment(**values: str | None):
    """Set environment variables for the kernels started inside (kernels inherit the environment)."""
    def apply(settings):
        for key, value in settings.items():
            if value is None:
                os.environ.pop(key, None)
            else:
                os.environ[key] = value

    saved = {k: os.environ.get(k) for k in values}
    apply(values)
    try:
        yield
    finally:
        apply(saved)


def execute(source: Path, preset: str, master: str | None = None, out: Path | None = None,
            timeout: int = 1800) -> nbformat.NotebookNode:
    """Run every cell of `source` in a fresh kernel at `preset`; the executed notebook (source untouched).

    Raises nbclient's CellExecutionError naming the failing cell when a cell raises.
    """
    from nbclient import NotebookClient

    nb = nbformat.read(source, as_version=4)
    # The kernel's own log at ERROR: ipykernel warns on every start that its local TCP sockets are not
    # encrypted (they listen on 127.0.0.1 only), a line per notebook in the main job's output.
    client = NotebookClient(nb, timeout=timeout, kernel_name="python3",
                            resources={"metadata": {"path": str(Path(source).parent)}},
                            extra_arguments=["--IPKernelApp.log_level=ERROR"])
    # A master given here wins; else the kernels inherit $LABFORMAT_SPARK_MASTER, if any.
    with _environment(**{workshop.PRESET_ENV: preset, workshop.OUT_ENV: str(out) if out else None},
                      **({MASTER_ENV: master} if master else {})):
        client.execute()
    nb.metadata["labformat"] = {"preset": preset}
    return nb


ANSWER_TAG = "exercise-answer"
SOLUTIONS_NOTE = "*Solutions: every exercise answered, the way a learner could have predicted it.*"
_ASSIGNMENT = re.compile(r"^(?P<target>ANSWER_[A-Za-z0-9_]*)\s*=(?!=)")


def learner_version(solution: nbformat.NotebookNode) -> nbformat.NotebookNode:
    """The learner's notebook made from its solution: answer cells blanked, the solutions note dropped,
    no outputs (nothing on screen before the learner runs a cell: a saved output would answer the
    exercise asked above it).

    In a cell tagged `exercise-answer` every `ANSWER_...` assignment becomes `ANSWER_... = None`
    with a prompt; the lines the solution needed to compute its answer are dropped, so nothing of
    the answer is left on screen. Everything else is the solution's cell, unchanged.
    """
    nb = nbformat.from_dict(json.loads(json.dumps(solution)))
    for cell in nb.cells:
        if cell.cell_type == "markdown" and SOLUTIONS_NOTE in cell.source:
            cell.source = cell.source.replace(SOLUTIONS_NOTE + "\n\n", "").replace(SOLUTIONS_NOTE, "")
        if cell.cell_type == "code" and ANSWER_TAG in cell.metadata.get("tags", []):
            names = [m.group("target") for m in map(_ASSIGNMENT.match, cell.source.splitlines()) if m]
            if not names:
                raise ValueError(f"an {ANSWER_TAG} cell assigns no ANSWER_... variable: {cell.source!r}")
            cell.source = "\n".join(f"{name} = None  # your prediction" for name in names)
        if cell.cell_type == "code":
            cell.outputs, cell.execution_count = [], None
            cell.metadata.pop("execution", None)
    nb.metadata.pop("labformat", None)  # the preset of a run: a learner's notebook records none
    nb.metadata.pop("widgets", None)  # the saved state of the solution's widgets
    return nb


def blank_check(source: str) -> tuple[str, int] | None:
    """The expression a learner's check cell shows, with every answer blank: its last statement with
    each `ANSWER_...` name bound to None, returning the verdicts' text; and how many `ex.` checks it
    makes. None for a cell that checks no answer.

    A check cell reads its answers only there (`answers_read_elsewhere` proves it for every
    notebook), and an answer cell differs from the solution's only in assigning None; so this,
    evaluated in the solution's kernel right after the cell ran, shows what the learner's run
    would show, without running the learner's notebook a second time.
    """
    tree = ast.parse(source)
    if not tree.body or not isinstance(tree.body[-1], ast.Expr):
        return None
    last = tree.body[-1].value
    names = sorted({n.id for n in ast.walk(last) if isinstance(n, ast.Name) and n.id.startswith("ANSWER_")})
    if not names:
        return None
    blanks = ", ".join(f"{name}=None" for name in names)
    checks = sum(isinstance(n, ast.Call) and isinstance(n.func, ast.Attribute) and isinstance(n.func.value, ast.Name)
                 and n.func.value.id == "ex" for n in ast.walk(last))
    return f"(lambda {blanks}: repr({ast.unparse(last)}))()", checks


def answers_read_elsewhere(nb: nbformat.NotebookNode) -> list[str]:
    """Where a notebook reads an `ANSWER_...` name outside an answer cell and a check cell's last
    statement: a learner's blank answer could change what those cells do."""
    found = []
    for number, cell in enumerate(nb.cells, 1):
        if cell.cell_type != "code" or ANSWER_TAG in cell.metadata.get("tags", []):
            continue
        body = ast.parse(cell.source).body
        checked = body[-1] if blank_check(cell.source) else None
        for statement in body:
            if statement is checked:
                continue
            for node in ast.walk(statement):
                if isinstance(node, ast.Name) and node.id.startswith("ANSWER_"):
                    found.append(f"cell {number}: {node.id}")
    return found


def cell_seconds(nb: nbformat.NotebookNode) -> list[tuple[int, float]]:
    """(cell number, seconds) of every executed code cell, from nbclient's execution timestamps."""
    from datetime import datetime

    result = []
    for number, cell in enumerate(nb.cells, 1):
        stamps = cell.metadata.get("execution", {})
        began, ended = stamps.get("iopub.execute_input"), stamps.get("shell.execute_reply")
        if began and ended:
            seconds = (datetime.fromisoformat(ended.replace("Z", "+00:00"))
                       - datetime.fromisoformat(began.replace("Z", "+00:00"))).total_seconds()
            result.append((number, seconds))
    return result


def strip_run_metadata(nb: nbformat.NotebookNode) -> nbformat.NotebookNode:
    """Drop per-run cell metadata (execution timestamps) so a re-run changes only real outputs."""
    for cell in nb.cells:
        cell.metadata.pop("execution", None)
    return nb


def problems(nb: nbformat.NotebookNode) -> list[str]:
    """What a saved notebook must not hold: Spark log lines, machine paths, errors, cells out of order."""
    found = []
    paths = tuple(p for p in (str(workshop.REPO_ROOT), str(Path.home()), "/tmp/") if p)
    counts = []
    for number, cell in enumerate(nb.cells, 1):
        if cell.cell_type != "code":
            continue
        counts.append(cell.get("execution_count"))
        for output in cell.get("outputs", []):
            if output.get("output_type") == "error":
                found.append(f"cell {number}: an error output ({output.get('ename')})")
            texts = [output.get("text", "")] + [v for k, v in output.get("data", {}).items()
                                                if k.startswith("text/") and isinstance(v, str)]
            for text in texts:
                if _LOG_LINE.search(text):
                    found.append(f"cell {number}: a log line: {_LOG_LINE.search(text).group(0)!r}")
                for path in paths:
                    if path in text:
                        found.append(f"cell {number}: a machine path {path!r}")
    if counts != list(range(1, len(counts) + 1)):
        found.append(f"cells were not executed once, top to bottom: execution counts {counts}")
    return found


def charts(nb: nbformat.NotebookNode) -> list[tuple[str, bytes]]:
    """(name, PNG bytes) of every chart output; a cell's `chart` metadata names it, else its number."""
    result = []
    for number, cell in enumerate(nb.cells, 1):
        images = [o["data"]["image/png"] for o in cell.get("outputs", []) if "image/png" in o.get("data", {})]
        name = cell.metadata.get("chart") or f"cell{number:02d}"
        for i, image in enumerate(images):
            suffix = f"-{i + 1}" if len(images) > 1 else ""
            result.append((f"{name}{suffix}", base64.b64decode(image)))
    return result


def run_workshop(out: Path, preset: str = "small", folder: Path = SOLUTIONS_DIR,
                 only: tuple[str, ...] = (), prepare_archive: bool = False) -> list[Executed]:
    """Execute every notebook of `folder` (or those whose name starts with one of `only`, e.g. "04") into
    out/notebooks, its charts into out/charts, then out/summary.md (of the notebooks run).

    `prepare_archive`: make the JVM's class-data sharing archive first when it is missing; when the run
    starts with 00, which counts but times nothing a lesson uses, in a background process beside it
    (`cds.prepare_in_background`), waited for before the next notebook."""
    from labformat.spark import cds

    out = Path(out)
    for sub in ("notebooks", "charts", "summary"):
        (out / sub).mkdir(parents=True, exist_ok=True)
    chosen = [p for p in notebooks(folder) if not only or p.name.startswith(tuple(only))]
    # A partial run leaves the other notebooks' summaries and charts of an earlier run alone.
    prefixes = tuple(p.stem for p in chosen) + tuple(f"{p.stem[:2]}-" for p in chosen) if only else ("",)
    for stale in list((out / "summary").glob("*.json")) + list((out / "charts").glob("*.png")):  # incl. claims
        if stale.name.startswith(prefixes):
            stale.unlink()
    done, jvm_archive = [], None
    if prepare_archive and chosen and chosen[0].name.startswith(UNTIMED_FIRST):
        jvm_archive = cds.prepare_in_background()
        if jvm_archive is not None:
            print(f"  preparing the Spark JVM's class-data sharing archive (once per Java and Spark) beside "
                  f"{chosen[0].name}; log: {cds.log_path()}", flush=True)
    elif prepare_archive:
        cds.prepare()
    try:
        left = _run_each(chosen, preset, out, done, jvm_archive)
    except BaseException:
        cds.stop(jvm_archive)  # a failed or interrupted job leaves no dump running behind it
        raise
    cds.wait_for(left)  # a run of 00 alone
    (out / "summary.md").write_text(summary_markdown(out, preset, done))
    return done


def _run_each(chosen: list[Path], preset: str, out: Path, done: list, jvm_archive):
    """Execute `chosen` in turn into `out`, appending to `done`; the dump still not waited for, if any."""
    from labformat.spark import cds

    for source in chosen:
        if jvm_archive is not None and not source.name.startswith(UNTIMED_FIRST):
            cds.wait_for(jvm_archive)
            jvm_archive = None
        started = time.perf_counter()
        print(f"  running {source.name} at {preset} ...", flush=True)
        nb = execute(source, preset, out=out)
        seconds = time.perf_counter() - started
        # The run's copy keeps nbclient's timestamps (per-cell seconds: `cell_seconds`); the saved
        # notebooks in the repository drop them (`strip_run_metadata`).
        slowest = tuple(sorted(cell_seconds(nb), key=lambda c: -c[1])[:3])
        target = out / "notebooks" / source.name
        nbformat.write(nb, target)
        written = []
        for name, png in charts(nb):
            path = out / "charts" / f"{source.stem[:2]}-{name}.png"
            path.write_bytes(png)
            written.append(path)
        done.append(Executed(source.stem, target, tuple(written), seconds, slowest))
        # Its scratch tables: no later notebook reads them (each makes its own from the cached data),
        # so the job's disk peak is one notebook's tables, not the sum of all of them.
        scratch_bytes = _remove_scratch(out, preset)
        print(f"  {source.name}: {seconds:.0f} s ({_cells(slowest)}), {len(written)} charts, "
              f"{scratch_bytes / 1024**2:,.0f} MB of scratch tables (removed)", flush=True)
    return jvm_archive


# The notebook that may run beside the class-data sharing dump: it generates the data, writes a table
# and counts its files, and times nothing a lesson or its summary uses.
UNTIMED_FIRST = "00-"


def _cells(slowest: tuple[tuple[int, float], ...]) -> str:
    """'cell 12 31 s, cell 4 9 s': the slowest cells of a run, for the log and the summary."""
    return ", ".join(f"cell {number} {seconds:.0f} s" for number, seconds in slowest) or "no cell timed"


def _remove_scratch(out: Path, preset: str) -> int:
    """Delete the notebooks' scratch tables of `preset` (`workshop.tables_root`: a folder or S3); their bytes."""
    from labformat.lab import workshop
    from labformat.storage import Storage

    root = workshop.tables_root(preset, out)
    size = sum(f.size for f in Storage(root).list("", recursive=True))
    workshop.drop(root)
    return size


def _fmt(value) -> str:
    if isinstance(value, float):
        return f"{value:,.2f}"
    if isinstance(value, int) and not isinstance(value, bool):
        return f"{value:,}"
    return str(value)


def broken_claims(out: Path, done: list[Executed]) -> list[claims.Claim]:
    """The exact lesson claims of this run that did not hold: each one fails the main job."""
    return [c for e in done for c in claims.load(out / "summary", e.name) if c.exact and not c.held]


def summary_markdown(out: Path, preset: str, done: list[Executed]) -> str:
    """One page: the lesson claims of every lab and whether the run bore them out, then per lab its
    key numbers (recorded by the notebook's last cell), run time and charts."""
    made = {e.name: claims.load(out / "summary", e.name) for e in done}
    every = [c for cs in made.values() for c in cs]
    exact = [c for c in every if c.exact]
    broken = [c for c in exact if not c.held]
    lines = [f"# Workshop run at preset `{preset}`", "",
             f"{len(done)} notebooks, {sum(e.seconds for e in done):.0f} s in all. Every number below was "
             "recorded by the notebook that measured it, in this run.", "",
             "## Lessons", "",
             f"{len(exact) - len(broken)} of {len(exact)} claims on exact quantities held"
             + (f"; BROKEN: {len(broken)}." if broken else ".")
             + (f" {sum(c.held for c in every if not c.exact)} of {sum(not c.exact for c in every)} timing "
                "claims held (timings are medians after a warm-up; they illustrate, they never fail the run)."
                if any(not c.exact for c in every) else ""), ""]
    if every:
        lines += ["| lab | claim | evidence from this run | verdict |", "| --- | --- | --- | --- |"]
        lines += [f"| {c.lab[:2]} | {c.text}{'' if c.exact else ' (timing)'} | {c.evidence} | "
                  f"{'**BROKEN**' if c.verdict == claims.BROKEN else c.verdict} |" for c in every]
        lines.append("")
    for executed in done:
        recorded = out / "summary" / f"{executed.name}.json"
        lines += [f"## {executed.name} ({executed.seconds:.0f} s)", ""]
        if executed.slowest:
            lines += [f"Slowest cells (counted from 1 at the top; nbval counts from 0): {_cells(executed.slowest)}.", ""]
        if recorded.exists():
            values = json.loads(recorded.read_text())["values"]
            lines += ["| what | value |", "| --- | --- |"]
            lines += [f"| {key} | {_fmt(value)} |" for key, value in values.items()]
        else:
            lines.append("(this notebook recorded no summary)")
        lines += ["", "Charts: " + (", ".join(f"`charts/{p.name}`" for p in executed.charts) or "none"), ""]
    return "\n".join(lines)
