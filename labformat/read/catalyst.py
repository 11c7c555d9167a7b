"""From a Spark filter to a `Predicate`: Spark parses and optimizes it, and the Catalyst condition is walked.

On a classic (py4j) SparkSession `to_predicate` lets Spark parse, analyze and optimize the
filter over an empty DataFrame of the table's schema, and turns the optimized Catalyst condition
into a tree of `labformat.expressions.predicates` with plain Python values. A Spark Connect session has
no Catalyst plan on this side: there the server checks the filter, and the Connect Column's own
expression tree is walked (`read.connect_filter`).
"""

from __future__ import annotations

import contextlib
import datetime as dt
import struct
from decimal import Decimal
from typing import Any, Iterator, overload

from py4j.protocol import Py4JError
from pyspark.errors import PySparkException
from pyspark.sql import Column, SparkSession
from pyspark.sql import types as T

from labformat.errors import InvalidInputError
from labformat.read.connect_filter import connect_predicate
from labformat.expressions.predicates import (
    ALWAYS_FALSE,
    ALWAYS_NULL,
    ALWAYS_TRUE,
    Comparison,
    Constant,
    In,
    IsNotNull,
    IsNull,
    Not,
    Op,
    Predicate,
    StartsWith,
    Unknown,
    all_of,
    any_of,
)
from labformat.spark.compat import is_connect

__all__ = ["to_predicate"]


@contextlib.contextmanager
def _quiet_query_context_logs() -> Iterator[None]:
    """pyspark logs every analysis error as a JSON line on stderr before raising it; ours re-raises
    it as InvalidInputError with Spark's message, so the log line would only say it twice."""
    from pyspark.logger import PySparkLogger

    # Through PySparkLogger, never logging.getLogger: a plain Logger created first under these
    # names would later reject the keyword arguments pyspark logs with.
    loggers = [PySparkLogger.getLogger(n) for n in ("DataFrameQueryContextLogger", "SQLQueryContextLogger")]
    before = [lg.disabled for lg in loggers]
    for lg in loggers:
        lg.disabled = True
    try:
        yield
    finally:
        for lg, state in zip(loggers, before):
            lg.disabled = state


def to_predicate(spark: SparkSession, condition: Column | str, schema: T.StructType | str) -> Predicate:
    """Parse `condition` (a Column or a SQL string) against `schema` with Spark, as a `Predicate`.

    Spark does all the parsing and typing: the condition filters an empty DataFrame of
    `schema` (every field made nullable, so Spark cannot prove anything from the schema that
    the files do not promise), and the optimized plan's condition is walked. The optimizer
    has already folded constants (casts of literals, `current_date()`), unwrapped casts of
    columns it can (`int_col > 2.5` is `int_col > 2`), turned BETWEEN into >= AND <=, LIKE
    'ab%' into a prefix test and long IN lists into InSet. A condition the optimizer proved
    always TRUE or never TRUE comes back as `ALWAYS_TRUE` / `ALWAYS_FALSE`.

    Raises InvalidInputError when Spark rejects the filter (unknown column, a literal that
    does not cast, a non-boolean condition), as the query itself would.
    """
    if not isinstance(condition, (Column, str)):
        raise InvalidInputError(f"a filter is a pyspark Column or a SQL string, got {type(condition).__name__}")
    schema = _nullable(_as_struct(spark, schema))
    relation = spark.createDataFrame([], schema)
    if is_connect(spark):
        try:
            with _quiet_query_context_logs():
                _ = relation.filter(condition).schema  # the server analyzes the filter: unknown columns, types
        except PySparkException as e:
            raise InvalidInputError(f"Spark rejects the filter {condition!r}: {e}") from e
        return connect_predicate(spark, condition, schema)
    try:
        with _quiet_query_context_logs():
            execution = relation.filter(condition)._jdf.queryExecution()
        analyzed, optimized = execution.analyzed(), execution.optimizedPlan()
    except (PySparkException, Py4JError) as e:
        hint = ""
        condition_name = e.getCondition() if isinstance(e, PySparkException) else None
        if (condition_name or "").startswith("MISSING_ATTRIBUTES"):
            hint = " (name columns with F.col('x') or in SQL: df['x'] is bound to the DataFrame df)"
        raise InvalidInputError(f"Spark rejects the filter {condition!r}{hint}: {e}") from e

    if _kind(analyzed) != "Filter" or _kind(analyzed.child()) != "LogicalRDD":
        return Unknown(str(condition))  # not the plan shape we built: claim nothing
    kind = _kind(optimized)
    if kind == "Filter" and _kind(optimized.child()) == "LogicalRDD":
        return _Converter().predicate(optimized.condition())
    if kind == "LogicalRDD":
        return ALWAYS_TRUE  # PruneFilters dropped a condition that holds for every row
    if kind == "LocalRelation" and optimized.data().isEmpty():
        # The relation is an RDD Spark cannot know is empty: only a condition that is never
        # TRUE lets the optimizer replace the filter by an empty relation.
        return ALWAYS_FALSE
    # Another shape (a subquery became a join, ...): fall back on the analyzed condition.
    return _Converter().predicate(analyzed.condition())


