"""The lab's charts: pure matplotlib functions drawing frames (`lab/frames.py`, the reports' `to_pandas`) onto axes."""

from __future__ import annotations

import math
import re
from datetime import datetime

import numpy as np
import pandas as pd

from labformat.lab.projection import CLUSTER_CORES
from labformat.lab.workshop import runs_each
from labformat.model.enums import BloomFilterTypeCode
from labformat.model.report import UPSERT_STEPS
from labformat.spark.ui import assign_lanes

# Monotonic drone keys start with the reading's minute: 202401150930_drone0042.
_TIME_PREFIX = re.compile(r"^(\d{12})")
_STEP_ORDER = UPSERT_STEPS
FUNNEL_COLUMNS = ("files_in_snapshot", "after_range_pruning", "after_bloom", "matched", "false_positives")
# Columns of a max_file_size sweep, in panel order, with their titles and y-axis units. Each panel a
# quantity of its own: footers read and planning entries follow files opened one for one (or one per
# column), so they are in the sweep's table, not in panels that would repeat this one.
TRADEOFF_METRICS = (("rows_rewritten", "rows copy-on-write rewrote"), ("write_stage_tasks", "write tasks"),
                    ("projected_write_stage_s", f"write stage on {CLUSTER_CORES} cores, projected"),
                    ("files_opened", "a full-table query: files, requests"),
                    ("mb_read", "the bytes it read"),
                    ("query_runs_s", "its time, every timed run"))
TRADEOFF_UNITS = {"rows_rewritten": "rows", "write_stage_tasks": "tasks", "projected_write_stage_s": "seconds",
                  "files_opened": "files opened / read requests", "mb_read": "MB", "query_runs_s": "seconds"}
# Drawn in the panel of the first column, beside it: read requests follow files opened (a few per file).
_TRADEOFF_BESIDE = {"files_opened": ("read_requests", "read requests (GETs on S3)")}


def _new_ax(ax):
    if ax is None:
        import matplotlib.pyplot as plt

        _, ax = plt.subplots(figsize=(9, 4.5), layout="constrained")
    return ax


def _new_axes(axes, n: int, **subplots):
    if axes is None:
        import matplotlib.pyplot as plt

        _, grid = plt.subplots(layout="constrained", **subplots)
        return list(np.ravel(grid))
    axes = list(np.ravel(axes))
    if len(axes) != n:
        raise ValueError(f"expected {n} axes, got {len(axes)}")
    return axes


def _colors(n: int) -> list:
    """n distinct colours: tab10 while it lasts, tab20 then a continuous map beyond."""
    from matplotlib import colormaps

    if n <= 10:
        return [colormaps["tab10"](i) for i in range(n)]
    if n <= 20:
        return [colormaps["tab20"](i) for i in range(n)]
    return [colormaps["viridis"](i / max(n - 1, 1)) for i in range(n)]


def _missing(value) -> bool:
    return value is None or (isinstance(value, float) and math.isnan(value))


# ---------------------------------------------------------------- 1. base-file key ranges

def _file_label(row) -> str:
    if "file_id" in row and isinstance(row["file_id"], str):
        return row["file_id"][:8]
    return str(row["path"]).rsplit("/", 1)[-1][:8]


# More commits than this get a colour scale instead of a legend entry each.
MAX_LEGEND_COMMITS = 12


