"""An instant: one action on the timeline (commit, deltacommit, replacecommit, rollback, clean) in one state, at one time."""

from __future__ import annotations

import enum
import re
from dataclasses import dataclass
from datetime import datetime, timedelta, timezone

INSTANT_TIME_FORMAT = "%Y%m%d%H%M%S%f"  # %f gives microseconds; we keep the first 3 digits
INSTANT_TIME_RE = re.compile(r"^\d{17}$")


class Action(str, enum.Enum):
    COMMIT = "commit"
    DELTA_COMMIT = "deltacommit"  # a merge-on-read write: log files appended, new base files for inserts
    COMPACTION = "compaction"  # merge-on-read: base file + logs -> a new base file; completes as a `commit`
    REPLACE_COMMIT = "replacecommit"  # clustering: new file groups replace others (`partitionToReplaceFileIds`)
    ROLLBACK = "rollback"
    CLEAN = "clean"  # file slices no retained instant needs deleted; changes no snapshot, so no write action


class State(str, enum.Enum):
    REQUESTED = "requested"
    INFLIGHT = "inflight"
    COMPLETED = "completed"


# The actions whose completed instants hold data (the others only change the timeline).
# A pending compaction counts too: labformat rolls back a dead writer's compaction like any write
# (Hudi would run its plan again), so that no half-written base file outlives it.
WRITE_ACTIONS = frozenset({Action.COMMIT, Action.DELTA_COMMIT, Action.REPLACE_COMMIT, Action.COMPACTION})


@dataclass(frozen=True, order=True)
class Instant:
    """A point on the timeline. Ordered by time, then action, then state.

    File names follow Hudi's layout version 1: `<time>.<action>` when completed,
    `<time>.<action>.requested`, and `<time>.<action>.inflight` except for a plain
    commit, whose inflight file is `<time>.inflight`. A compaction completes as `<time>.commit`.
    """

    time: str
    action: Action
    state: State

    def __post_init__(self) -> None:
        if not INSTANT_TIME_RE.match(self.time):
            raise ValueError(f"instant time must be 17 digits (yyyyMMddHHmmssSSS), got {self.time!r}")

    @property
    def file_name(self) -> str:
        if self.state is State.COMPLETED:
            # A compaction is requested and inflight as `compaction`, and completes as a `commit`.
            action = Action.COMMIT if self.action is Action.COMPACTION else self.action
            return f"{self.time}.{action.value}"
        if self.state is State.INFLIGHT and self.action is Action.COMMIT:
            return f"{self.time}.inflight"
        return f"{self.time}.{self.action.value}.{self.state.value}"

    @property
    def is_completed(self) -> bool:
        return self.state is State.COMPLETED

    def to(self, state: State) -> "Instant":
        return Instant(self.time, self.action, state)

    @classmethod
    def parse(cls, file_name: str) -> "Instant | None":
        """The instant a timeline file name stands for, or None for files that are not instants."""
        parts = file_name.split(".")
        if not parts or not INSTANT_TIME_RE.match(parts[0]):
            return None
        try:
            if len(parts) == 2:
                if parts[1] == "inflight":
                    return cls(parts[0], Action.COMMIT, State.INFLIGHT)
                return cls(parts[0], Action(parts[1]), State.COMPLETED)
            if len(parts) == 3 and parts[2] in ("requested", "inflight"):
                return cls(parts[0], Action(parts[1]), State(parts[2]))
        except ValueError:
            return None
        return None

    def __str__(self) -> str:
        return f"{self.time} {self.action.value} {self.state.value}"


def format_instant_time(moment: datetime) -> str:
    return moment.astimezone(timezone.utc).strftime(INSTANT_TIME_FORMAT)[:17]


def parse_instant_time(time: str) -> datetime:
    if not INSTANT_TIME_RE.match(time):
        raise ValueError(f"instant time must be 17 digits (yyyyMMddHHmmssSSS), got {time!r}")
    return datetime.strptime(time + "000", INSTANT_TIME_FORMAT).replace(tzinfo=timezone.utc)


def next_instant_time(after: str | None, now: datetime | None = None) -> str:
    """A new instant time: the current UTC millisecond, but always later than `after`.

    Instants must be unique and increasing; two writes within one millisecond (tests do
    that) would otherwise collide.
    """
    candidate = format_instant_time(now or datetime.now(timezone.utc))
    if after is not None and candidate <= after:
        candidate = format_instant_time(parse_instant_time(after) + timedelta(milliseconds=1))
    return candidate