def _as_struct(spark: SparkSession, schema: T.StructType | str) -> T.StructType:
    if isinstance(schema, T.StructType):
        return schema
    if isinstance(schema, str):
        try:
            return spark.createDataFrame([], schema).schema
        except (PySparkException, Py4JError) as e:
            raise InvalidInputError(f"not a schema: {schema!r}: {e}") from e
    raise InvalidInputError(f"schema must be a StructType or a DDL string, got {type(schema).__name__}")


@overload
def _nullable(t: T.StructType) -> T.StructType: ...
@overload
def _nullable(t: T.DataType) -> T.DataType: ...
def _nullable(t: T.DataType) -> T.DataType:
    if isinstance(t, T.StructType):
        return T.StructType([T.StructField(f.name, _nullable(f.dataType), True, f.metadata) for f in t.fields])
    if isinstance(t, T.ArrayType):
        return T.ArrayType(_nullable(t.elementType), True)
    if isinstance(t, T.MapType):
        return T.MapType(_nullable(t.keyType), _nullable(t.valueType), True)
    return t


def _kind(java_object: Any) -> str:
    """Simple class name of a Catalyst node; Scala objects (`IntegerType$`) lose their `$`."""
    name: str = java_object.getClass().getSimpleName().rstrip("$")
    return name


class _CannotModel(Exception):
    """Raised inside the converter when an expression has to become `Unknown`."""


_COMPARISONS = {
    "EqualTo": Op.EQ,
    "LessThan": Op.LT,
    "LessThanOrEqual": Op.LE,
    "GreaterThan": Op.GT,
    "GreaterThanOrEqual": Op.GE,
}

# Types whose Python values order and compare as Spark orders them (strings only in the
# default UTF8_BINARY collation: UTF-8 byte order is code point order, which Python uses).
_ORDERED_TYPES = {
    "BooleanType", "ByteType", "ShortType", "IntegerType", "LongType", "FloatType", "DoubleType",
    "DecimalType", "StringType", "BinaryType", "DateType", "TimestampType", "TimestampNTZType",
}

_EPOCH_UTC = dt.datetime(1970, 1, 1, tzinfo=dt.timezone.utc)
_EPOCH_NAIVE = dt.datetime(1970, 1, 1)
_EPOCH_DATE = dt.date(1970, 1, 1)


