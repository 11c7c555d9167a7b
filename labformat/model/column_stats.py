"""Column statistics of one base file: what data skipping and range pruning reason with."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class ColumnStats:
    """What one base file's footer says about one column; None means unknown.

    `min`/`max` bound the column's non-null values, as Python values of the column's type
    (str, int, float, Decimal, bool, bytes, date, datetime; a naive datetime is read as UTC).
    For floating columns they may leave NaN out, as parquet and pyarrow do, and `nan_count`
    says how many NaNs there are: None (unknown) means a NaN may be present. Spark orders
    NaN above every other value and NaN = NaN is TRUE, so a NaN can satisfy `x > 10`.
    `value_count` counts the file's rows, nulls included.
    """

    min: Any = None
    max: Any = None
    null_count: int | None = None
    value_count: int | None = None
    nan_count: int | None = None

    def may_hold_non_null(self) -> bool:
        """False only when the counts prove every value is NULL (or the file is empty)."""
        if self.value_count is not None and self.null_count is not None:
            return self.value_count > self.null_count
        return self.value_count != 0
