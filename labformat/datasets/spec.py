"""Dataset specs: the frozen parameters of one drone telemetry dataset, and the named scale presets.

A `DatasetSpec` says everything the generator needs; the same spec gives the same
rows on any machine and any number of cores. Presets (`PRESETS`) are specs with a
name; `spec("small", drones=10)` copies a preset with keyword overrides, and any
unknown preset, unknown parameter or out-of-range value raises `ConfigError`
naming it.

| preset | drones | history days | batch days | history rows | rows per batch (about) |
| ------ | ------ | ------------ | ---------- | ------------ | ---------------------- |
| tiny   | 2      | 2            | 3          | 5,760        | 3,200                  |
| small  | 24     | 14           | 28         | 483,840      | 38,400                 |
| medium | 400    | 28           | 7          | 16,128,000   | 640,000                |
| large  | 2,000  | 60           | 30         | 172,800,000  | 3,200,000              |

`small`, the laptop default, upserts a month (28 days) so that range pruning has a month to
improve over, with fewer drones so the whole workshop stays within minutes on 2 cores.

Scenarios (`SCENARIOS`) name a workload: `seed` (the default) is seed 000's daily batch, the
new day's readings plus corrections of the previous day plus stale duplicates; `late` adds
late corrections (1% of a day's readings) spread over the 30 days before the previous day,
the workload where copy-on-write rewrites old files and merge-on-read earns its keep.

Public: `DatasetSpec`, `PRESETS`, `SCENARIOS`, `spec(preset, key_style, scenario, **overrides)`,
`check_day(spec, day)`, `KEY_STYLES`, `MINUTES_PER_DAY`, `GENERATOR_VERSION`.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import hashlib
import json
import re
from dataclasses import dataclass
from typing import Any

from labformat.errors import ConfigError

MINUTES_PER_DAY = 1440
KEY_STYLES = ("monotonic", "random")
# Drone ids are zero-padded to four digits (`drone0042`), so at most 10,000 drones fit.
MAX_DRONES = 10_000

# Bump when the generator's output changes for the same spec: it is part of the cache key.
GENERATOR_VERSION = 1


def _validate(s: DatasetSpec) -> None:
    # The name is part of a folder name in the cache.
    if not isinstance(s.name, str) or not re.fullmatch(r"[A-Za-z0-9][A-Za-z0-9_.-]*", s.name):
        raise ConfigError(f"dataset name must be letters, digits, '_', '.', '-', got {s.name!r}")
    if s.key_style not in KEY_STYLES:
        raise ConfigError(f"unknown key_style {s.key_style!r}; choose one of {list(KEY_STYLES)}")
    for field, low in (("drones", 1), ("history_days", 1), ("batch_days", 0), ("late_window_days", 0), ("seed", None)):
        value = getattr(s, field)
        if isinstance(value, bool) or not isinstance(value, int):
            raise ConfigError(f"dataset parameter {field} must be an int, got {value!r}")
        if low is not None and value < low:
            raise ConfigError(f"dataset parameter {field} must be >= {low}, got {value}")
    if s.drones > MAX_DRONES:
        raise ConfigError(f"dataset parameter drones must be <= {MAX_DRONES} (ids are drone0000..drone9999), got {s.drones}")
    for field in ("update_fraction", "late_fraction", "duplicate_fraction"):
        value = getattr(s, field)
        if isinstance(value, bool) or not isinstance(value, (int, float)) or not 0.0 <= value <= 1.0:
            raise ConfigError(f"dataset parameter {field} must be a fraction in [0, 1], got {value!r}")
    try:
        dt.date.fromisoformat(s.start)
    except (TypeError, ValueError):
        raise ConfigError(f"dataset parameter start must be an ISO date like '2024-01-15', got {s.start!r}") from None


@dataclass(frozen=True)
class DatasetSpec:
    """Parameters of one synthetic drone telemetry dataset (one reading per drone per minute).

    - `history_days` full days starting at `start` form the initial history (bulk insert);
    - batch `d` (1..`batch_days`) carries every reading of day `history_days + d - 1`
      (0-based from `start`) as inserts, plus `update_fraction` of the previous day's
      readings as corrections, plus late corrections (`late_fraction` times one day's
      readings, none by default) spread over the `late_window_days` days before the previous day, plus
      stale duplicates of `duplicate_fraction` of the batch's rows (same key, older
      `updated_at`, different values);
    - `key_style="random"` keys the same rows by UUID-like hashes of the monotonic key.
    """

    name: str = "custom"
    key_style: str = "monotonic"
    drones: int = 50
    history_days: int = 14
    batch_days: int = 7
    start: str = "2024-01-15"
    update_fraction: float = 0.10
    late_fraction: float = 0.0
    duplicate_fraction: float = 0.01
    late_window_days: int = 30
    seed: int = 42

    def __post_init__(self) -> None:
        if isinstance(self.start, dt.date):  # accept a date; store the ISO string (JSON-ready, hashable)
            object.__setattr__(self, "start", self.start.isoformat()[:10])
        _validate(self)

    # -- derived sizes -------------------------------------------------------------

    @property
    def rows_per_day(self) -> int:
        return self.drones * MINUTES_PER_DAY

    @property
    def history_rows(self) -> int:
        return self.rows_per_day * self.history_days

    @property
    def start_date(self) -> dt.date:
        return dt.date.fromisoformat(self.start)

    def day_date(self, day_index: int) -> dt.date:
        """The calendar date of 0-based day `day_index` (0 is `start`)."""
        return self.start_date + dt.timedelta(days=day_index)

    def batch_date(self, day: int) -> dt.date:
        """The date whose readings batch `day` (1-based) inserts."""
        check_day(self, day)
        return self.day_date(self.history_days + day - 1)

    def approx_batch_rows(self) -> int:
        """Expected rows of one batch (inserts + updates + late corrections + duplicates)."""
        winners = self.rows_per_day * (1 + self.update_fraction + self.late_fraction)
        return round(winners * (1 + self.duplicate_fraction))

    # -- identity ------------------------------------------------------------------

    def params(self) -> dict[str, Any]:
        """All fields as a plain dict (JSON-ready)."""
        return dataclasses.asdict(self)

    @property
    def digest(self) -> str:
        """A short hash of the parameters and generator version: same digest, same data."""
        payload = json.dumps({"params": self.params(), "generator": GENERATOR_VERSION}, sort_keys=True)
        return hashlib.sha256(payload.encode()).hexdigest()[:10]

    @property
    def cache_name(self) -> str:
        """Folder name of this dataset in the cache: `<preset>-<key_style>-<digest>`."""
        return f"{self.name}-{self.key_style}-{self.digest}"


PRESETS: dict[str, DatasetSpec] = {
    # Tests and notebook CI: seconds.
    "tiny": DatasetSpec(name="tiny", drones=2, history_days=2, batch_days=3),
    # The laptop default: ~1M rows of history, the whole lab within minutes on 2 cores.
    "small": DatasetSpec(name="small", drones=24, history_days=14, batch_days=28),
    "medium": DatasetSpec(name="medium", drones=400, history_days=28, batch_days=7),
    # A cluster: 100M+ rows of history.
    "large": DatasetSpec(name="large", drones=2000, history_days=60, batch_days=30),
}

# A scenario is a named set of overrides on top of a preset: what kind of day the batches bring.
SCENARIOS: dict[str, dict[str, Any]] = {
    # Seed 000's workload: the new day's readings and corrections of the previous day.
    "seed": {},
    # Late corrections reaching a month back: one stray old key keeps a whole old file in play.
    "late": {"late_fraction": 0.01, "late_window_days": 30},
}

_FIELDS = {f.name for f in dataclasses.fields(DatasetSpec)}


def spec(preset: str = "small", key_style: str = "monotonic", scenario: str = "seed",
         **overrides: Any) -> DatasetSpec:
    """Return preset `preset` with `key_style`, the `scenario`'s workload, and any field overridden by keyword.

    >>> spec("tiny", drones=3).drones
    3
    >>> spec("tiny", scenario="late").late_fraction
    0.01
    """
    if preset not in PRESETS:
        raise ConfigError(f"unknown dataset preset {preset!r}; choose one of {sorted(PRESETS)}")
    if scenario not in SCENARIOS:
        raise ConfigError(f"unknown dataset scenario {scenario!r}; choose one of {sorted(SCENARIOS)}")
    unknown = sorted(set(overrides) - _FIELDS)
    if unknown:
        raise ConfigError(f"unknown dataset parameter(s) {unknown}; known: {sorted(_FIELDS - {'name'})}")
    return dataclasses.replace(PRESETS[preset], key_style=key_style, **{**SCENARIOS[scenario], **overrides})


def check_day(spec: DatasetSpec, day: int) -> None:
    """Raise ConfigError unless `day` is a batch day of `spec` (1..batch_days)."""
    if isinstance(day, bool) or not isinstance(day, int) or not 1 <= day <= spec.batch_days:
        raise ConfigError(f"batch day {day!r} is out of range: {spec.name!r} has batch days 1..{spec.batch_days}")