class _Converter:
    """Walks one Catalyst boolean expression (through py4j) into a `Predicate`."""

    def predicate(self, e: Any) -> Predicate:
        try:
            return self._predicate(e)
        except _CannotModel:
            return self._unknown(e)

    def _predicate(self, e: Any) -> Predicate:
        kind = _kind(e)
        if kind == "And":
            return all_of(self.predicate(e.left()), self.predicate(e.right()))
        if kind == "Or":
            return any_of(self.predicate(e.left()), self.predicate(e.right()))
        if kind == "Not":
            return Not(self.predicate(e.child()))
        if kind in _COMPARISONS:
            return self._comparison(_COMPARISONS[kind], e.left(), e.right())
        if kind == "EqualNullSafe":
            return self._equal_null_safe(e.left(), e.right())
        if kind == "In":
            items = e.list()
            return self._in(e.value(), [self._literal(items.apply(i)) for i in range(items.size())])
        if kind == "InSet":
            child, values, it = e.child(), [], e.hset().iterator()
            while it.hasNext():
                values.append(_python_value(it.next(), child.dataType()))
            return self._in(child, values)
        if kind in ("IsNull", "IsNotNull"):
            if _kind(e.child()) != "AttributeReference":
                raise _CannotModel
            return (IsNull if kind == "IsNull" else IsNotNull)(e.child().name())
        if kind == "StartsWith":
            column, prefix = self._column(e.left()), self._literal(e.right())
            if not isinstance(prefix, str) and prefix is not None:
                raise _CannotModel
            return ALWAYS_NULL if prefix is None else StartsWith(column, prefix)
        if kind == "AttributeReference" and _kind(e.dataType()) == "BooleanType":
            return Comparison(e.name(), Op.EQ, True)  # `WHERE flag`
        if e.foldable() and _kind(e.dataType()) == "BooleanType":
            return Constant(self._literal(e))
        raise _CannotModel

    def _comparison(self, op: Op, left: Any, right: Any) -> Predicate:
        if _kind(left) == "AttributeReference" and right.foldable():
            return Comparison(self._column(left, right), op, self._literal(right))
        if _kind(right) == "AttributeReference" and left.foldable():
            return Comparison(self._column(right, left), op.mirrored(), self._literal(left))
        raise _CannotModel

    def _equal_null_safe(self, left: Any, right: Any) -> Predicate:
        if _kind(left) != "AttributeReference":
            left, right = right, left
        if _kind(left) != "AttributeReference" or not right.foldable():
            raise _CannotModel
        column, value = self._column(left, right), self._literal(right)
        if value is None:
            return IsNull(column)
        # x <=> v is never NULL: FALSE for a NULL x. `x = v AND x IS NOT NULL` has exactly
        # that truth table, so NOT (x <=> v) also comes out right (TRUE for a NULL x).
        return all_of(Comparison(column, Op.EQ, value), IsNotNull(column))

    def _in(self, value_expr: Any, values: list[Any]) -> Predicate:
        column = self._column(value_expr)
        present = tuple(dict.fromkeys(v for v in values if v is not None))
        if any(v is None for v in values):
            # x IN (1, NULL) is TRUE when x = 1, else NULL: its negation is never TRUE.
            return any_of(In(column, present), Comparison(column, Op.EQ, None))
        return In(column, present)

    def _column(self, e: Any, other: Any | None = None) -> str:
        """The column name of an attribute whose values Python orders as Spark does."""
        if _kind(e) != "AttributeReference":
            raise _CannotModel  # a function of a column, a cast Spark did not unwrap, a struct field
        data_type = e.dataType()
        if _kind(data_type) not in _ORDERED_TYPES:
            raise _CannotModel
        if _kind(data_type) == "StringType" and not data_type.isUTF8BinaryCollation():
            raise _CannotModel  # UTF8_LCASE and friends do not order by code point
        if other is not None and other.dataType().simpleString() != data_type.simpleString():
            raise _CannotModel  # the analyzer always aligns types; if not, do not guess
        name: str = e.name()
        return name

    def _literal(self, e: Any) -> Any:
        """The Python value of a literal, or of a constant expression Spark evaluates here."""
        if _kind(e) == "Literal":
            return _python_value(e.value(), e.dataType())
        if not e.foldable() or not e.deterministic():
            raise _CannotModel
        try:
            # Constant folding as the optimizer does it; only reached on the analyzed-plan path.
            return _python_value(e.eval(None), e.dataType())
        except Py4JError as err:
            raise _CannotModel from err

    def _unknown(self, e: Any) -> Unknown:
        try:
            description = e.sql()
        except Py4JError:
            description = e.toString()
        try:
            refs = e.references().toSeq()
            columns = frozenset(refs.apply(i).name() for i in range(refs.size()))
        except Py4JError:
            columns = frozenset()
        return Unknown(description, columns)


def _python_value(value: Any, data_type: Any) -> Any:
    """A Catalyst internal value (UTF8String, Decimal, days, microseconds, ...) as a Python value."""
    if value is None:
        return None
    kind = _kind(data_type)
    try:
        if kind == "BooleanType":
            return bool(value)
        if kind in ("ByteType", "ShortType", "IntegerType", "LongType"):
            return int(value)
        if kind == "DoubleType":
            return float(value)
        if kind == "FloatType":
            # py4j hands over a float as the shortest decimal text; round it back to the
            # float32 it came from, which is what a float column's stats hold.
            return struct.unpack("f", struct.pack("f", float(value)))[0]
        if kind == "DecimalType":
            return Decimal(value.toJavaBigDecimal())
        if kind == "StringType":
            return value.toString()
        if kind == "BinaryType":
            return bytes(value)
        if kind == "DateType":
            return _EPOCH_DATE + dt.timedelta(days=int(value))
        if kind == "TimestampType":
            return _EPOCH_UTC + dt.timedelta(microseconds=int(value))
        if kind == "TimestampNTZType":
            return _EPOCH_NAIVE + dt.timedelta(microseconds=int(value))
    except (OverflowError, ValueError, Py4JError) as err:  # e.g. a timestamp beyond year 9999
        raise _CannotModel from err
    raise _CannotModel
