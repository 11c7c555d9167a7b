"""Write markers: each log file a write task creates is first recorded under `.hoodie/.temp/<instant>/`, so a rollback finds it.

A base file's name carries the instant that wrote it; a log file's name carries its file
slice's base instant instead (version 6), so nothing in a log file's name says which delta
commit wrote it. As Hudi does, a task records a marker (`<partition>/<log file>.marker.APPEND`)
before it writes the file: the markers of a failed instant list every log file it may have
left, and a rollback deletes those. A completed commit's markers are deleted as it publishes.
Readers never look here (hudi-rs ignores `.hoodie/`).
"""

from __future__ import annotations

from labformat.storage import Storage

MARKER_DIR = ".hoodie/.temp"
MARKER_SUFFIX = ".marker.APPEND"


def instant_dir(instant_time: str) -> str:
    return f"{MARKER_DIR}/{instant_time}"


def create(storage: Storage, instant_time: str, log_path: str) -> None:
    """Record that `instant_time` is about to write the log file `log_path` (relative to the table)."""
    storage.write_bytes(f"{instant_dir(instant_time)}/{log_path}{MARKER_SUFFIX}", b"")


def delete_one(storage: Storage, instant_time: str, log_path: str) -> None:
    """Withdraw the marker of a log file the task did not create after all (the name was taken)."""
    storage.delete(f"{instant_dir(instant_time)}/{log_path}{MARKER_SUFFIX}")


def marked_files(storage: Storage, instant_time: str) -> list[str]:
    """The log files (relative paths) the instant's tasks recorded markers for."""
    root = instant_dir(instant_time) + "/"
    return sorted(info.path[len(root):-len(MARKER_SUFFIX)] for info in storage.list(instant_dir(instant_time), recursive=True)
                  if info.path.startswith(root) and info.path.endswith(MARKER_SUFFIX))


def delete_all(storage: Storage, instant_time: str) -> None:
    """Delete the instant's markers (its commit is published, or its rollback deleted their files)."""
    for info in storage.list(instant_dir(instant_time), recursive=True):
        storage.delete(info.path)
    storage.delete_dir(instant_dir(instant_time))
