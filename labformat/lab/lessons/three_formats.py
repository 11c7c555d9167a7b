"""Notebook 08's rules: what labformat, delta-rs and pyiceberg keep and read per commit, their merge-on-read writes, skipping."""

from __future__ import annotations

from labformat.lab.claims import rule

# delta-rs writes a checkpoint after every `interval` commits; a planner then reads `_last_checkpoint`,
# the checkpoint (one part for tables this size) and the commits after it.
AFTER_CHECKPOINT = 3


def _listed(counts: list[int]) -> str:
    return ", ".join(str(int(n)) for n in counts)


@rule("every delta-rs checkpoint cuts the files its planner reads back to at most 3, so planning never reads more "
      "than checkpointInterval + 1 files while the log keeps one file per commit (a sawtooth)",
      absent=[dict(planner=list(range(1, 22)), checkpoints=[], commit_files=21, interval=10),
              dict(planner=list(range(1, 10)) + [5] + list(range(6, 17)), checkpoints=[9], commit_files=21, interval=10),
              dict(planner=[1, 2, 3, 4, 5], checkpoints=[1, 3], commit_files=5, interval=2),
              dict(planner=[1, 2, 3, 2], checkpoints=[1, 3], commit_files=4, interval=3)],
      present=[dict(planner=list(range(1, 10)) + list(range(2, 12)) + [2, 3], checkpoints=[9, 19], commit_files=21,
                    interval=10),
               dict(planner=[1, 2, 3, 2], checkpoints=[1, 3], commit_files=4, interval=2)])
def delta_checkpoints_cut_planning(planner: list[int], checkpoints: list[int], commit_files: int,
                                   interval: int) -> tuple[bool, str]:
    """`planner`: files read to plan after each commit (the load is commit 0); `checkpoints`: the commits
    after which delta-rs wrote one (it does after versions interval - 1, 2 x interval - 1, ...)."""
    expected = len(planner) // interval
    held = (expected >= 1 and len(checkpoints) == expected and all(planner[c] <= AFTER_CHECKPOINT for c in checkpoints)
            and max(planner) <= interval + 1 < commit_files)
    return held, (f"files read to plan, commit by commit: {_listed(planner)}; checkpoints after commits "
                  f"{', '.join(map(str, checkpoints)) or 'none'} ({expected} expected, every {interval}); "
                  f"at most {max(planner)} files read, {commit_files} commit files kept")


@rule("pyiceberg's planner reads at least 1 more file with every commit: manifests pile up and none are merged",
      absent=[dict(planner=[3, 5, 5, 7]), dict(planner=[3, 5, 6, 4]), dict(planner=[3])],
      present=dict(planner=[3, 5, 6, 7]))
def iceberg_manifests_pile_up(planner: list[int]) -> tuple[bool, str]:
    held = len(planner) >= 3 and all(b - a >= 1 for a, b in zip(planner, planner[1:]))
    return held, f"files read to plan, commit by commit: {_listed(planner)}"


@rule("labformat's planner reads the same files at every commit while its .hoodie folder keeps at least 3 more files "
      "a commit (every instant and every metadata-table snapshot kept: labformat has no archival)",
      absent=[dict(planner=[3, 3, 4, 5], kept=[7, 12, 22, 27]), dict(planner=[3, 3, 3, 3], kept=[7, 12, 12, 27]),
              dict(planner=[3], kept=[7])],
      present=dict(planner=[3, 3, 3, 3], kept=[7, 12, 22, 27]))
def labformat_planner_flat(planner: list[int], kept: list[int]) -> tuple[bool, str]:
    held = len(planner) >= 2 and len(set(planner)) == 1 and all(b - a >= 3 for a, b in zip(kept, kept[1:]))
    return held, (f"{planner[0]} files read to plan at every commit; metadata files kept grew "
                  f"{kept[0]} -> {kept[-1]} over {len(kept) - 1} commits (at least "
                  f"{min((b - a for a, b in zip(kept, kept[1:])), default=0)} a commit)")


@rule("at their merge-on-read settings, only labformat left day 1's data files alone (0 rewritten, log files written); "
      "delta-rs and pyiceberg each rewrote data files and wrote no deletion vector or delete file",
      absent=[dict(rewritten=[0, 2, 0], logs=[2, 0, 3]), dict(rewritten=[1, 2, 6], logs=[2, 0, 0]),
              dict(rewritten=[0, 2, 6], logs=[0, 0, 0])],
      present=dict(rewritten=[0, 2, 6], logs=[2, 0, 0]))
def only_labformat_merges_on_read(rewritten: list[int], logs: list[int]) -> tuple[bool, str]:
    """Counts in the order labformat, delta-rs, pyiceberg."""
    held = (rewritten[0] == 0 and logs[0] > 0 and all(n > 0 for n in rewritten[1:]) and all(n == 0 for n in logs[1:]))
    names = ("labformat", "delta-rs", "pyiceberg")
    return held, "; ".join(f"{f}: {r} data files rewritten, {n} log or delete files"
                           for f, r, n in zip(names, rewritten, logs))


@rule("every format's min/max statistics skip at least half its data files for a one-hour window, "
      "and the three return the same rows",
      absent=[dict(planned=[4, 2, 20], data_files=[10, 9, 29], rows=[120, 120, 120]),
              dict(planned=[4, 2, 2], data_files=[10, 9, 29], rows=[120, 120, 119])],
      present=dict(planned=[4, 2, 2], data_files=[10, 9, 29], rows=[120, 120, 120]))
def statistics_skip_the_hour(planned: list[int], data_files: list[int], rows: list[int]) -> tuple[bool, str]:
    """Counts in the order labformat, delta-rs, pyiceberg."""
    held = all(2 * p <= d for p, d in zip(planned, data_files)) and len(set(rows)) == 1
    names = ("labformat", "delta-rs", "pyiceberg")
    return held, "; ".join(f"{f}: {p} of {d} files planned, {r:,} rows" for f, p, d, r in zip(names, planned, data_files, rows))