def plot_file_key_ranges(files: pd.DataFrame, ax=None, max_tick_labels: int = 8):
    """Each base file as a horizontal bar from its min to its max record key, coloured by instant.

    When every key starts with 12 digits (yyyyMMddHHmm, monotonic keys) the x axis is time and a
    bar runs to the end of its max key's minute; otherwise x is each key's rank among all min/max
    keys and a bar covers its end ranks (so a one-key file still shows). Files without a key
    range (empty files) are not drawn; the title says how many.
    """
    import matplotlib.dates as mdates
    from matplotlib.patches import Patch

    ax = _new_ax(ax)
    if "path" not in files.columns and "file_id" not in files.columns:
        raise ValueError("files needs a 'path' or 'file_id' column")
    keyed = files.dropna(subset=["min_key", "max_key"])
    skipped = len(files) - len(keyed)
    keyed = keyed.sort_values(["min_key", "max_key"], kind="stable").reset_index(drop=True)
    all_keys = pd.concat([keyed["min_key"], keyed["max_key"]]).astype(str)
    as_time = len(keyed) > 0 and all_keys.str.match(_TIME_PREFIX).all()
    if as_time:
        parse = lambda k: datetime.strptime(k[:12], "%Y%m%d%H%M")  # noqa: E731
        left = mdates.date2num([parse(k) for k in keyed["min_key"]])
        minute = 1.0 / (24 * 60)  # matplotlib dates are days
        right = mdates.date2num([parse(k) for k in keyed["max_key"]]) + minute
    else:
        ranks = {k: i for i, k in enumerate(sorted(set(all_keys)))}
        left = np.array([ranks[k] for k in keyed["min_key"].astype(str)], dtype=float)
        right = np.array([ranks[k] for k in keyed["max_key"].astype(str)], dtype=float) + 1

    instants = sorted(keyed["instant"].astype(str).unique())
    color_of = dict(zip(instants, _colors(len(instants))))
    colors = [color_of[i] for i in keyed["instant"].astype(str)]
    y = np.arange(len(keyed))
    ax.barh(y, right - left, left=left, color=colors, height=0.8, edgecolor="black", linewidth=0.3)

    counts = keyed["instant"].astype(str).value_counts()
    # "bulk insert", "upsert 3" where the frame names its commits (key_ranges_frame does), else the instant.
    names = (dict(zip(keyed["instant"].astype(str), keyed["commit"].astype(str)))
             if "commit" in keyed.columns else {})
    if len(instants) > MAX_LEGEND_COMMITS:
        # A legend of a month of commits is taller than the plot: a colour scale in commit order instead.
        from matplotlib.cm import ScalarMappable
        from matplotlib.colors import BoundaryNorm, ListedColormap

        scale = ScalarMappable(norm=BoundaryNorm(np.arange(len(instants) + 1) - 0.5, len(instants)),
                               cmap=ListedColormap([color_of[i] for i in instants]))
        bar = ax.figure.colorbar(scale, ax=ax, pad=0.02)
        ends = sorted({0, len(instants) // 2, len(instants) - 1})
        bar.set_ticks(ends)
        bar.set_ticklabels([names.get(instants[i], instants[i]) for i in ends])
        bar.set_label(f"commit that wrote it ({len(instants)} commits, in order)")
    elif instants:
        handles = [Patch(facecolor=color_of[i], edgecolor="black", linewidth=0.3,
                         label=f"{names.get(i, i)} ({counts[i]} file{'s' if counts[i] != 1 else ''})")
                   for i in instants]
        ax.legend(handles=handles, title="commit that wrote it", fontsize="small",
                  loc="upper left", bbox_to_anchor=(1.0, 1.0), title_fontsize="small")

    if len(keyed):
        ax.set_xlim(left.min(), right.max())
        ax.set_ylim(-0.6, len(keyed) - 0.4)
    if as_time:
        ax.xaxis_date()
        locator = mdates.AutoDateLocator(maxticks=6)
        ax.xaxis.set_major_locator(locator)
        ax.xaxis.set_major_formatter(mdates.ConciseDateFormatter(locator))
        ax.set_xlabel("record key (time prefix yyyyMMddHHmm)")
    else:
        keys = sorted(set(all_keys))
        if keys:
            step = max(1, math.ceil(len(keys) / max_tick_labels))
            ticks = list(range(0, len(keys), step))
            ax.set_xticks(ticks)
            ax.set_xticklabels([keys[i] for i in ticks], rotation=30, ha="right", fontsize="small")
        ax.set_xlabel("record key (rank among file min/max keys)")
    if len(keyed) <= 30:
        ax.set_yticks(y)
        ax.set_yticklabels([_file_label(row) for _, row in keyed.iterrows()], fontsize="small")
    else:
        ax.set_yticks([])
    ax.set_ylabel("base file (sorted by min key)")
    title = f"Key ranges of {len(keyed)} base files"
    if skipped:
        title += f" ({skipped} without a key range not drawn)"
    ax.set_title(title)
    return ax


def plot_key_slices(files: pd.DataFrame, slices: pd.DataFrame, ax=None, title: str | None = None):
    """Each base file a lane (sorted by min key, then file id): its `[min key, max key]` as a pale bar and,
    inside it, its slices (`lab.bulk_loads.key_slices`: a file's rows in stored order cut into equal
    runs) as thin dark bars, the first on top. Keys must start with yyyyMMddHHmm (the x axis is time).
    A file sorted inside draws a staircase; a file whose rows came in no order draws every slice across
    its whole range."""
    import matplotlib.dates as mdates

    ax = _new_ax(ax)
    order = files.sort_values(["min_key", "file_id"], kind="stable").reset_index(drop=True)
    lane_of = {f: i for i, f in enumerate(order["file_id"])}
    parse = lambda k: datetime.strptime(str(k)[:12], "%Y%m%d%H%M")  # noqa: E731
    minute = 1.0 / (24 * 60)  # matplotlib dates are days
    left = mdates.date2num([parse(k) for k in order["min_key"]])
    right = mdates.date2num([parse(k) for k in order["max_key"]]) + minute
    ax.barh(np.arange(len(order)), right - left, left=left, height=0.9, color="0.88", edgecolor="0.6",
            linewidth=0.5, label="the file's [min key, max key] (what range pruning sees)")
    per_file = int(slices.groupby("file_id").size().max()) if len(slices) else 1
    step = 0.9 / per_file
    lo = mdates.date2num([parse(k) for k in slices["min_key"]])
    hi = mdates.date2num([parse(k) for k in slices["max_key"]]) + minute
    y = [lane_of[f] - 0.45 + (n + 0.5) * step for f, n in zip(slices["file_id"], slices["slice"])]
    ax.barh(y, hi - lo, left=lo, height=step * 0.7, color=_colors(1)[0],
            label=f"each 1/{per_file} of the file's rows, in stored order: its key range")
    ax.set_yticks(range(len(order)))
    ax.set_yticklabels([f"file {i + 1}" for i in range(len(order))], fontsize="small")
    ax.set_ylim(len(order) - 0.5, -0.5)  # the first file on top, each file's first slice on top of its lane
    ax.set_ylabel("base file (sorted by min key)")
    ax.xaxis_date()
    locator = mdates.AutoDateLocator(maxticks=6)
    ax.xaxis.set_major_locator(locator)
    ax.xaxis.set_major_formatter(mdates.ConciseDateFormatter(locator))
    ax.set_xlabel("record key (its time prefix yyyyMMddHHmm, as a date and time)")
    if len(order):
        ax.set_xlim(left.min(), right.max())
    ax.set_title(title or f"{len(order)} base files, {len(slices)} slices")
    return ax


# ---------------------------------------------------------------- 1b. a table at a glance (scripts/inspect_table.py)

def plot_file_sizes(files: pd.DataFrame, ax=None):
    """Base files (`size_bytes`, one row each) as a histogram of their sizes in MB; the median marked."""
    ax = _new_ax(ax)
    sizes = files["size_bytes"].astype(float) / 1024**2  # MB as everywhere in labformat: 2^20 bytes
    if len(sizes):
        ax.hist(sizes, bins=min(30, max(5, len(sizes))), color=_colors(1)[0], edgecolor="black", linewidth=0.3)
        ax.axvline(sizes.median(), color="black", linestyle="--", linewidth=1,
                   label=f"median {sizes.median():.2f} MB")
        ax.legend(fontsize="small")
    ax.set_xlabel("base file size (MB)")
    ax.set_ylabel("base files")
    ax.set_title(f"Sizes of {len(sizes)} base files")
    return ax


def plot_instants(timeline: pd.DataFrame, ax=None):
    """The timeline (`started`, `action`, `state`, `rows_written`): one marker per instant at its
    time, a row per action; filled when completed, hollow when requested or inflight."""
    ax = _new_ax(ax)
    actions = sorted(timeline["action"].astype(str).unique()) if len(timeline) else []
    colors = dict(zip(actions, _colors(len(actions))))
    for y, action in enumerate(actions):
        rows = timeline[timeline["action"] == action]
        done = rows["state"] == "completed"
        ax.scatter(rows.loc[done, "started"], [y] * int(done.sum()), color=colors[action], edgecolor="black",
                   s=60, zorder=3, label=f"{action} completed")
        if (~done).any():
            ax.scatter(rows.loc[~done, "started"], [y] * int((~done).sum()), facecolor="none",
                       edgecolor=colors[action], s=60, zorder=3, label=f"{action} pending")
    ax.set_yticks(range(len(actions)))
    ax.set_yticklabels(actions)
    ax.set_ylim(-0.6, max(len(actions), 1) - 0.4)
    ax.set_xlabel("instant time (UTC)")
    ax.set_title(f"Timeline: {len(timeline)} instants")
    if actions:
        ax.legend(fontsize="small", loc="upper left", bbox_to_anchor=(1.0, 1.0))
    ax.tick_params(axis="x", labelrotation=30)
    return ax


def plot_range_pruning(pruning: pd.DataFrame, ax=None):
    """Per sample key (`key`, `files_in_partition`, `kept_by_range`): the base files range pruning
    could not rule out, against the files of the key's partition."""
    ax = _new_ax(ax)
    x = np.arange(len(pruning))
    ax.bar(x, pruning["files_in_partition"], color="lightgrey", edgecolor="black", linewidth=0.3,
           label="base files in the key's partition")
    ax.bar(x, pruning["kept_by_range"], width=0.5, color=_colors(1)[0], edgecolor="black", linewidth=0.3,
           label="kept by range pruning (key within [min, max])")
    ax.set_xticks(x)
    ax.set_xticklabels([str(k)[:24] for k in pruning["key"]], rotation=45, ha="right", fontsize="x-small")
    from matplotlib.ticker import MaxNLocator

    ax.yaxis.set_major_locator(MaxNLocator(integer=True))
    ax.set_ylim(0, max(1, int(pruning["files_in_partition"].max()) if len(pruning) else 1) * 1.3)
    ax.set_ylabel("base files (count)")
    ax.set_xlabel("sampled record key")
    mean = f": {pruning['kept_by_range'].mean():.1f} kept per key" if len(pruning) else ""
    ax.set_title(f"Range pruning for {len(pruning)} sample keys{mean}")
    ax.legend(fontsize="small", loc="upper right")
    return ax


# ---------------------------------------------------------------- 2. pruning funnel

def plot_pruning_funnel(days: pd.DataFrame, ax=None):
    """Grouped bars per upsert day: files in table, after range pruning, after bloom, matched,
    false positives (`DailyRun.to_pandas()`). Missing values are not drawn; the series' legend
    label says so ("n/a for SIMPLE", or the days it is missing on)."""
    from matplotlib.patches import Patch

    ax = _new_ax(ax)
    columns = [c for c in FUNNEL_COLUMNS if c in days.columns]
    width = 0.8 / max(len(columns), 1)
    x = np.arange(len(days))
    index_names = sorted(set(days["index"].dropna().astype(str))) if "index" in days.columns else []
    handles = []
    for j, (column, color) in enumerate(zip(columns, _colors(len(columns)))):
        values = days[column].tolist()
        present = [i for i, v in enumerate(values) if not _missing(v)]
        label = column.replace("_", " ")
        if not present:
            label += f" (n/a for {'/'.join(index_names)})" if index_names else " (n/a)"
        elif len(present) < len(values):
            gone = [str(days["day"].iloc[i] if "day" in days.columns else i + 1)
                    for i in range(len(values)) if i not in present]
            label += f" (n/a on day {', '.join(gone)})"
        if present:
            bars = ax.bar(x[present] - 0.4 + width * (j + 0.5), [values[i] for i in present], width,
                          color=color, edgecolor="black", linewidth=0.3)
            ax.bar_label(bars, fontsize="x-small")
        # Proxy handles, so a series with nothing drawn still appears with its note.
        handles.append(Patch(facecolor=color if present else "none", edgecolor="black", linewidth=0.3,
                             hatch=None if present else "//", label=label))
    ax.set_xticks(x)
    ax.set_xticklabels([f"day {d}" for d in (days["day"] if "day" in days.columns else x + 1)])
    ax.set_xlim(-0.5, len(days) - 0.5)
    ax.set_ylabel("base files")
    ax.set_xlabel("upsert")
    title = "Tagging funnel per upsert"
    if index_names:
        title += f" ({'/'.join(index_names)} index)"
    ax.set_title(title)
    ax.legend(handles=handles, fontsize="small", loc="best")
    return ax


# ---------------------------------------------------------------- 3. task timeline

def task_lanes(tasks: pd.DataFrame, cores: int) -> pd.Series:
    """`spark.ui.assign_lanes` for a task table (launch, duration; task_id breaks launch ties), aligned to its index."""
    order = tasks.sort_values(["launch", "task_id"] if "task_id" in tasks.columns else ["launch"], kind="stable")
    launches = order["launch"].astype(float).tolist()
    ends = (order["launch"] + order["duration"]).astype(float).tolist()
    return pd.Series(assign_lanes(launches, ends, cores), index=order.index, name="lane").reindex(tasks.index)


def plot_task_timeline(tasks: pd.DataFrame, cores: int, ax=None, *, projection: bool = False):
    """A Gantt chart of Spark tasks on `cores` lanes (`spark.ui.assign_lanes`), coloured by stage and named by
    what the stage does (`stage_label`, else "stage N"); idle time in each lane between the first
    launch and the last finish is shaded grey.

    Columns: stage_id, task_id, launch (seconds from an origin), duration (seconds), stage_label
    (optional). `projection=True` draws `projection.project`'s output: its own lanes, hatched,
    lighter bars and a title that says it is a projection from durations measured here.
    """
    from matplotlib.patches import Patch

    from labformat.lab.projection import task_stage_labels

    ax = _new_ax(ax)
    lanes = tasks["lane"].astype(int) if projection else task_lanes(tasks, cores)
    if projection and len(tasks) and not lanes.between(0, cores - 1).all():
        raise ValueError(f"the projection's lanes run to {lanes.max()}, but it is drawn on {cores} cores")
    start = float(tasks["launch"].min()) if len(tasks) else 0.0
    end = float((tasks["launch"] + tasks["duration"]).max()) if len(tasks) else 0.0
    stages = sorted(tasks["stage_id"].unique())
    color_of = dict(zip(stages, _colors(len(stages))))
    label_of = task_stage_labels(tasks).groupby(tasks["stage_id"]).first().to_dict() if len(tasks) else {}
    # A projection looks different at a glance: lighter, hatched bars.
    bar_style = dict(alpha=0.55, hatch="//") if projection else {}
    height = 0.8

    # Idle first, underneath: the gaps in each lane's busy intervals over [start, end].
    idle_total = 0.0
    for lane in range(cores):
        busy = tasks[lanes == lane].sort_values("launch")
        cursor = start
        gaps = []
        for launch, duration in zip(busy["launch"], busy["duration"]):
            if launch > cursor:
                gaps.append((cursor, launch - cursor))
            cursor = max(cursor, launch + duration)
        if end > cursor:
            gaps.append((cursor, end - cursor))
        if gaps:
            ax.broken_barh(gaps, (lane - height / 2, height), facecolors="0.92", edgecolors="0.75",
                           hatch="..", linewidth=0.3, gid="idle")
            idle_total += sum(g[1] for g in gaps)

    for stage in stages:
        mine = tasks[tasks["stage_id"] == stage]
        ax.barh(lanes[mine.index], mine["duration"], left=mine["launch"], height=height,
                color=color_of[stage], edgecolor="black", linewidth=0.3, **bar_style)

    handles = [Patch(facecolor=color_of[s], edgecolor="black", linewidth=0.3, **bar_style,
                     label=f"{label_of[s]} ({int((tasks['stage_id'] == s).sum())} tasks)") for s in stages]
    handles.append(Patch(facecolor="0.92", edgecolor="0.75", hatch="..", label="idle core"))
    # Outside the plot: inside, it would hide the tasks of some lane.
    ax.legend(handles=handles, fontsize="small", loc="upper left", bbox_to_anchor=(1.0, 1.0))
    ax.set_yticks(range(cores))
    ax.set_yticklabels([f"core {i}" for i in range(cores)])
    ax.set_ylim(-0.6, cores - 0.4)
    ax.invert_yaxis()  # core 0 on top, as Spark's UI lists executors
    if end > start:
        ax.set_xlim(start, end)
    ax.set_xlabel("seconds")
    span = end - start
    busy_share = 1 - idle_total / (cores * span) if span > 0 else 0.0
    if projection:
        ax.set_title(f"Projection onto {cores} cores from the task durations measured on this machine: "
                     f"{len(tasks)} tasks, {span:.2f} s, busy {busy_share:.0%}", fontsize="medium")
    else:
        ax.set_title(f"{len(tasks)} tasks on {cores} cores: busy {busy_share:.0%} of {span:.2f} s x {cores}")
    return ax


def plot_timeline_and_projection(tasks: pd.DataFrame, cores: int, project_to: int = CLUSTER_CORES, axes=None):
    """The measured timeline on this machine's `cores` (top) and its projection onto `project_to`
    cores (`projection.project`, bottom), on one shared seconds axis; returns the two axes."""
    from labformat.lab.projection import project, task_durations

    if "duration" not in tasks.columns:  # the Spark UI's own frame: the executor's busy time
        tasks = tasks.assign(duration=task_durations(tasks))
    projected = project(tasks, project_to)
    if axes is None:
        import matplotlib.pyplot as plt

        _, axes = plt.subplots(2, 1, sharex=True, layout="constrained",
                               figsize=(10, 1.2 + 0.3 * (cores + project_to)),
                               height_ratios=[cores + 1.5, project_to + 1.5])
    top, bottom = _new_axes(axes, 2)
    plot_task_timeline(tasks, cores, ax=top)
    plot_task_timeline(projected, project_to, ax=bottom, projection=True)
    top.set_title("Measured on this machine: " + top.get_title(), fontsize="medium")
    if not top.get_shared_x_axes().joined(top, bottom):
        top.sharex(bottom)
    top.set_xlabel("")
    ends = [float((f["launch"] + f["duration"]).max()) for f in (tasks, projected) if len(f)]
    if ends and max(ends) > 0:
        bottom.set_xlim(0.0, max(ends))
    return [top, bottom]


def plot_shuffle_projection(runs, work_s: float, task_counts=None, axes=None):
    """The deduplicate stage on `runs.project_to` cores, a projection: one row per task count; left the
    median measured run's tasks (`shuffle.time_deduplicate`), right equal tasks by the rule for `work_s`
    seconds of work, each with the start-up measured here. Each column shares its seconds axis, so the
    rows compare directly. Returns the axes, row by row."""
    counts = list(task_counts or sorted(runs.stages))
    cores = runs.project_to
    if axes is None:
        import matplotlib.pyplot as plt

        _, grid = plt.subplots(len(counts), 2, figsize=(14, 1.2 + 0.32 * cores * len(counts)), layout="constrained")
        axes = np.atleast_2d(grid)
    axes = np.asarray(axes).reshape(len(counts), 2)
    ends = {0: [], 1: []}
    for row, n in zip(axes, counts):
        for column, (ax, work, what) in enumerate(((row[0], None, "as measured here"),
                                                    (row[1], work_s, f"by the rule, {work_s:,.0f} s of work"))):
            projected = runs.projected(n, work)
            plot_task_timeline(projected, cores, ax=ax, projection=True)
            ax.set_title(f"{n} tasks {what}: {ax.get_title().split(': ', 1)[1]}", fontsize="small")
            ax.get_legend().remove()
            ax.set_xlabel("seconds (projection)")
            ax.tick_params(axis="y", labelsize="x-small")
            ends[column].append(float((projected["launch"] + projected["duration"]).max()))
    for column in range(2):
        for ax in axes[:, column]:
            ax.set_xlim(0.0, max(ends[column]) * 1.02)
    return list(axes.ravel())


# ---------------------------------------------------------------- 4. max_file_size sweep

def _size_mb(value) -> float:
    from labformat.config import parse_size

    if isinstance(value, (int, np.integer)) or isinstance(value, str):
        return parse_size(int(value) if isinstance(value, np.integer) else value) / 1024**2
    return float(value) / 1024**2


def plot_file_size_tradeoff(sweep: pd.DataFrame, axes=None):
    """Small multiples over a file-size sweep (`sweeps.file_size_sweep`), one panel per
    `TRADEOFF_METRICS` column against max_file_size in MB (log scale; with an `hours_per_file` column
    each tick also says the hours of readings a file holds): what an upsert rewrites and how many
    write tasks it runs on one side, what a query that cannot skip opens and requests, and its
    measured times, on the other.

    Takes `axes` (one Axes per metric, e.g. the array from `plt.subplots(2, 3)`) instead of one
    `ax`: quantities with different units read better side by side than on twin axes.
    `max_file_size` may be bytes or a size string ("24KB", "128MB"). A metric column that is
    absent leaves its panel saying so. A column of lists (every run) or several rows per size are
    drawn as a dot per run, the line joining the medians. Returns the axes.
    """
    axes = _new_axes(axes, len(TRADEOFF_METRICS), nrows=2, ncols=3, figsize=(13, 6.5), sharex=True)
    mb = sweep["max_file_size"].map(_size_mb)
    hours = (dict(zip(mb, sweep["hours_per_file"].astype(float))) if "hours_per_file" in sweep.columns else {})
    for ax, (column, label) in zip(axes, TRADEOFF_METRICS):
        ax.set_title(label)
        ax.set_xscale("log")
        ax.set_xlabel("max_file_size (MB, log scale)")
        ax.set_ylabel(TRADEOFF_UNITS.get(column, ""))
        if column not in sweep.columns:
            ax.text(0.5, 0.5, f"no '{column}' column", transform=ax.transAxes, ha="center", va="center")
            continue
        frame = pd.DataFrame({"mb": mb, "value": sweep[column]}).explode("value").dropna()
        frame["value"] = frame["value"].astype(float)
        medians = frame.groupby("mb")["value"].median()
        beside = _TRADEOFF_BESIDE.get(column)
        top = frame["value"].max() if len(frame) else 0.0
        if beside and beside[0] in sweep.columns:
            other = pd.DataFrame({"mb": mb, "value": sweep[beside[0]]}).dropna()
            other["value"] = other["value"].astype(float)
            ax.plot(other["mb"], other["value"], marker="s", color="tab:orange", label=beside[1])
            ax.plot(medians.index, medians.values, marker="o", label="files opened (a footer each)")
            ax.legend(fontsize="small")
            top = max(top, other["value"].max())
        else:
            ax.plot(medians.index, medians.values, marker="o", label="median" if len(frame) > len(medians) else None)
        if len(frame) > len(medians):
            ax.scatter(frame["mb"], frame["value"], s=12, alpha=0.5, color="0.3", label="runs")
            ax.legend(fontsize="small")
        ax.set_ylim(bottom=0, top=max(top * 1.15, 1e-9) if len(frame) else None)
        ax.set_xticks(medians.index)
        # Two significant digits: scaled sizes are computed ("0.47"), not round numbers.
        ax.set_xticklabels([f"{v:.2g}" + (f"\n{hours[v]:g} h a file" if v in hours else "") for v in medians.index])
        ax.minorticks_off()
        ax.tick_params(labelbottom=True)
    return axes


# ---------------------------------------------------------------- 5. query skipping

def _count(n, noun: str) -> str:
    """`1 file`, `64 files`; a count that is no number (not counted on Spark Connect) as it is."""
    if isinstance(n, str):
        return f"{noun}s: {n}"
    return f"{int(n)} {noun}" + ("" if int(n) == 1 else "s")


def plot_query_skipping(frame: pd.DataFrame, axes=None):
    """Two panels per `compare_skipping` frame: files per query (read vs skipped, stacked to the
    files considered) and median seconds with skipping on vs off (min-max whiskers when given).

    Takes `axes` (two Axes, e.g. from `plt.subplots(1, 2)`) instead of one `ax`: file counts and
    seconds do not share a scale. Returns the two axes.
    """
    ax_files, ax_time = _new_axes(axes, 2, nrows=1, ncols=2, figsize=(11, 4))
    queries = list(dict.fromkeys(frame["query"]))
    y = np.arange(len(queries))
    on = frame[frame["skipping"] == "on"].set_index("query").reindex(queries)
    considered = on["files_in_snapshot"].to_numpy(dtype=float)
    read = on["files_read"].to_numpy(dtype=float)
    skipped = considered - read
    read_bars = ax_files.barh(y, read, color="tab:blue", label="read")
    skip_bars = ax_files.barh(y, skipped, left=read, color="tab:gray", alpha=0.5, label="skipped")
    ax_files.bar_label(read_bars, label_type="center", fontsize="small")
    # "none skipped" sits on the read bar's right end: a label centred on an empty segment would land
    # on the read bar's count.
    ax_files.bar_label(skip_bars, labels=[f"{int(s)} of {int(c)} skipped" if not math.isnan(s) and s > 0 else ""
                                          for s, c in zip(skipped, considered)],
                       label_type="center", fontsize="small")
    for yi, s, r in zip(y, skipped, read):
        if not math.isnan(s) and s == 0:
            ax_files.annotate("none skipped", (r, yi), xytext=(-4, 0), textcoords="offset points", ha="right",
                              va="center", fontsize="small", color="white")
    ax_files.set_yticks(y)
    ax_files.set_yticklabels(queries)
    ax_files.invert_yaxis()
    ax_files.set_xlabel("base files (skipping on)")
    ax_files.set_xlim(0, np.nanmax(considered) * 1.05 if len(queries) else 1)
    ax_files.set_title("Files considered, skipped, read")
    # Legends under the panels: inside, they sat on the bars and their labels.
    ax_files.legend(fontsize="small", loc="upper center", bbox_to_anchor=(0.5, -0.16), ncols=2)

    width = 0.4
    counted = {"files_read", "row_groups_read"} <= set(frame.columns)
    for k, (mode, color) in enumerate((("on", "tab:blue"), ("off", "tab:orange"))):
        part = frame[frame["skipping"] == mode].set_index("query").reindex(queries)
        whiskers = None
        if {"min_s", "max_s"} <= set(part.columns):
            whiskers = [part["median_s"] - part["min_s"], part["max_s"] - part["median_s"]]
        bars = ax_time.barh(y - width / 2 + k * width, part["median_s"], width, xerr=whiskers, color=color,
                            label=f"skipping {mode}", capsize=2)
        if counted:
            # What each scan opened and read beside its time: a point lookup without skipping opens every
            # file yet reads one row group, which is why its time barely moves.
            ax_time.bar_label(bars, labels=[f" {_count(f, 'file')}, {_count(g, 'row group')}" if not pd.isna(f) else ""
                                            for f, g in zip(part["files_read"], part["row_groups_read"])],
                              fontsize="x-small", padding=6)
    if counted:
        ax_time.set_xlim(0, float(np.nanmax(frame.get("max_s", frame["median_s"]))) * 1.9)
    ax_time.set_yticks(y)
    ax_time.set_yticklabels(queries)
    ax_time.invert_yaxis()
    ax_time.set_xlabel("median seconds (whiskers: min-max)")
    ax_time.set_title("Query time with and without skipping")
    ax_time.legend(fontsize="small", loc="upper center", bbox_to_anchor=(0.5, -0.16), ncols=2)
    return [ax_files, ax_time]


# ---------------------------------------------------------------- 5b. a month of upserts, timings with spread

def plot_month(days: pd.DataFrame, axes=None):
    """Four panels over the upsert days of `DailyRun.to_pandas()`, sharing the day axis: files in the
    table and files kept by range pruning; the share kept; files rewritten and created; MB rewritten."""
    axes = _new_axes(axes, 4, nrows=2, ncols=2, figsize=(11, 6.5), sharex=True)
    x = days["day"].to_numpy() if "day" in days.columns else np.arange(1, len(days) + 1)
    kept, total = days["after_range_pruning"].astype(float), days["files_in_snapshot"].astype(float)
    ax = axes[0]
    ax.bar(x, total, color="0.8", label="files in the table")
    ax.bar(x, kept, color="tab:blue", label="kept by range pruning")
    ax.set_ylabel("base files")
    ax.set_title("Files in the table vs kept by range pruning")
    ax.legend(fontsize="small", loc="upper left")
    ax = axes[1]
    ax.plot(x, 100 * kept / total, marker="o", color="tab:blue")
    ax.set_ylim(0, max(100 * (kept / total).max() * 1.15, 1))
    ax.set_ylabel("% of the files")
    ax.set_title("Share kept by range pruning")
    ax = axes[2]
    width = 0.4
    ax.bar(x - width / 2, days["files_rewritten"], width, color="tab:orange", label="rewritten (new file slice)")
    ax.bar(x + width / 2, days["files_created"], width, color="tab:green", label="created (new file group)")
    ax.set_ylabel("base files")
    ax.set_title("Files written per upsert")
    # Headroom above the tallest bar, so that the legend never covers a bar.
    ax.set_ylim(0, max(days["files_rewritten"].max(), days["files_created"].max(), 1) * 1.5)
    ax.legend(fontsize="small", loc="upper left", ncols=2)
    ax = axes[3]
    ax.bar(x, days["mb_rewritten"], color="tab:orange")
    ax.set_ylabel("MB")
    ax.set_title("Bytes rewritten per upsert (new slices of existing file groups)")
    for ax in axes:
        ax.set_xlabel("upsert day")
        ax.xaxis.get_major_locator().set_params(integer=True)
    for ax in (axes[0], axes[2]):  # file counts: whole numbers only
        ax.yaxis.set_major_locator(_integer_locator())
    return axes


def plot_key_funnel(days: pd.DataFrame, ax=None):
    """Per upsert day, (key, file) pairs: candidates after range pruning, after the bloom filters,
    matched by the exact check, on a linear axis from 0 (a log axis made a 3x drop look like 10x).
    The title gives the whole run's totals and the share the bloom filters dropped."""
    ax = _new_ax(ax)
    columns = [("keys_after_range_pruning", "after range pruning"), ("keys_after_bloom", "after bloom"),
               ("keys_matched", "matched (exact check)")]
    x = days["day"].to_numpy() if "day" in days.columns else np.arange(1, len(days) + 1)
    width = 0.8 / len(columns)
    for j, ((column, label), color) in enumerate(zip(columns, _colors(len(columns)))):
        values = days[column].astype(float).to_numpy()
        ax.bar(x - 0.4 + width * (j + 0.5), values, width, color=color, label=label)
    from matplotlib.ticker import FuncFormatter

    ax.set_ylim(bottom=0)
    ax.yaxis.set_major_formatter(FuncFormatter(lambda v, _: f"{v:,.0f}"))
    ax.set_ylabel("(key, file) pairs per upsert")
    ax.set_xlabel("upsert day")
    ax.xaxis.get_major_locator().set_params(integer=True)
    kept, passed = float(days["keys_after_range_pruning"].sum()), float(days["keys_after_bloom"].sum())
    dropped = f": {1 - passed / kept:.0%} of them dropped" if kept else ""
    ax.set_title(f"Key-level funnel: {kept:,.0f} pairs kept by range pruning, {passed:,.0f} passed the bloom "
                 f"filters{dropped}", fontsize="medium")
    ax.legend(fontsize="small", loc="upper left", bbox_to_anchor=(1.0, 1.0))
    return ax


def plot_spread(frame: pd.DataFrame, by: str, column: str, ax=None, title: str | None = None):
    """Repeated runs per setting: every run a dot, the median a bar, min to max a whisker. Where two
    settings' whiskers overlap, their difference is within this machine's noise."""
    ax = _new_ax(ax)
    settings = list(dict.fromkeys(sorted(frame[by].unique(), key=lambda v: (str(type(v)), v))))
    for i, setting in enumerate(settings):
        values = frame.loc[frame[by] == setting, column].astype(float)
        median = values.median()
        ax.bar(i, median, 0.5, color="tab:blue", alpha=0.35)
        ax.errorbar(i, median, yerr=[[median - values.min()], [values.max() - median]], color="black", capsize=6)
        ax.scatter([i] * len(values), values, color="black", s=12, zorder=3)
        ax.annotate(f"{median:.2f} s", (i, values.max()), xytext=(8, 0), textcoords="offset points", fontsize="small")
    ax.set_xticks(range(len(settings)))
    ax.set_xticklabels([str(s) for s in settings])
    ax.set_xlabel(by.replace("_", " "))
    ax.set_ylabel("seconds")
    ax.set_ylim(bottom=0)
    runs = int(frame.groupby(by).size().max()) if len(frame) else 0
    ax.set_title(title or f"{column.replace('_', ' ')}: {runs_each(runs)}, median and min-max")
    return ax


def plot_index_comparison(frame: pd.DataFrame, upserts: pd.DataFrame | None = None, axes=None):
    """The indexes side by side: their tag step's seconds over repeated runs (`frame`, as `plot_spread`:
    every run a dot, the median a bar, min-max a whisker), and from one real upsert each (`upserts`,
    indexed by index, as `upsert_timing.compare_index_tags` returns it) the rows and the base files it
    rewrote, the BUCKET table's bucket count named: the tag step alone flatters an index that makes the
    write step rewrite more. Without `upserts`, `frame`'s own files_rewritten (and rows_rewritten)."""
    axes = _new_axes(axes, 3, nrows=1, ncols=3, figsize=(15, 4))
    plot_spread(frame, "index", "tag_s", ax=axes[0],
                title=f"tag step (s): {runs_each(int(frame.groupby('index').size().max()))}, median and min-max")
    if upserts is None:
        columns = {c: (c, "max") for c in ("files_rewritten", "rows_rewritten", "bucket_num") if c in frame.columns}
        upserts = frame.groupby("index").agg(**columns)
    per_index = upserts.sort_index()
    labels = [f"{i}\n{int(row.bucket_num)} buckets" if "bucket_num" in per_index and not _missing(row.bucket_num) else i
              for i, row in per_index.iterrows()]
    for ax, column, label in ((axes[1], "rows_rewritten", "rows rewritten"),
                              (axes[2], "files_rewritten", "base files rewritten")):
        values = per_index[column] if column in per_index else pd.Series(np.nan, index=per_index.index)
        ax.bar(range(len(per_index)), values, color="tab:orange", alpha=0.7)
        for x, n in enumerate(values):
            if not _missing(n):
                ax.annotate(f"{int(n):,}", (x, n), ha="center", va="bottom", fontsize="small")
        ax.set_xticks(range(len(per_index)))
        ax.set_xticklabels(labels)
        ax.set_xlabel("index")
        ax.set_ylabel(label)
        ax.set_title(f"{label} by the upsert (one run each)")
    axes[2].yaxis.set_major_locator(_integer_locator())
    return axes


# ---------------------------------------------------------------- 6. step times

def step_columns(days: pd.DataFrame) -> list[str]:
    """The per-step seconds columns of `DailyRun.to_pandas()`, in pipeline order: `<step>_s`
    where `<step>_tasks` is also there (how a step column is told from e.g. `planning_s`), or a
    known upsert step."""
    found = [c for c in days.columns if c.endswith("_s") and c != "seconds"
             and (c[:-2] in _STEP_ORDER or f"{c[:-2]}_tasks" in days.columns)]
    rank = {name: i for i, name in enumerate(_STEP_ORDER)}
    return sorted(found, key=lambda c: rank.get(c[:-2], len(rank)))


# A step taking less than this share of the longest day's total gets no colour of its own: its
# segment would be invisible and its legend entry would name nothing one can see.
MINOR_STEP_SHARE = 0.02


def plot_step_times(days: pd.DataFrame, ax=None):
    """Stacked bars per upsert day of the seconds each upsert step took, the total on top (up to ten
    days; beyond, the axis reads it). Steps too short to see are stacked together in grey."""
    ax = _new_ax(ax)
    columns = step_columns(days)
    x = np.arange(len(days))
    totals = days[columns].fillna(0).sum(axis=1).to_numpy(dtype=float) if columns else np.zeros(len(days))
    floor = MINOR_STEP_SHARE * (totals.max() if len(days) else 0)
    major = [c for c in columns if days[c].fillna(0).max() >= floor]
    minor = [c for c in columns if c not in major]
    segments = [(c[:-2].replace("_", " "), days[c].fillna(0).to_numpy(dtype=float), color)
                for c, color in zip(major, _colors(len(major)))]
    if minor:
        label = f"{len(minor)} shorter steps (each under {MINOR_STEP_SHARE:.0%} of the longest day)"
        segments.append((label, days[minor].fillna(0).sum(axis=1).to_numpy(dtype=float), "lightgrey"))
    bottom = np.zeros(len(days))
    for label, values, color in segments:
        ax.bar(x, values, 0.6, bottom=bottom, color=color, label=label, edgecolor="black", linewidth=0.3)
        bottom += values
    if len(days) <= 10:
        for xi, top in zip(x, bottom):
            ax.annotate(f"{top:.1f} s", (xi, top), xytext=(0, 2), textcoords="offset points", ha="center",
                        fontsize="small")
    numbers = days["day"] if "day" in days.columns else x + 1
    step = 1 if len(days) <= 14 else 7 if len(days) > 28 else max(1, len(days) // 7)
    shown = [i for i in x if i % step == 0 or i == len(days) - 1]
    ax.set_xticks(shown)
    ax.set_xticklabels([str(numbers.iloc[i] if hasattr(numbers, "iloc") else numbers[i]) for i in shown])
    ax.set_xlim(-0.5, len(days) - 0.5)
    ax.set_ylim(0, bottom.max() * 1.12 if len(days) and bottom.max() > 0 else 1)
    ax.set_ylabel("seconds")
    ax.set_xlabel("upsert day")
    ax.set_title("Upsert time per step")
    # Reversed so the legend reads top-down like the stack.
    handles, labels = ax.get_legend_handles_labels()
    ax.legend(handles[::-1], labels[::-1], fontsize="small", loc="upper left", bbox_to_anchor=(1.0, 1.0))
    return ax


# ---------------------------------------------------------------- 7. bloom filter sizing

# The BLOOM index's key-level funnel (`TagFunnel.keys_*`), as `DailyRun.to_pandas`
# columns: (key, file) pairs after range pruning, after the bloom filter, really matched; the
# pairs the filter let through in vain; the keys the exact check read from the files it opened.
KEY_FUNNEL_COLUMNS = ("keys_after_range_pruning", "keys_after_bloom", "keys_matched", "keys_false_positives",
                      "keys_read_by_exact_check", "keys_read")


def bloom_filter_label(num_entries, fpp) -> str:
    """A filter size as a tick label: `60,000 @ 1e-9`, `700 @ 0.01`."""
    text = f"{float(fpp):g}"
    text = re.sub(r"e([+-])0*(\d)", lambda m: f"e{'-' if m.group(1) == '-' else ''}{m.group(2)}", text)
    return f"{int(num_entries):,} @ {text}"


def plot_insert_plan(plan: pd.DataFrame, options: dict, ax=None, filter_bytes: int | None = None):
    """Steps 4-6 of one upsert, per base file it wrote (a `frames.insert_plan` frame, in its order):
    the KB the file held before (grey), what the upsert added to it (the small files that took
    inserts, the new file groups, the files that took only updates, each its colour), the inserts
    it took above the bar, and `max_file_size` and `small_file_limit` as lines; with `filter_bytes`
    (`frames.bloom_filter_bytes`), also `max_file_size` plus the bloom filter every footer carries."""
    from labformat.config import parse_size

    ax = ax if ax is not None else _new_axes(None, 1, figsize=(11, 4.5))[0]
    x = np.arange(len(plan))
    before = plan["kb_before"].to_numpy(dtype=float)
    added = np.maximum(plan["kb_after"].to_numpy(dtype=float) - before, 0.0)
    kinds = np.where(plan["created"], "new file group", np.where(plan["small_file"], "small file, packed", "updates only"))
    ax.bar(x, before, 0.8, color="0.8", edgecolor="black", linewidth=0.3, label="KB before")
    for kind, color in (("small file, packed", "tab:green"), ("new file group", "tab:orange"),
                        ("updates only", "tab:blue")):
        chosen = kinds == kind
        if chosen.any():
            # An updated file is rewritten at about its old size: its segment is a sliver, so say so.
            note = " (rewritten, about its old size)" if kind == "updates only" else ""
            ax.bar(x[chosen], added[chosen], 0.8, bottom=before[chosen], color=color, edgecolor="black",
                   linewidth=0.3, label=f"KB added: {kind}{note}")
    for xi, top, inserts in zip(x, before + added, plan["inserts"]):
        if inserts:
            ax.annotate(f"{inserts:,}", (xi, top), xytext=(0, 2), textcoords="offset points", ha="center",
                        fontsize="x-small", rotation=90, va="bottom")
    for option, style, label in (("max_file_size", "--", "max_file_size"), ("small_file_limit", ":", "small_file_limit")):
        size = parse_size(options.get(option, 0))
        if size:
            ax.axhline(size / 1024, color="tab:red", linestyle=style, linewidth=1.2, label=label)
    if filter_bytes and parse_size(options.get("max_file_size", 0)):
        ax.axhline((parse_size(options["max_file_size"]) + filter_bytes) / 1024, color="tab:purple", linestyle="-.",
                   linewidth=1.2, label=f"max_file_size + the footer's bloom filter ({filter_bytes / 1024:,.0f} KB)")
    top = max(float(np.max(before + added)) if len(plan) else 0.0, parse_size(options.get("max_file_size", 0)) / 1024)
    ax.set_ylim(0, top * 1.35 if top else 1)
    ax.set_xticks(x)
    ax.set_xticklabels([str(i + 1) for i in x], fontsize="x-small")
    ax.set_xlim(-0.6, len(plan) - 0.4)
    ax.set_xlabel("base files the upsert wrote (existing file groups in key order, then new ones); inserts above")
    ax.set_ylabel("KB")
    ax.set_title("Steps 4-6: what each file held, what it took")
    ax.legend(fontsize="x-small", loc="upper left", ncol=3)
    return ax


def plot_bloom_sweep(frame: pd.DataFrame, axes=None):
    """Three panels over a `bloom_filter_sweep` frame, one group of bars per filter (num_entries @ fpp,
    and its type when the sweep has both SIMPLE and DYNAMIC_V0; in the frame's order), summed over
    its rows per filter:

    - (key, file) pairs after range pruning, after the bloom filter, really matched;
    - false-positive pairs (after bloom, not matched), on the same y axis as the first panel;
    - files the exact check opened (after bloom) beside the files really holding a key, each
      opened bar labelled with the keys the exact check read from them.

    Takes `axes` (three Axes, e.g. from `plt.subplots(1, 3)`). Returns the three axes.
    """
    ax_pairs, ax_fp, ax_files = _new_axes(axes, 3, nrows=1, ncols=3, figsize=(14, 4.5))
    ax_fp.sharey(ax_pairs)
    frame = frame.assign(filter_type=frame["filter_type"] if "filter_type" in frame.columns else BloomFilterTypeCode.SIMPLE)
    keys = ["num_entries", "fpp", "filter_type"]
    filters = list(dict.fromkeys(zip(*(frame[k] for k in keys))))
    sums = frame.groupby(keys, sort=False).sum(numeric_only=True, min_count=1)
    sums = sums.reindex(pd.MultiIndex.from_tuples(filters, names=keys)) if filters else sums
    typed = len({t for *_, t in filters}) > 1  # name the type only where the sweep has more than one
    labels = [bloom_filter_label(n, p) + (f" {t}" if typed else "") for n, p, t in filters]
    x = np.arange(len(filters))

    def values(column):
        if column not in sums.columns:
            return np.full(len(filters), np.nan)
        return sums[column].to_numpy(dtype=float)

    def grouped(ax, series, fmt):
        width = 0.8 / len(series)
        for j, ((column, label), color) in enumerate(zip(series, _colors(len(series)))):
            bars = ax.bar(x - 0.4 + width * (j + 0.5), values(column), width, color=color, label=label,
                          edgecolor="black", linewidth=0.3)
            ax.bar_label(bars, fmt=fmt, fontsize="x-small", padding=2)
        ax.legend(fontsize="small", loc="upper left")

    grouped(ax_pairs, (("keys_after_range_pruning", "after range pruning"), ("keys_after_bloom", "after bloom"),
                       ("keys_matched", "matched")), "{:,.0f}")
    ax_pairs.set_ylabel("(key, file) pairs")
    ax_pairs.set_title("Candidate pairs: range pruning, bloom, exact")

    bars = ax_fp.bar(x, values("keys_false_positives"), 0.6, color="tab:red", edgecolor="black", linewidth=0.3)
    ax_fp.bar_label(bars, fmt="{:,.0f}", fontsize="small")
    ax_fp.set_ylabel("(key, file) pairs")
    ax_fp.set_title("False positives: passed bloom, not in the file")

    grouped(ax_files, (("files_after_bloom", "opened by the exact check"), ("files_matched", "holding a key")),
            "{:,.0f}")
    for bar, keys in zip(ax_files.containers[0], values("keys_read_by_exact_check")):
        if not math.isnan(keys):
            ax_files.annotate(f"{keys:,.0f} keys read", (bar.get_x() + bar.get_width() / 2, bar.get_height()),
                              xytext=(0, 12), textcoords="offset points", ha="center", fontsize="x-small",
                              rotation=90, va="bottom")
    ax_files.set_ylabel("base files")
    ax_files.set_title("Files the exact check opened")
    ax_files.yaxis.set_major_locator(_integer_locator())

    top = np.nanmax(values("keys_after_range_pruning")) if len(filters) and not np.all(np.isnan(
        values("keys_after_range_pruning"))) else 1
    ax_pairs.set_ylim(0, max(top, 1) * 1.5)  # room for the legend above the bars
    kept = values("files_after_range_pruning")
    files_top = np.nanmax(kept) if len(filters) and not np.all(np.isnan(kept)) else 1
    ax_files.set_ylim(0, max(files_top, 1) * 1.9)  # room above the bars for the keys-read labels
    for ax in (ax_pairs, ax_fp, ax_files):
        ax.set_xticks(x)
        ax.set_xticklabels(labels, rotation=20, ha="right", fontsize="small")
        ax.set_xlabel("bloom filter: num_entries @ fpp" + (" and type" if typed else ""))
        ax.set_xlim(-0.5, len(filters) - 0.5)
        ax.tick_params(labelleft=True)
    return [ax_pairs, ax_fp, ax_files]


# ---------------------------------------------------------------- merge-on-read (04)

_TABLE_COLORS = {"copy-on-write": "tab:blue", "merge-on-read": "tab:orange"}


def _mark_compactions(ax, days: list[int], label: bool) -> None:
    for i, day in enumerate(days):
        ax.axvline(day, color="black", linestyle=":", linewidth=1, label="compaction" if label and i == 0 else None)


def plot_cow_vs_mor(days: pd.DataFrame, axes=None):
    """Write cost against read cost per upsert day, copy-on-write beside merge-on-read (LHBench's refresh
    charts: each round's merge, then what its queries read), from `lab.merge_on_read.side_by_side(...).days`.

    Four panels sharing the days. The exact costs: MB written (merge-on-read's inline compaction
    stacked, hatched); the base files and log files a snapshot query reads after that day; the log
    files it merges into the deepest file slice. Then the seconds of each day's write (one run each,
    the tables taking turns to go first). Days on which a compaction ran are marked with dotted lines.
    """
    ax_bytes, ax_files, ax_write, ax_depth = _new_axes(axes, 4, nrows=2, ncols=2, figsize=(14, 8), sharex=True)
    tables = [t for t in _TABLE_COLORS if t in set(days["table"])]
    width = 0.8 / max(len(tables), 1)
    compacted = sorted(days.loc[days["compacted"], "day"].astype(int).unique())
    for j, table in enumerate(tables):
        rows = days[days["table"] == table].sort_values("day")
        x = rows["day"].to_numpy(dtype=float) - 0.4 + width * (j + 0.5)
        color = _TABLE_COLORS[table]
        upsert = (rows["write_s"] - rows["compaction_s"]).to_numpy(dtype=float)
        ax_write.bar(x, upsert, width, color=color, label=f"{table}: upsert")
        if rows["compacted"].any():
            ax_write.bar(x, rows["compaction_s"], width, bottom=upsert, color=color, hatch="//", edgecolor="black",
                         linewidth=0.3, label=f"{table}: inline compaction (stacked on the upsert)")
        mb_upsert = (rows["upsert_bytes"] / 2**20).to_numpy(dtype=float)
        ax_bytes.bar(x, mb_upsert, width, color=color, label=f"{table}: upsert")
        if rows["compacted"].any():
            ax_bytes.bar(x, rows["compaction_bytes"] / 2**20, width, bottom=mb_upsert, color=color, hatch="//",
                         edgecolor="black", linewidth=0.3, label=f"{table}: inline compaction (stacked on the upsert)")
        files = rows["files_read"].to_numpy(dtype=float)
        ax_files.bar(x, files, width, color=color, label=f"{table}: base files")
        if rows["logs_read"].any():
            ax_files.bar(x, rows["logs_read"], width, bottom=files, color="tab:red", alpha=0.7,
                         label=f"{table}: log files (stacked on its base files)")
        if "max_logs_per_slice" in rows:
            ax_depth.bar(x, rows["max_logs_per_slice"], width, color=color, label=table)
    titles = ((ax_bytes, "Write cost: MB written per day (exact)", "MB written"),
              (ax_files, "Read cost: files a snapshot query reads after the day (exact)", "files"),
              (ax_write, "Write cost: seconds per day (one run each)", "seconds"),
              (ax_depth, "Read cost: log files merged into the deepest file slice (exact)", "log files in one slice"))
    for i, (ax, title, unit) in enumerate(titles):
        _mark_compactions(ax, compacted, label=i == 0)
        ax.set_title(title)
        ax.set_ylabel(unit)
        # Room above the tallest bar for the legend, so that it hides none of them.
        ax.set_ylim(0, max(ax.get_ylim()[1], 1) * 1.5)
        ax.legend(fontsize="small", loc="upper left")
    for ax in (ax_files, ax_depth):
        ax.yaxis.set_major_locator(_integer_locator())
    for ax in (ax_write, ax_depth):
        ax.set_xlabel("upsert day")
    if len(days):
        ticks = sorted(days["day"].astype(int).unique())
        ax_depth.set_xticks(ticks if len(ticks) <= 15 else ticks[::2])
    return [ax_bytes, ax_files, ax_write, ax_depth]


def plot_compaction_sweep(totals: pd.DataFrame, budget: int | None = None, axes=None):
    """How often to compact: per `max.delta.commits` setting (`lab.merge_on_read.sweep_totals`), its exact
    costs over the days, each on its own axis: MB written (upserts and compactions), log files the
    queries read, and the most log files one query merged into one base file (with the read budget
    `budget` as a line, if given). Each setting's compactions are in its name."""
    axes = _new_axes(axes, 3, nrows=1, ncols=3, figsize=(16, 4.8))
    colors = _colors(len(totals))
    x = np.arange(len(totals))
    names = [f"{setting}\n{int(n)} compaction{'s' if int(n) != 1 else ''}"
             for setting, n in totals["compactions"].items()]
    panels = (("mb_written", "{:,.1f}", "MB written, all days", "Bytes written (exact)"),
              ("logs_read", "{:,.0f}", "log files the queries read, all days", "Log files read (exact)"),
              ("max_logs_per_slice", "{:,.0f}", "log files in one file slice, worst query",
               "Deepest file slice a query merged (exact)"))
    for ax, (column, fmt, label, title) in zip(axes, panels):
        if column not in totals:
            ax.set_visible(False)
            continue
        bars = ax.bar(x, totals[column], 0.6, color=colors)
        ax.bar_label(bars, fmt=fmt, fontsize="small")
        ax.set_xticks(x)
        ax.set_xticklabels(names, fontsize="small")
        ax.set_xlabel("hoodie.compact.inline.max.delta.commits")
        ax.set_ylabel(label)
        ax.set_title(title)
        ax.margins(y=0.12)
        if column != "mb_written":
            ax.yaxis.set_major_locator(_integer_locator())
    if budget is not None and "max_logs_per_slice" in totals:
        axes[2].axhline(budget, color="black", linestyle="--", linewidth=1, label=f"read budget: {budget}")
        axes[2].legend(fontsize="small", loc="upper left")
    return list(axes)


# ---------------------------------------------------------------- concurrent writers

_OUTCOME_MARK = {"committed": ("o", "tab:green")}  # anything else (a conflict, a refusal): a red cross


def plot_race(runs, ax=None, title: str | None = None):
    """Two writers' race (`lab.concurrency.race`), one lane each on a time axis: planning and writing
    as bars, the time writer A was held as a hatched gap, where each instant started (its instant
    time) as a tick and how each writer ended as a mark at its end."""
    ax = _new_ax(ax)
    lanes = {r.writer: i for i, r in enumerate(sorted(runs, key=lambda r: r.writer, reverse=True))}
    for r in runs:
        y = lanes[r.writer]
        held_from = r.inflight_s if r.released_s is not None and r.inflight_s is not None else None
        if held_from is not None:
            ax.barh(y, held_from - r.began_s, left=r.began_s, height=0.45, color="tab:blue", alpha=0.6)
            ax.barh(y, r.released_s - held_from, left=held_from, height=0.45, color="none", edgecolor="grey",
                    hatch="//", label="held (instant inflight, nothing written)")
            ax.barh(y, r.ended_s - r.released_s, left=r.released_s, height=0.45, color="tab:blue", alpha=0.6)
        else:
            ax.barh(y, r.ended_s - r.began_s, left=r.began_s, height=0.45, color="tab:blue", alpha=0.6)
        if r.inflight_s is not None:
            ax.plot([r.inflight_s] * 2, [y - 0.3, y + 0.3], color="black", lw=1.5)
            ax.annotate("instant inflight" if r.released_s is None else "instant inflight, held",
                        (r.inflight_s, y + 0.3), xytext=(2, 2),
                        textcoords="offset points", fontsize="small")
        marker, color = _OUTCOME_MARK.get(r.outcome, ("X", "tab:red"))
        ax.plot(r.ended_s, y, marker=marker, color=color, markersize=11, zorder=3)
        ax.annotate(r.outcome, (r.ended_s, y), xytext=(10, -4), textcoords="offset points")
    ax.set_yticks(list(lanes.values()))
    ax.set_yticklabels([f"writer {w}" for w in lanes])
    ax.set_ylim(-0.7, len(lanes) - 0.3)
    right = max(r.ended_s for r in runs)
    ax.set_xlim(0, right * 1.25 + 0.1)  # room for the outcome's name
    ax.set_xlabel("seconds since the race began")
    handles, labels = ax.get_legend_handles_labels()
    if handles:
        ax.legend(handles[:1], labels[:1], loc="lower right", fontsize="small")
    ax.set_title(title or "Two writers, one table")
    return ax


# ---------------------------------------------------------------- choosing an index (06)

def plot_index_reads_and_rewrites(runs: pd.DataFrame, axes=None):
    """`indexes.compare`'s runs, one group of bars per workload, one bar per index: what the tag step
    read (record keys from data files; for RECORD_INDEX the index entries it read instead, hatched),
    and the rows the upsert rewrote (base files written as a new slice of an existing file group)."""
    from matplotlib.ticker import FuncFormatter

    axes = _new_axes(axes, 2, nrows=1, ncols=2, figsize=(15, 4.8))
    first = runs.drop_duplicates(["workload", "index"]).set_index(["workload", "index"])
    workloads = list(dict.fromkeys(runs.workload))
    indexes = list(dict.fromkeys(runs["index"]))
    width = 0.8 / len(indexes)
    tallest = [0.0, 0.0]
    for i, (index, color) in enumerate(zip(indexes, _colors(len(indexes)))):
        x = np.arange(len(workloads)) + (i - (len(indexes) - 1) / 2) * width
        entries = [first.loc[(w, index)].index_entries_read for w in workloads]
        by_entries = [not _missing(e) for e in entries]
        read = [float(e) if has else float(first.loc[(w, index)].keys_read or 0)
                for w, e, has in zip(workloads, entries, by_entries)]
        rewritten = [float(first.loc[(w, index)].rows_rewritten) for w in workloads]
        label = f"{index} (index entries)" if any(by_entries) else index
        for k, (ax, values, hatch) in enumerate(((axes[0], read, "//" if any(by_entries) else None),
                                                 (axes[1], rewritten, None))):
            tallest[k] = max(tallest[k], *values)
            bars = ax.bar(x, values, width, color=color, label=label, hatch=hatch)
            for bar, n in zip(bars, values):
                ax.annotate(f"{int(n):,}", (bar.get_x() + bar.get_width() / 2, n), ha="center", va="bottom",
                            fontsize="x-small", rotation=90)
    for ax, top, ylabel, title in ((axes[0], tallest[0], "record keys (or index entries) read",
                                    "what each index's tag step read"),
                                   (axes[1], tallest[1], "rows rewritten (copy-on-write)", "what each upsert rewrote")):
        ax.set_xticks(range(len(workloads)))
        ax.set_xticklabels(workloads)
        ax.set_xlabel("workload")
        ax.yaxis.set_major_formatter(FuncFormatter(lambda v, _: f"{v:,.0f}"))
        ax.set_ylabel(ylabel)
        ax.set_title(title)
        # Headroom for the tallest bar's count, written upright above it (about a third of the axis).
        ax.set_ylim(0, top * 1.5 if top > 0 else 1)
    handles, labels = axes[0].get_legend_handles_labels()
    axes[0].figure.legend(handles, labels, loc="outside lower center", ncols=len(labels), fontsize="small")
    return axes


# ---------------------------------------------------------------- incremental pipelines (07)

def plot_incremental_reads(days: pd.DataFrame, ax=None):
    """`incremental.daily_reads`: per day, the file slices an incremental read of that day's commit
    opened against those a snapshot read opens."""
    ax = _new_ax(ax)
    ax.plot(days.day, days.files_in_snapshot, marker="o", color="tab:gray", label="snapshot read")
    ax.bar(days.day, days.files_read, color="tab:blue", alpha=0.8, label="incremental read of the day's commit")
    ax.set_xlabel("upsert day")
    ax.set_ylabel("file slices opened")
    ax.set_ylim(bottom=0)
    ax.xaxis.set_major_locator(_integer_locator())
    ax.yaxis.set_major_locator(_integer_locator())
    ax.set_title("what a downstream job reads each day")
    ax.legend(loc="upper left", fontsize="small")
    return ax


def _integer_locator():
    from matplotlib.ticker import MaxNLocator

    return MaxNLocator(integer=True)


def plot_bucket_split(split, days: int = 5, axes=None):
    """`indexes.bucket_split`: each table's largest base file in its last `days` day partitions (the
    fixed count's, and the ring's before and after the resize) against `max_file_size` and the split
    threshold; and the surging day's hash ring before (inner) and after (outer) the resize, each
    bucket an arc as wide as its share of the hashes, labelled with its rows, a split bucket's two
    halves in its colour."""
    from matplotlib.patches import Patch, Wedge

    from labformat.index.consistent_bucket import HASH_MASK

    axes = _new_axes(axes, 2, nrows=1, ncols=2, figsize=(14, 5), width_ratios=[3, 2])
    frame = split.buckets
    partitions = sorted(frame.partition.unique())[-days:]
    fixed, ring = frame.table.unique()[0], frame.table.unique()[-1]
    series = (("fixed bucket count", fixed, "before the resize", "tab:red"),
              ("ring, before the resize", ring, "before the resize", "tab:gray"),
              ("ring, after the resize", ring, "after the resize", "tab:blue"))
    width = 0.8 / len(series)
    x = np.arange(len(partitions))
    for i, (label, table, moment, color) in enumerate(series):
        chosen = frame[(frame.table == table) & (frame.moment == moment)].groupby("partition").KB.max()
        values = [float(chosen.get(p, 0.0)) for p in partitions]
        bars = axes[0].bar(x + (i - (len(series) - 1) / 2) * width, values, width, color=color, label=label)
        for bar, kb in zip(bars, values):
            axes[0].annotate(f"{kb:,.0f}", (bar.get_x() + bar.get_width() / 2, kb), ha="center", va="bottom",
                             fontsize="x-small")
    for limit, text in ((split.max_file_size, "max_file_size"),
                        (split.split_threshold * split.max_file_size, f"split threshold ({split.split_threshold:g}x)")):
        axes[0].axhline(limit / 1024, color="black", linestyle="--", linewidth=0.8)
        # Beyond the right edge, where no bar hides it.
        axes[0].annotate(text, (1.0, limit / 1024), xycoords=("axes fraction", "data"), xytext=(4, 0),
                         textcoords="offset points", ha="left", va="center", fontsize="small", annotation_clip=False)
    axes[0].set_xticks(x)
    axes[0].set_xticklabels([p.rsplit("=", 1)[-1] + ("\n(fleet doubled)" if p == split.hot_partition else "")
                             for p in partitions])
    axes[0].set_xlabel("day partition")
    axes[0].set_ylabel("largest base file (KB)")
    axes[0].set_ylim(bottom=0)
    axes[0].margins(y=0.2)
    days_in_table = frame.partition.nunique()
    axes[0].set_title("a bucket count fixed at creation, and the ring's resize"
                      + (f"\n(the last {len(partitions)} of the table's {days_in_table} day partitions)"
                         if len(partitions) < days_in_table else ""))
    axes[0].legend(loc="upper left", fontsize="small")

    ax, palette, space = axes[1], _colors(10), HASH_MASK + 1
    before = split.rings[split.rings.moment == "before the resize"].sort_values("node")
    for radius, moment in ((0.65, "before the resize"), (1.0, "after the resize")):
        nodes = split.rings[split.rings.moment == moment].sort_values("node")
        low = int(nodes.node.iloc[-1]) - space  # the first node's range wraps round from the last node's value
        for row in nodes.itertuples(index=False):
            high = int(row.node)
            # Hash h sits at 90 - 360 h / space degrees: clockwise from the top.
            theta1, theta2 = 90 - 360 * high / space, 90 - 360 * low / space
            parent = int(np.searchsorted(before.node.to_numpy(), high, side="left")) % len(before)
            ax.add_patch(Wedge((0, 0), radius, theta1, theta2, width=0.3, facecolor=palette[parent % 10],
                               edgecolor="white", linewidth=2, alpha=0.5 if radius < 1 else 0.9))
            middle = np.radians((theta1 + theta2) / 2)
            ax.annotate(f"{int(row.rows):,}", ((radius - 0.15) * np.cos(middle), (radius - 0.15) * np.sin(middle)),
                        ha="center", va="center", fontsize="small")
            low = high
    ax.set_xlim(-1.1, 1.1)
    ax.set_ylim(-1.1, 1.1)
    ax.set_aspect("equal")
    ax.axis("off")
    ax.legend(handles=[Patch(facecolor="grey", alpha=0.5, label="inner: before the resize"),
                       Patch(facecolor="grey", alpha=0.9, label="outer: after the resize")],
              loc="upper center", bbox_to_anchor=(0.5, 0.0), fontsize="small", ncols=2)
    ax.set_title(f"the hash ring of {split.hot_partition.rsplit('=', 1)[-1]}: rows per bucket\n"
                 "(an arc's width is its share of the XXH32 hashes)")
    return axes


def plot_layouts(frame: pd.DataFrame, ax=None):
    """Files each query reads (groups) on each clustering layout (bars), from `Layouts.frame()`; the
    table before clustering is left out (its many small files would flatten the rest) and named in
    the title."""
    ax = _new_ax(ax)
    clustered = frame.drop(index="before clustering", errors="ignore")
    queries = [c for c in frame.columns if c != "files"]
    x = np.arange(len(queries))
    width = 0.8 / max(len(clustered), 1)
    for k, (label, row) in enumerate(clustered.iterrows()):
        bars = ax.bar(x + (k - (len(clustered) - 1) / 2) * width, [row[q] for q in queries], width,
                      label=label, color=_colors(len(clustered))[k])
        ax.bar_label(bars, fontsize="small")
    files = int(clustered["files"].max()) if len(clustered) else 0
    ax.axhline(files, color="gray", linestyle=":", linewidth=1)
    ax.annotate(f"{files} files per layout", (x[-1] + 0.4, files), xytext=(0, 3), textcoords="offset points",
                ha="right", va="bottom", fontsize="small", color="gray")
    ax.set_xticks(x)
    ax.set_xticklabels(queries)
    ax.set_ylim(0, files * 1.15 if files else 1)
    ax.yaxis.set_major_locator(_integer_locator())
    ax.set_ylabel("base files read")
    before = f" (before clustering: {int(frame.loc['before clustering', 'files'])} small files)" \
        if "before clustering" in frame.index else ""
    ax.set_title("Files read per query, by clustering layout" + before)
    ax.legend(fontsize="small", loc="upper center", bbox_to_anchor=(0.5, -0.1), ncols=len(clustered))
    return ax


_FORMAT_COLORS = {"labformat": "tab:blue", "delta-rs": "tab:green", "pyiceberg": "tab:purple"}
_FORMAT_FOLDERS = {"labformat": "labformat: .hoodie/ (no archival)", "delta-rs": "delta-rs: _delta_log/",
                   "pyiceberg": "pyiceberg: metadata/"}


def _commit_axis(ax) -> None:
    ax.set_xlabel("commit (0: the history's load, then one a day)")
    ax.set_ylim(bottom=0)
    ax.xaxis.set_major_locator(_integer_locator())
    ax.yaxis.set_major_locator(_integer_locator())


def plot_metadata_kept(commits: pd.DataFrame, ax=None):
    """Per format (`ThreeFormats.commits`), the metadata files it keeps beside its data after each commit."""
    ax = _new_ax(ax)
    for fmt, rows in commits.groupby("format", sort=False):
        ax.plot(rows["commit"], rows["metadata files"], marker="o", markersize=3, color=_FORMAT_COLORS.get(fmt),
                label=_FORMAT_FOLDERS.get(fmt, fmt))
    _commit_axis(ax)
    ax.set_ylabel("metadata files kept (count)")
    ax.set_title("Metadata files each format keeps beside its data, per commit")
    ax.legend(fontsize="small", loc="upper left")
    return ax


def plot_planner_files(commits: pd.DataFrame, checkpoints=(), compactions=(), ax=None):
    """Per format (`ThreeFormats.commits`), the files a query planner reads to find the data files after
    each commit; delta-rs's checkpoints and labformat's compactions marked by vertical lines."""
    ax = _new_ax(ax)
    for fmt, rows in commits.groupby("format", sort=False):
        ax.plot(rows["commit"], rows["planner files"], marker="o", markersize=3, color=_FORMAT_COLORS.get(fmt),
                label=fmt)
    for i, commit in enumerate(checkpoints):
        ax.axvline(commit, color=_FORMAT_COLORS["delta-rs"], linestyle=":", linewidth=1,
                   label="delta-rs checkpoint" if i == 0 else None)
    for i, commit in enumerate(compactions):
        ax.axvline(commit, color=_FORMAT_COLORS["labformat"], linestyle="--", linewidth=0.6, alpha=0.6,
                   label="labformat compaction" if i == 0 else None)
    _commit_axis(ax)
    ax.set_ylabel("files read to plan a query (count)")
    ax.set_title("Files a planner reads to find the data files, per commit")
    ax.legend(fontsize="small", loc="upper left")
    return ax


def plot_first_upserts(first: pd.DataFrame, ax=None):
    """Per day of `sweeps.first_upserts`: the records step 6 planned per new file group from step 5's
    estimate (labelled with the estimate's source) beside the inserts the day packed into new file
    groups and into small files."""
    ax = _new_ax(ax)
    x = np.arange(len(first))
    width = 0.4
    planned = ax.bar(x - width / 2, first["records_per_new_file_planned"], width, color="tab:gray",
                     label="records planned per new file (max_file_size / estimate)")
    ax.bar_label(planned, labels=[f"{int(p):,}\n({int(e)} B a record, {'default' if 'estimate' in s else 'history'})"
                                  for p, e, s in zip(first["records_per_new_file_planned"],
                                                     first["record_size_estimate"], first["estimate_from"])],
                 fontsize="small")
    new = first["inserts"] - first["small_file_inserts"]
    into_new = ax.bar(x + width / 2, new, width, color="tab:orange", label="inserts into new file groups")
    into_small = ax.bar(x + width / 2, first["small_file_inserts"], width, bottom=new, color="tab:blue",
                        label="inserts packed into small files")
    ax.bar_label(into_new, labels=[f"{int(n)} new files" if n else "" for n in first["files_created"]],
                 label_type="center", fontsize="small")
    ax.bar_label(into_small, labels=[f"{int(n)} small files" if i else "" for n, i in
                                     zip(first["small_files"], first["small_file_inserts"])],
                 label_type="center", fontsize="small", color="white")
    ax.set_xticks(x)
    ax.set_xticklabels([f"day {d}" for d in first["day"]])
    ax.set_yscale("log")
    # Room above the tallest bar for its two-line label (a log axis would otherwise cut it).
    tallest = max(float(first["records_per_new_file_planned"].max()), float(first["inserts"].max()), 1.0)
    ax.set_ylim(top=tallest * 8)
    ax.set_ylabel("records (log scale)")
    ax.set_title("A table's first upserts: step 5's estimate and where step 6 put the inserts")
    ax.legend(fontsize="small", loc="upper center", bbox_to_anchor=(0.5, -0.08), ncols=3)
    return ax
