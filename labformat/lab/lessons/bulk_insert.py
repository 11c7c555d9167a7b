"""The rules behind notebook 01's claims: sort modes by the key ranges of files and of slices inside them, write tasks, cores."""

from __future__ import annotations

from labformat.lab.claims import clearly_faster, rule


@rule("GLOBAL_SORT's base files have disjoint key ranges: no key lies in the range of more than 1 of them",
      absent=[dict(files_at_one_key=2, files=6), dict(files_at_one_key=1, files=1)],
      present=dict(files_at_one_key=1, files=6))
def global_sort_disjoint(files_at_one_key: int, files: int) -> tuple[bool, str]:
    return files >= 2 and files_at_one_key == 1, f"at most {files_at_one_key} of {files} files hold any one key"


@rule("every one of NONE's base files holds a key from the middle of the history: range pruning can drop none of them",
      absent=[dict(files_with_key=5, files=6), dict(files_with_key=1, files=1)],
      present=dict(files_with_key=6, files=6))
def none_overlaps_everywhere(files_with_key: int, files: int) -> tuple[bool, str]:
    return files >= 2 and files_with_key == files, f"{files_with_key} of {files} files hold the key"


@rule("PARTITION_SORT's files overlap like NONE's, but inside each file the rows are in key order: a key lies "
      "in at most 1 slice of each file, at least 10x fewer slices than under NONE",
      absent=[dict(files=6, files_in_key_order=6, files_at_one_key=6, slices_at_one_key=6, none_slices_at_one_key=40),
              dict(files=6, files_in_key_order=5, files_at_one_key=6, slices_at_one_key=6, none_slices_at_one_key=120),
              dict(files=6, files_in_key_order=6, files_at_one_key=6, slices_at_one_key=12, none_slices_at_one_key=120),
              dict(files=6, files_in_key_order=6, files_at_one_key=1, slices_at_one_key=1, none_slices_at_one_key=120)],
      present=dict(files=6, files_in_key_order=6, files_at_one_key=6, slices_at_one_key=6, none_slices_at_one_key=120))
def partition_sort_sorted_inside(files: int, files_in_key_order: int, files_at_one_key: int, slices_at_one_key: int,
                                 none_slices_at_one_key: int) -> tuple[bool, str]:
    held = (files >= 2 and files_in_key_order == files and files_at_one_key == files
            and slices_at_one_key <= files and none_slices_at_one_key >= 10 * slices_at_one_key)
    return held, (f"{files_at_one_key} of {files} files at one key; {files_in_key_order} of {files} files in key order; "
                  f"at most {slices_at_one_key} slices at one key, against {none_slices_at_one_key} under NONE")


@rule("each write task writes exactly 1 base file (below max_file_size): write tasks = files = bulk_insert_parallelism",
      absent=[dict(parallelism=[1, 8], tasks=[1, 8], files=[1, 4]), dict(parallelism=[1, 8], tasks=[1, 4], files=[1, 4])],
      present=dict(parallelism=[1, 8], tasks=[1, 8], files=[1, 8]))
def one_file_per_task(parallelism: list[int], tasks: list[int], files: list[int]) -> tuple[bool, str]:
    held = len(parallelism) > 0 and list(tasks) == list(parallelism) and list(files) == list(parallelism)
    return held, "; ".join(f"parallelism {p}: {t} tasks, {f} files" for p, t, f in zip(parallelism, tasks, files))


@rule("with 1 write task exactly 1 core writes while the others idle; with as many tasks as cores or more, every core writes",
      absent=[dict(cores=2, busy_with_1=2, busy_with_many=2), dict(cores=2, busy_with_1=1, busy_with_many=1),
              dict(cores=1, busy_with_1=1, busy_with_many=1)],
      present=dict(cores=2, busy_with_1=1, busy_with_many=2))
def one_task_one_core(cores: int, busy_with_1: int, busy_with_many: int) -> tuple[bool, str]:
    held = cores >= 2 and busy_with_1 == 1 and busy_with_many == cores
    return held, (f"cores that ran a write task: {busy_with_1} of {cores} with 1 task, "
                  f"{busy_with_many} of {cores} with many")


@rule("projected onto 16 cores from warm task times, 8 write tasks finish the write stage at least 1.2x sooner than 1 "
      "(median of 5+ interleaved runs, spreads apart)",
      absent=[dict(projected_8=[1.0] * 5, projected_1=[1.1] * 5), dict(projected_8=[0.5] * 3, projected_1=[2.0] * 3)],
      present=dict(projected_8=[0.4, 0.5, 0.45, 0.5, 0.42], projected_1=[2.0, 1.9, 2.2, 2.1, 2.0]), exact=False)
def eight_tasks_sooner_on_16_cores(projected_8: list[float], projected_1: list[float]) -> tuple[bool, str]:
    return clearly_faster(projected_8, projected_1)


@rule("each write task has a fixed cost: 8 tasks spend at least 1.2x the task-seconds of 1 task on the same rows "
      "(median of 5+ interleaved runs, spreads apart)",
      absent=[dict(task_seconds_8=[2.0] * 5, task_seconds_1=[2.0] * 5)],
      present=dict(task_seconds_8=[3.0, 3.2, 2.9, 3.1, 3.0], task_seconds_1=[2.0, 1.9, 2.1, 2.0, 2.2]), exact=False)
def tasks_have_a_fixed_cost(task_seconds_8: list[float], task_seconds_1: list[float]) -> tuple[bool, str]:
    return clearly_faster(task_seconds_1, task_seconds_8)
