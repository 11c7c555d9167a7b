"""The lab's charts: pure matplotlib functions drawing frames (`lab/frames.py`, the reports' `to_pandas`) onto axes."""

from __future__ import annotations

import math
import re
from datetime import datetime

import numpy as np
import pandas as pd

from labformat.lab.projection import CLUSTER_CORES
from labformat.model.report import UPSERT_STEPS
from labformat.spark.ui import assign_lanes

# Monotonic drone keys start with the reading's minute: 202401150930_drone0042.
_TIME_PREFIX = re.compile(r"^(\d{12})")
_STEP_ORDER = UPSERT_STEPS
FUNNEL_COLUMNS = ("files_in_snapshot", "after_range_pruning", "after_bloom", "matched", "false_positives")
# Columns of a max_file_size sweep, in panel order, with their axis labels.
TRADEOFF_METRICS = (("rows_rewritten", "rows copy-on-write rewrote"), ("write_stage_tasks", "write tasks"),
                    ("projected_write_stage_s", f"write stage on {CLUSTER_CORES} cores, projected (s)"),
                    ("files_opened", "files a full-table query opens"), ("query_s", "full-table query (s)"),
                    ("planning_s", "of which planning (s)"))


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


# ---------------------------------------------------------------- 4. max_file_size sweep

def _size_mb(value) -> float:
    from labformat.config import parse_size

    if isinstance(value, (int, np.integer)) or isinstance(value, str):
        return parse_size(int(value) if isinstance(value, np.integer) else value) / 1024**2
    return float(value) / 1024**2


def plot_file_size_tradeoff(sweep: pd.DataFrame, axes=None):
    """Small multiples over a file-size sweep (`sweeps.file_size_sweep`), one panel per
    `TRADEOFF_METRICS` column against max_file_size in MB (log scale): what an upsert rewrites and
    how many write tasks it runs on one side, what a query opens and plans on the other.

    Takes `axes` (one Axes per metric, e.g. the array from `plt.subplots(2, 3)`) instead of one
    `ax`: quantities with different units read better side by side than on twin axes.
    `max_file_size` may be bytes or a size string ("24KB", "128MB"). A metric column that is
    absent leaves its panel saying so. With several runs per size every run is a dot and the line
    joins the medians. Returns the axes.
    """
    axes = _new_axes(axes, len(TRADEOFF_METRICS), nrows=2, ncols=3, figsize=(13, 6.5), sharex=True)
    mb = sweep["max_file_size"].map(_size_mb)
    for ax, (column, label) in zip(axes, TRADEOFF_METRICS):
        ax.set_title(label)
        ax.set_xscale("log")
        ax.set_xlabel("max_file_size (MB)")
        if column not in sweep.columns:
            ax.text(0.5, 0.5, f"no '{column}' column", transform=ax.transAxes, ha="center", va="center")
            continue
        frame = pd.DataFrame({"mb": mb, "value": sweep[column]}).dropna()
        medians = frame.groupby("mb")["value"].median()
        ax.plot(medians.index, medians.values, marker="o", label="median" if len(frame) > len(medians) else None)
        if len(frame) > len(medians):
            ax.scatter(frame["mb"], frame["value"], s=12, alpha=0.5, color="0.3", label="runs")
            ax.legend(fontsize="small")
        ax.set_ylim(bottom=0, top=max(frame["value"].max() * 1.15, 1e-9) if len(frame) else None)
        ax.set_xticks(medians.index)
        # Two significant digits: scaled sizes are computed ("0.47"), not round numbers.
        ax.set_xticklabels([f"{v:.2g}" for v in medians.index])
        ax.minorticks_off()
        ax.tick_params(labelbottom=True)
    return axes


