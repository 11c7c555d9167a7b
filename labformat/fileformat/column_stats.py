"""Column stats collected from Arrow batches as a base file is written: min, max, null, value and NaN counts per column."""

from __future__ import annotations

import json
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc


def _stat_value(scalar: pa.Scalar) -> Any:
    """A min/max as JSON: temporal values as their integer encoding (decoded with the table schema)."""
    if scalar is None or not scalar.is_valid:
        return None
    t = scalar.type
    if pa.types.is_timestamp(t) or pa.types.is_date(t) or pa.types.is_time(t):
        return scalar.cast(pa.int64() if not pa.types.is_date32(t) else pa.int32()).as_py()
    value = scalar.as_py()
    return float(value) if isinstance(value, float) else value


class ColumnStatsCollector:
    """Min, max, null count and value count per data column of one base file, chunk by chunk."""

    SUPPORTED = (pa.types.is_integer, pa.types.is_floating, pa.types.is_string, pa.types.is_large_string,
                 pa.types.is_timestamp, pa.types.is_date, pa.types.is_boolean)

    def __init__(self, columns: tuple[str, ...]):
        self.columns = columns
        self.stats: dict[str, list[Any]] = {}  # [min, max, nulls, values, NaNs]

    def add(self, table: pa.Table) -> None:
        for name in self.columns:
            column = table.column(name)
            if not any(check(column.type) for check in self.SUPPORTED):
                continue
            bounds = pc.min_max(column)
            low, high = _stat_value(bounds["min"]), _stat_value(bounds["max"])
            nulls = column.null_count
            # min/max skip NaN; NaN sorts above everything in Spark, so count them separately.
            nans = int(pc.sum(pc.is_nan(column)).as_py() or 0) if pa.types.is_floating(column.type) else 0
            current = self.stats.get(name)
            if current is None:
                self.stats[name] = [low, high, nulls, len(column), nans]
                continue
            if low is not None and (current[0] is None or low < current[0]):
                current[0] = low
            if high is not None and (current[1] is None or high > current[1]):
                current[1] = high
            current[2] += nulls
            current[3] += len(column)
            current[4] += nans

    def to_json(self) -> str:
        return json.dumps(self.stats)
