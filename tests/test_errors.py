"""Errors as data: what a task raises comes back to the driver as the same class with the same fields (no Spark here)."""

from __future__ import annotations

import errno
import json

import pytest

from labformat import errors as E
from labformat.fileformat.parquet_io import unreadable
from labformat.spark.tasks import calling_with_errors, carrying_errors


def _every_error_class() -> list[type[E.LabformatError]]:
    found, todo = [], [E.LabformatError]
    while todo:
        cls = todo.pop()
        found.append(cls)
        todo.extend(cls.__subclasses__())
    return found


def _as_spark_sends_it(failure: BaseException) -> Exception:
    """What the driver gets: Spark's exception, whose text holds the worker's traceback and message."""
    return RuntimeError("Job aborted due to stage failure: Task 0 in stage 3.0 failed 1 times ...\n"
                        "org.apache.spark.api.python.PythonException: Traceback (most recent call last):\n"
                        '  File "worker.py", line 1, in process\n'
                        f"labformat.errors.TaskFailure: {failure}\n\tat org.apache.spark...")


@pytest.mark.parametrize("cls", _every_error_class(), ids=lambda c: c.__name__)
def test_every_error_class_comes_back_as_itself_with_its_message(cls):
    sent = E.TaskFailure.of(cls("the message: 'quoted', \"double\", ünïcode\nand a second line"))
    back = E.from_task_failure(_as_spark_sends_it(sent))
    assert type(back) is cls and str(back) == "the message: 'quoted', \"double\", ünïcode\nand a second line"


def test_fields_and_notes_come_back_as_json_holds_them():
    conflict = E.WriteConflictError("lost", instant="20240101000000000", other="20240101000000001",
                                     file_groups=(("day=1", "f1"),))
    conflict.add_note("labformat: rolled back")
    back = E.from_task_failure(_as_spark_sends_it(E.TaskFailure.of(conflict)))
    assert isinstance(back, E.WriteConflictError)
    assert (back.instant, back.other, back.file_groups) == ("20240101000000000", "20240101000000001", [["day=1", "f1"]])
    assert back.__notes__ == ["labformat: rolled back"]
    refused = E.from_task_failure(_as_spark_sends_it(E.TaskFailure.of(E.StorageError(errno.ENOSPC, "disk full"))))
    assert isinstance(refused, E.StorageError) and refused.errno == errno.ENOSPC and refused.strerror == "disk full"


def test_a_message_quoting_the_tag_and_a_copy_cut_short_do_not_hide_the_error():
    # A refused partition value that holds the tag, inside a SQL refusal (Spark appends its SQLSTATE).
    payload = E.task_payload(E.InvalidInputError(f"value '../{E.TASK_ERROR_TAG}x' refused"))
    sql = RuntimeError(f"[USER_RAISED_EXCEPTION] {payload} SQLSTATE: P0001")
    back = E.from_task_failure(sql)
    assert isinstance(back, E.InvalidInputError) and E.TASK_ERROR_TAG in str(back)
    # A JVM stack trace ending in a truncated copy of the payload.
    cut = RuntimeError(f"{payload}\n... Caused by: {payload[:40]}")
    assert isinstance(E.from_task_failure(cut), E.InvalidInputError)


def test_what_is_not_a_payload_stays_spark_s_error():
    assert E.from_task_failure(RuntimeError("Task failed: ValueError: boom")) is None
    assert E.from_task_failure(RuntimeError(f"{E.TASK_ERROR_TAG}{{not json")) is None
    unknown = json.dumps({"class": "NotOurs", "args": ["x"]})
    assert E.from_task_failure(RuntimeError(E.TASK_ERROR_TAG + unknown)) is None
    odd_fields = json.dumps({"class": "InvalidInputError", "args": ["x"], "fields": [1, 2]})
    assert E.from_task_failure(RuntimeError(E.TASK_ERROR_TAG + odd_fields)) is None


def test_every_task_form_sends_its_errors_as_data():
    def generator_task(batches):
        yield from batches
        raise E.CorruptTableError("base file x.parquet cannot be read")

    def plain_task(table):
        raise E.InvalidInputError("null keys")

    def storage_task(table):
        raise OSError("Error writing bytes to file. Detail: [errno 28] No space left on device")

    def bug_task(table):
        raise KeyError("a bug of ours")

    with pytest.raises(E.TaskFailure) as sent:
        list(carrying_errors(generator_task)(iter([1])))
    assert isinstance(E.from_task_failure(_as_spark_sends_it(sent.value)), E.CorruptTableError)
    with pytest.raises(E.TaskFailure) as sent:
        calling_with_errors(plain_task)(None)
    assert isinstance(E.from_task_failure(_as_spark_sends_it(sent.value)), E.InvalidInputError)
    with pytest.raises(E.TaskFailure) as sent:
        calling_with_errors(storage_task)(None)
    refused = E.from_task_failure(_as_spark_sends_it(sent.value))
    assert isinstance(refused, E.StorageError) and "No space left on device" in str(refused)
    with pytest.raises(KeyError):
        calling_with_errors(bug_task)(None)  # a bug leaves the task as it was raised


def test_an_iterator_task_sends_the_errors_it_meets_while_read():
    def late(arrays):
        yield 1
        raise E.InvalidInputError("late")

    results = calling_with_errors(late)(None)
    assert next(results) == 1
    with pytest.raises(E.TaskFailure):
        next(results)


def test_spark_sees_the_task_s_own_parameters():
    import inspect

    def check(table: "pa.Table") -> "pa.Table":  # noqa: F821 - never resolved here
        return table

    assert list(inspect.getfullargspec(calling_with_errors(check)).args) == ["table"]
    assert list(inspect.getfullargspec(carrying_errors(check)).args) == ["table"]


def test_a_file_the_storage_refuses_to_read_is_a_storage_error_not_damage():
    denied = PermissionError(errno.EACCES, "Permission denied", "/t/day=1/f.parquet")
    assert isinstance(unreadable("day=1/f.parquet", denied), E.StorageError)
    assert type(unreadable("day=1/f.parquet", FileNotFoundError("gone"))) is E.CorruptTableError
    assert type(unreadable("day=1/f.parquet", ValueError("bad footer"))) is E.CorruptTableError
