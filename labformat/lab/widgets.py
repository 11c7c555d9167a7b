"""ipywidgets explorers for the notebooks: controls that re-run a sweep on a scratch table and redraw its charts.

Thin on purpose: every run goes through `labformat.lab.sweeps` and every chart through
`labformat.lab.viz`, so the widgets hold no logic a test would miss.
"""

from __future__ import annotations

from typing import Callable

import ipywidgets as W
import matplotlib.pyplot as plt
from IPython.display import display

from labformat import datasets
from labformat.datasets.spec import KEY_STYLES, PRESETS
from labformat.lab import frames, sweeps, viz, workshop
from labformat.model.enums import IndexType, SortMode

SIZES = ["64KB", "256KB", "1MB", "4MB", "8MB", "16MB", "32MB", "128MB"]
MAX_PARALLELISM = 16  # the bulk insert explorer's slider


# A preset with more history rows than this many times `small`'s asks before it runs.
CONFIRM_ABOVE = 10


def size_warning(preset: str) -> str | None:
    """What a run at `preset` costs against `small`, when it is more than CONFIRM_ABOVE times bigger
    (the widgets offer `medium` and `large`, made for a cluster); None otherwise. The work grows
    about linearly with the rows, so the ratio is the estimate."""
    big, small = datasets.spec(preset), datasets.spec("small")
    ratio = big.history_rows / small.history_rows
    if ratio <= CONFIRM_ABOVE:
        return None
    return (f"preset {preset}: {big.history_rows:,} readings in the history, {ratio:,.0f}x `small`'s "
            f"{small.history_rows:,}. Expect the run to take roughly {ratio:,.0f}x as long as at `small` "
            f"and its data and tables to need roughly {ratio:,.0f}x the disk. "
            "Click Run again to go ahead, or choose a smaller preset.")


def _explorer(controls: list[W.Widget], run: Callable[[dict], None]) -> W.VBox:
    """Controls, a Run button and an output area; clicking runs `run(values)` inside the output. A
    preset far bigger than `small` asks first: the first click says what it costs, a second runs it."""
    button = W.Button(description="Run", button_style="primary", icon="play")
    note = W.HTML()
    out = W.Output()

    def on_click(_):
        values = {c.description.rstrip(":"): c.value for c in controls}
        warning = size_warning(values["preset"]) if "preset" in values else None
        if warning and note.value != warning:
            note.value = warning  # the next click, with nothing changed, confirms
            return
        note.value = ""
        button.disabled = True
        out.clear_output(wait=True)
        try:
            with out:
                run(values)
                plt.show()
        finally:
            button.disabled = False

    button.on_click(on_click)
    return W.VBox([W.HBox(controls[:3]), W.HBox(controls[3:] + [button]), note, out])


def _preset(default: str | None) -> W.Dropdown:
    return W.Dropdown(options=list(PRESETS), value=default or workshop.preset(), description="preset:")


def bulk_insert_explorer(spark, preset: str | None = None) -> W.VBox:
    """Sort mode, key style, max file size and parallelism of a bulk insert -> key ranges and the write's task timeline."""
    controls = [
        _preset(preset),
        W.Dropdown(options=[m.value for m in (SortMode.NONE, SortMode.GLOBAL_SORT, SortMode.PARTITION_SORT)],
                   value=SortMode.GLOBAL_SORT.value, description="sort mode:"),
        W.Dropdown(options=list(KEY_STYLES), value="monotonic", description="key style:"),
        W.Dropdown(options=SIZES, value="1MB", description="max file size:"),
        W.IntSlider(value=4, min=1, max=MAX_PARALLELISM, description="parallelism:"),
    ]

    def run(v):
        spec = datasets.spec(v["preset"], key_style=v["key style"])
        result = sweeps.bulk_insert_sort_modes(
            spark, spec, [v["sort mode"]],
            {"max_file_size": v["max file size"], "bulk_insert_parallelism": v["parallelism"]}, progress=True,
            # as many input partitions as the slider reaches: NONE and PARTITION_SORT only coalesce them
            input_partitions=MAX_PARALLELISM)
        report, files = result[v["sort mode"]].report, result[v["sort mode"]].files
        _, (left, right) = plt.subplots(1, 2, figsize=(14, 4.5), layout="constrained")
        viz.plot_file_key_ranges(files, ax=left)
        viz.plot_task_timeline(frames.task_timeline(spark, report), workshop.cores(spark), ax=right)
        print(f"{len(files)} base files, at most {frames.max_overlap(files)} overlapping at one key; "
              f"bulk insert {report.seconds:.1f} s")

    return _explorer(controls, run)