# ---------------------------------------------------------------- 5. query skipping

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
    for k, (mode, color) in enumerate((("on", "tab:blue"), ("off", "tab:orange"))):
        part = frame[frame["skipping"] == mode].set_index("query").reindex(queries)
        whiskers = None
        if {"min_s", "max_s"} <= set(part.columns):
            whiskers = [part["median_s"] - part["min_s"], part["max_s"] - part["median_s"]]
        ax_time.barh(y - width / 2 + k * width, part["median_s"], width, xerr=whiskers, color=color,
                     label=f"skipping {mode}", capsize=2)
    ax_time.set_yticks(y)
    ax_time.set_yticklabels(queries)
    ax_time.invert_yaxis()
    ax_time.set_xlabel("median seconds")
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
    matched by the exact check (log scale: the stages differ by orders of magnitude)."""
    ax = _new_ax(ax)
    columns = [("keys_after_range_pruning", "after range pruning"), ("keys_after_bloom", "after bloom"),
               ("keys_matched", "matched (exact check)")]
    x = days["day"].to_numpy() if "day" in days.columns else np.arange(1, len(days) + 1)
    width = 0.8 / len(columns)
    for j, ((column, label), color) in enumerate(zip(columns, _colors(len(columns)))):
        values = days[column].astype(float).to_numpy()
        ax.bar(x - 0.4 + width * (j + 0.5), np.where(values > 0, values, np.nan), width, color=color, label=label)
    ax.set_yscale("log")
    from matplotlib.ticker import FuncFormatter, LogLocator, NullFormatter

    # 1, 2 and 5 of each decade labelled: the stages span a few decades, and a decade's label alone
    # left three numbers on the axis.
    ax.yaxis.set_major_locator(LogLocator(base=10, subs=(1.0, 2.0, 5.0)))
    ax.yaxis.set_major_formatter(FuncFormatter(lambda v, _: f"{v:,.0f}"))
    ax.yaxis.set_minor_formatter(NullFormatter())
    ax.set_ylabel("(key, file) pairs")
    ax.set_xlabel("upsert day")
    ax.xaxis.get_major_locator().set_params(integer=True)
    ax.set_title("Key-level funnel per upsert: what the bloom filters rule out")
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
    ax.set_title(title or f"{column.replace('_', ' ')}: {runs} runs each, median and min-max")
    return ax


def plot_index_comparison(frame: pd.DataFrame, axes=None):
    """`sweeps.compare_indexes_timed`'s runs: the tag step, the whole upsert (its seconds spread, as
    `plot_spread`) and the files each index made the upsert rewrite, the BUCKET table's bucket count
    named: the tag step alone flatters an index that makes the write step rewrite more."""
    axes = _new_axes(axes, 3, nrows=1, ncols=3, figsize=(15, 4))
    plot_spread(frame, "index", "tag_s", ax=axes[0], title="tag step (s)")
    plot_spread(frame, "index", "seconds", ax=axes[1], title="whole upsert (s)")
    per_index = frame.groupby("index").agg(files_rewritten=("files_rewritten", "max"),
                                           bucket_num=("bucket_num", "max")).sort_index()
    labels = [f"{i}\n{int(row.bucket_num)} buckets" if not _missing(row.bucket_num) else i
              for i, row in per_index.iterrows()]
    axes[2].bar(range(len(per_index)), per_index.files_rewritten, color="tab:orange", alpha=0.7)
    for x, n in enumerate(per_index.files_rewritten):
        axes[2].annotate(str(int(n)), (x, n), ha="center", va="bottom", fontsize="small")
    axes[2].set_xticks(range(len(per_index)))
    axes[2].set_xticklabels(labels)
    axes[2].set_ylabel("base files rewritten")
    axes[2].set_title("files the upsert rewrote")
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
        segments.append((f"{len(minor)} other steps", days[minor].fillna(0).sum(axis=1).to_numpy(dtype=float),
                         "lightgrey"))
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


def plot_insert_plan(plan: pd.DataFrame, options: dict, ax=None):
    """Steps 4-6 of one upsert, per base file it wrote (a `frames.insert_plan` frame, in its order):
    the KB the file held before (grey), what the upsert added to it (the small files that took
    inserts, the new file groups, the files that took only updates, each its colour), the inserts
    it took above the bar, and `max_file_size` and `small_file_limit` as lines."""
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
            ax.bar(x[chosen], added[chosen], 0.8, bottom=before[chosen], color=color, edgecolor="black",
                   linewidth=0.3, label=f"KB added: {kind}")
    for xi, top, inserts in zip(x, before + added, plan["inserts"]):
        if inserts:
            ax.annotate(f"{inserts:,}", (xi, top), xytext=(0, 2), textcoords="offset points", ha="center",
                        fontsize="x-small", rotation=90, va="bottom")
    for option, style, label in (("max_file_size", "--", "max_file_size"), ("small_file_limit", ":", "small_file_limit")):
        size = parse_size(options.get(option, 0))
        if size:
            ax.axhline(size / 1024, color="tab:red", linestyle=style, linewidth=1.2, label=label)
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
    """Three panels over a `bloom_filter_sweep` frame, one group of bars per filter size
    (num_entries @ fpp, in the frame's order), summed over its rows per filter:

    - (key, file) pairs after range pruning, after the bloom filter, really matched;
    - false-positive pairs (after bloom, not matched), on the same y axis as the first panel;
    - files the exact check opened (after bloom) beside the files really holding a key, each
      opened bar labelled with the keys the exact check read from them.

    Takes `axes` (three Axes, e.g. from `plt.subplots(1, 3)`). Returns the three axes.
    """
    ax_pairs, ax_fp, ax_files = _new_axes(axes, 3, nrows=1, ncols=3, figsize=(14, 4.5))
    ax_fp.sharey(ax_pairs)
    filters = list(dict.fromkeys(zip(frame["num_entries"], frame["fpp"])))
    sums = frame.groupby(["num_entries", "fpp"], sort=False).sum(numeric_only=True, min_count=1)
    sums = sums.reindex(pd.MultiIndex.from_tuples(filters, names=["num_entries", "fpp"])) if filters else sums
    labels = [bloom_filter_label(n, p) for n, p in filters]
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
        ax.set_xlabel("bloom filter: num_entries @ fpp")
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
    charts: each round's merge, then its queries), from `lab.merge_on_read.side_by_side(...).days`.

    Four panels sharing the days: seconds of each day's write (merge-on-read's inline compaction
    stacked, hatched) and of the snapshot query after it (one run each); MB written; the base files
    and log files that query read. Days on which a compaction ran are marked with dotted lines.
    """
    ax_write, ax_read, ax_bytes, ax_files = _new_axes(axes, 4, nrows=2, ncols=2, figsize=(14, 8), sharex=True)
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
        ax_read.bar(x, rows["query_s"], width, color=color, label=table)
        mb_upsert = (rows["upsert_bytes"] / 2**20).to_numpy(dtype=float)
        ax_bytes.bar(x, mb_upsert, width, color=color, label=f"{table}: upsert")
        if rows["compacted"].any():
            ax_bytes.bar(x, rows["compaction_bytes"] / 2**20, width, bottom=mb_upsert, color=color, hatch="//",
                         edgecolor="black", linewidth=0.3, label=f"{table}: compaction (stacked on the upsert)")
        files = rows["files_read"].to_numpy(dtype=float)
        ax_files.bar(x, files, width, color=color, label=f"{table}: base files")
        if rows["logs_read"].any():
            ax_files.bar(x, rows["logs_read"], width, bottom=files, color="tab:red", alpha=0.7,
                         label=f"{table}: log files (stacked on its base files)")
    titles = ((ax_write, "Write cost: seconds per day (one run each)", "seconds"),
              (ax_read, "Read cost: the snapshot query after each day (one run each)", "seconds"),
              (ax_bytes, "Write cost: MB written per day", "MB"),
              (ax_files, "Read cost: files the snapshot query read", "files"))
    for i, (ax, title, unit) in enumerate(titles):
        _mark_compactions(ax, compacted, label=i == 0)
        ax.set_title(title)
        ax.set_ylabel(unit)
        ax.legend(fontsize="small", loc="upper left")
    for ax in (ax_bytes, ax_files):
        ax.set_xlabel("upsert day")
    if len(days):
        ticks = sorted(days["day"].astype(int).unique())
        ax_files.set_xticks(ticks if len(ticks) <= 15 else ticks[::2])
    return [ax_write, ax_read, ax_bytes, ax_files]


def plot_compaction_sweep(totals: pd.DataFrame, axes=None):
    """How often to compact: per `max.delta.commits` setting (`lab.merge_on_read.sweep_totals`), the
    write seconds of the days (upserts and compactions) against the queries' mean seconds, one point
    each; beside it the exact costs, each on its own axis: MB written and log files read over the days."""
    ax_trade, ax_written, ax_logs = _new_axes(axes, 3, nrows=1, ncols=3, figsize=(15, 4.5),
                                              gridspec_kw={"width_ratios": [1.4, 1, 1]})
    colors = _colors(len(totals))
    for (setting, row), color in zip(totals.iterrows(), colors):
        ax_trade.scatter(row["write_s"], row["mean_query_s"], s=80, color=color, edgecolor="black", zorder=3)
        ax_trade.annotate(f"{setting} ({int(row['compactions'])} compactions)", (row["write_s"], row["mean_query_s"]),
                          xytext=(8, 4), textcoords="offset points", fontsize="small")
    ax_trade.set_xlabel("seconds writing: upserts and inline compactions, all days")
    ax_trade.set_ylabel("mean seconds of the snapshot query")
    ax_trade.set_title("Compaction frequency: write time against query time")
    ax_trade.margins(0.3)
    x = np.arange(len(totals))
    for ax, column, fmt, label in ((ax_written, "mb_written", "{:,.1f}", "MB written, all days"),
                                   (ax_logs, "logs_read", "{:,.0f}", "log files the queries read, all days")):
        bars = ax.bar(x, totals[column], 0.6, color=colors)
        ax.bar_label(bars, fmt=fmt, fontsize="small")
        ax.set_xticks(x)
        ax.set_xticklabels(list(totals.index))
        ax.set_xlabel("hoodie.compact.inline.max.delta.commits")
        ax.set_ylabel(label)
        ax.margins(y=0.12)
    ax_written.set_title("Bytes written (exact)")
    ax_logs.set_title("Log files read (exact)")
    return [ax_trade, ax_written, ax_logs]


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

def plot_index_choice(runs: pd.DataFrame, axes=None):
    """`indexes.compare`'s runs, one group of bars per workload, one bar per index: what the tag step
    read (record keys from data files; for RECORD_INDEX the index entries it read instead, hatched),
    and, for the timed workloads only (a `timed` column; all without one), the whole upsert's median
    seconds with min-max whiskers, each workload's runs under its name."""
    axes = _new_axes(axes, 2, nrows=1, ncols=2, figsize=(15, 4.8))
    first = runs[runs.repeat == 1].set_index(["workload", "index"])
    workloads = list(dict.fromkeys(runs.workload))
    timed_runs = runs[runs["timed"].astype(bool)] if "timed" in runs.columns else runs
    timed = list(dict.fromkeys(timed_runs.workload))
    indexes = list(dict.fromkeys(runs["index"]))
    width = 0.8 / len(indexes)
    seconds = timed_runs.groupby(["workload", "index"]).seconds
    low, mid, high = seconds.min(), seconds.median(), seconds.max()
    for i, (index, color) in enumerate(zip(indexes, _colors(len(indexes)))):
        offset = (i - (len(indexes) - 1) / 2) * width
        x = np.arange(len(workloads)) + offset
        entries = [first.loc[(w, index)].index_entries_read for w in workloads]
        by_entries = [not _missing(e) for e in entries]
        read = [float(e) if has else float(first.loc[(w, index)].keys_read or 0)
                for w, e, has in zip(workloads, entries, by_entries)]
        label = f"{index} (index entries)" if any(by_entries) else index
        bars = axes[0].bar(x, read, width, color=color, label=label, hatch="//" if any(by_entries) else None)
        for bar, n in zip(bars, read):
            axes[0].annotate(f"{int(n):,}", (bar.get_x() + bar.get_width() / 2, n), ha="center", va="bottom",
                             fontsize="x-small", rotation=90)
        xt = np.arange(len(timed)) + offset
        m = [mid[(w, index)] for w in timed]
        axes[1].bar(xt, m, width, color=color, label=index)
        axes[1].errorbar(xt, m, yerr=[np.subtract(m, [low[(w, index)] for w in timed]),
                                      np.subtract([high[(w, index)] for w in timed], m)],
                         fmt="none", ecolor="black", capsize=2, linewidth=0.8)
    repeats = timed_runs.groupby("workload").repeat.nunique()
    for ax, names, labels in ((axes[0], workloads, workloads),
                              (axes[1], timed, [f"{w}\n({repeats[w]} run{'s' if repeats[w] != 1 else ''})" for w in timed])):
        ax.set_xticks(range(len(names)))
        ax.set_xticklabels(labels)
    from matplotlib.ticker import FuncFormatter

    axes[0].yaxis.set_major_formatter(FuncFormatter(lambda v, _: f"{v:,.0f}"))
    axes[0].set_ylabel("keys read by the tag step")
    axes[0].set_title("what each index read to tag the batch")
    axes[0].margins(y=0.15)
    axes[1].set_ylabel("seconds (median, min-max)")
    axes[1].set_title("the whole upsert (timed workloads)")
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


def plot_bucket_growth(steps: pd.DataFrame, max_file_size: int, split_threshold: float = 2.0, axes=None):
    """`indexes.bucket_growth`'s steps: buckets per table after each step, and each table's largest
    base file against `max_file_size` and the split threshold (dashed lines)."""
    axes = _new_axes(axes, 2, nrows=1, ncols=2, figsize=(13, 4.2))
    labels = list(dict.fromkeys(steps.step))
    tables = list(dict.fromkeys(steps.table))
    x = np.arange(len(labels))
    for table, color, marker in zip(tables, _colors(len(tables)), "os"):
        rows = steps[steps.table == table].set_index("step").loc[labels]
        axes[0].plot(x, rows.buckets, marker=marker, color=color, label=table)
        axes[1].plot(x, rows["largest base file KB"] / 1024, marker=marker, color=color, label=table)
    for limit, text in ((max_file_size, "max_file_size"), (split_threshold * max_file_size, "split threshold")):
        axes[1].axhline(limit / 1024**2, color="grey", linestyle="--", linewidth=0.8)
        axes[1].annotate(text, (x[0], limit / 1024**2), xytext=(0, 3), textcoords="offset points",
                         fontsize="small", color="grey")
    for ax in axes:
        ax.set_xticks(x)
        ax.set_xticklabels(labels)
        ax.set_ylim(bottom=0)
    axes[0].yaxis.get_major_locator().set_params(integer=True)
    axes[0].set_ylabel("buckets (file groups)")
    axes[0].set_title("bucket count after each step")
    axes[1].set_ylabel("MB")
    axes[1].set_title("largest base file")
    handles, names = axes[0].get_legend_handles_labels()
    axes[0].figure.legend(handles, names, loc="outside lower center", ncols=len(names), fontsize="small")
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
    ax.set_ylabel("records (log scale)")
    ax.set_title("A table's first upserts: step 5's estimate and where step 6 put the inserts")
    ax.legend(fontsize="small", loc="upper center", bbox_to_anchor=(0.5, -0.08), ncols=3)
    return ax
