"""labformat's Python tasks on Spark, all run through here: an error a task raises reaches the driver as data.

A task's LabformatError leaves it as a `TaskFailure` carrying the error's class, arguments and fields
(`errors.task_payload`), and so does an OSError by which the table's storage refused a read or a
write (as the StorageError it stands for); the driver turns it back (`errors.from_task_failure`).
Any other exception is a bug or Spark's own, and leaves the task as it was raised.
"""

from __future__ import annotations

import functools
import inspect
from typing import Any, Callable, Iterator, TypeVar

from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F
from pyspark.sql.group import GroupedData

from labformat.errors import TASK_ERROR_TAG, LabformatError, TaskFailure, storage_refusal

R = TypeVar("R")


def _as_data(exc: BaseException) -> TaskFailure | None:
    if isinstance(exc, LabformatError):
        return TaskFailure.of(exc)
    if isinstance(exc, OSError):
        refused = storage_refusal(exc, "the storage refused a write or read inside a Spark task")
        return TaskFailure.of(refused) if refused is not None else None
    return None


def carrying_errors(task: Callable[..., Iterator[R]]) -> Callable[..., Iterator[R]]:
    """`task` (a function returning an iterator: a mapInArrow task) raising TaskFailure for its errors."""
    @functools.wraps(task)
    def run(*args: Any, **kwargs: Any) -> Iterator[R]:
        try:
            yield from task(*args, **kwargs)
        except Exception as exc:
            failure = _as_data(exc)
            if failure is None:
                raise
            raise failure from exc
    run.__signature__ = inspect.signature(task)  # type: ignore[attr-defined]  # what Spark reads
    return run


def calling_with_errors(task: Callable[..., R]) -> Callable[..., R]:
    """`task` (a plain function: an applyInArrow task, an Arrow UDF) raising TaskFailure for its errors.
    Its signature and type hints stay visible: Spark reads them to tell how to call it."""
    @functools.wraps(task)
    def run(*args: Any, **kwargs: Any) -> R:
        try:
            result = task(*args, **kwargs)
        except Exception as exc:
            failure = _as_data(exc)
            if failure is None:
                raise
            raise failure from exc
        if isinstance(result, Iterator):  # an iterator form: its errors come as it is read
            return _read_carrying_errors(result)  # type: ignore[return-value]  # an Iterator, as `task` returns
        return result
    # Spark counts the parameters with getfullargspec, which sees this signature, not `__wrapped__`.
    run.__signature__ = inspect.signature(task)  # type: ignore[attr-defined]
    return run


def _read_carrying_errors(results: Iterator[Any]) -> Iterator[Any]:
    try:
        yield from results
    except Exception as exc:
        failure = _as_data(exc)
        if failure is None:
            raise
        raise failure from exc


def map_in_arrow(df: DataFrame, task: Callable[[Iterator[Any]], Iterator[Any]], schema: Any) -> DataFrame:
    """`df.mapInArrow(task, schema)`, the task's errors carried as data."""
    return df.mapInArrow(carrying_errors(task), schema)


def apply_in_arrow(grouped: GroupedData, task: Callable[[Any], Any], schema: Any) -> DataFrame:
    """`grouped.applyInArrow(task, schema)`, the task's errors carried as data."""
    return grouped.applyInArrow(calling_with_errors(task), schema)


def arrow_udf(return_type: str) -> Callable[[Callable[..., Any]], Callable[..., Column]]:
    """`F.arrow_udf(return_type)` (a function of Arrow arrays to an Arrow array), its errors carried as data."""
    def make(fn: Callable[..., Any]) -> Callable[..., Column]:
        udf: Callable[..., Column] = F.arrow_udf(return_type)(calling_with_errors(fn))  # type: ignore[attr-defined]
        return udf
    return make


def refused_in_sql(error: type[LabformatError], message: Column) -> Column:
    """A SQL expression that fails its task with `error(message)` carried as data: Spark's `raise_error`
    with the same one line `errors.task_payload` writes (built by Spark's `to_json`, so any value
    quoted in `message` is escaped). Typed as a string, to stand in a `when` beside one."""
    payload = F.to_json(F.struct(F.lit(error.__name__).alias("class"), F.array(message).alias("args")))
    return F.raise_error(F.concat(F.lit(TASK_ERROR_TAG), payload)).cast("string")