def upsert_explorer(spark, preset: str | None = None) -> W.VBox:
    """Index type, key style, small-file limit and days of daily upserts -> the pruning funnel and per-step times."""
    controls = [
        _preset(preset),
        W.Dropdown(options=[t.value for t in IndexType], value=IndexType.BLOOM.value, description="index:"),
        W.Dropdown(options=list(KEY_STYLES), value="monotonic", description="key style:"),
        W.Dropdown(options=["0"] + SIZES, value="0", description="small file limit:"),
        W.Dropdown(options=SIZES, value="4MB", description="max file size:"),
        W.IntSlider(value=3, min=1, max=30, description="days:"),
    ]

    def run(v):
        spec = datasets.spec(v["preset"], key_style=v["key style"])
        days = min(v["days"], spec.batch_days)
        options = {"max_file_size": v["max file size"], "small_file_limit": v["small file limit"]}
        daily = sweeps.daily_upserts(spark, spec, "explorer-upserts", v["index"], options, days, progress=True)
        frame = daily.to_pandas()
        _, (left, right) = plt.subplots(1, 2, figsize=(14, 4.5), layout="constrained")
        viz.plot_pruning_funnel(frame, ax=left)
        viz.plot_step_times(frame, ax=right)
        display(frame[["day", "seconds", "files_rewritten", "files_created", "write_amplification"]])

    return _explorer(controls, run)


def file_size_explorer(spark, preset: str | None = None) -> W.VBox:
    """A file-size sweep (the history bulk inserted as N files, Hudi's sizes scaled to them) at a chosen
    small-file ratio -> bytes rewritten, write tasks, projected write stage, files opened, full-table query time."""
    controls = [
        _preset(preset),
        W.SelectMultiple(options=[128, 64, 32, 16, 8, 4, 2, 1], value=(64, 16, 4), rows=4,
                         description="history files:"),
        W.FloatSlider(value=round(100 / 120, 2), min=0.0, max=0.95, step=0.05, description="small / max:"),
        W.IntSlider(value=1, min=1, max=3, description="repeats:"),
    ]

    def run(v):
        spec = datasets.spec(v["preset"])
        frame = sweeps.file_size_sweep(spark, spec, sorted(v["history files"], reverse=True), repeats=v["repeats"],
                                       small_file_ratio=v["small / max"], progress=True)
        viz.plot_file_size_tradeoff(frame)
        display(frame.drop(columns=["planning_runs_s", "query_runs_s"]))

    return _explorer(controls, run)


def compaction_explorer(spark, preset: str | None = None) -> W.VBox:
    """`hoodie.compact.inline.max.delta.commits` values and days of late corrections into merge-on-read
    tables side by side -> write time against query time, bytes written and log files read."""
    from labformat.lab import merge_on_read

    controls = [
        _preset(preset),
        W.SelectMultiple(options=["1", "2", "3", "4", "5", "10", "never"], value=("3", "4", "never"), rows=4,
                         description="max delta commits:"),
        W.IntSlider(value=merge_on_read.SWEEP_DAYS, min=1, max=30, description="days:"),
    ]

    def run(v):
        # The notebook's six days of late corrections, generated already; more days generate the preset's all.
        spec = merge_on_read.lab_spec(v["preset"])
        if v["days"] > spec.batch_days:
            spec = datasets.spec(v["preset"], scenario="late")
        settings = [None if s == "never" else int(s) for s in v["max delta commits"]]
        sweep = merge_on_read.compaction_sweep(spark, spec, settings, days=v["days"], progress=True)
        totals = merge_on_read.sweep_totals(sweep)
        viz.plot_compaction_sweep(totals, budget=merge_on_read.LOG_BUDGET)
        display(totals.round(3))

    return _explorer(controls, run)
