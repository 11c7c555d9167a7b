"""Data-skipping predicates: a filter that Spark parses, as a small tree, tested against one file's min/max stats.

The path of a snapshot query's filter through this module:

1. `to_predicate` lets Spark parse, analyze and optimize the filter over an empty
   DataFrame of the table's schema, and turns the optimized Catalyst condition into a
   frozen tree of `Comparison`, `In`, `IsNull`, ... nodes with plain Python values.
   Whatever the tree cannot say exactly becomes `Unknown`.
2. `might_match` answers, for one base file's column stats, `ROWS_CANNOT_MATCH` only when
   no row of that file can make the filter TRUE (SQL three-valued logic: a filter returns a
   row only when its condition is TRUE, never when it is FALSE or NULL). Otherwise it
   answers `ROWS_MIGHT_MATCH`. Skipping must never lose a row; it may keep a useless file.
3. `key_equality_values` gives the finite set of values a column must take for the filter
   to hold (`key = v`, `key IN (...)`): the point lookups that the bloom filters answer.
"""

from __future__ import annotations

import contextlib
import datetime as dt
import enum
import numbers
import struct
from dataclasses import dataclass
from decimal import Decimal
from typing import Any, Mapping, Union

from py4j.protocol import Py4JError
from pyspark.errors import PySparkException
from pyspark.sql import Column, SparkSession
from pyspark.sql import types as T

from labformat.model.column_stats import ColumnStats
from labformat.errors import InvalidInputError, LabformatError

__all__ = [
    "ALWAYS_FALSE", "ALWAYS_NULL", "ALWAYS_TRUE", "And", "ColumnStats", "Comparison", "Constant", "In",
    "IsNotNull", "IsNull", "Match", "Not", "Op", "Or", "Predicate", "ROWS_CANNOT_MATCH", "ROWS_MIGHT_MATCH",
    "StartsWith", "Unknown", "all_of", "any_of", "columns_referenced", "key_equality_values", "might_match",
    "negation_normal_form", "to_predicate",
]

# ---- the predicate tree ------------------------------------------------------------------


class Op(enum.Enum):
    """A comparison operator, always read as `column <op> value`."""

    EQ = "="
    NE = "!="
    LT = "<"
    LE = "<="
    GT = ">"
    GE = ">="

    def negated(self) -> "Op":
        """NOT (x < v) is x >= v: exact in three-valued logic, since a NULL x stays NULL on both sides."""
        return _NEGATED[self]

    def mirrored(self) -> "Op":
        """`v < x` read from the column's side: `x > v`."""
        return _MIRRORED[self]


_NEGATED = {Op.EQ: Op.NE, Op.NE: Op.EQ, Op.LT: Op.GE, Op.LE: Op.GT, Op.GT: Op.LE, Op.GE: Op.LT}
_MIRRORED = {Op.EQ: Op.EQ, Op.NE: Op.NE, Op.LT: Op.GT, Op.LE: Op.GE, Op.GT: Op.LT, Op.GE: Op.LE}


@dataclass(frozen=True)
class Comparison:
    """`column <op> value`. A `value` of None is SQL NULL: the comparison is never TRUE, nor is its negation."""

    column: str
    op: Op
    value: Any

    def __str__(self) -> str:
        return f"{self.column} {self.op.value} {_show(self.value)}"


@dataclass(frozen=True)
class In:
    """`column IN (values)`, non-null values only (a NULL in the list is split off as `column = NULL`)."""

    column: str
    values: tuple

    def __str__(self) -> str:
        return f"{self.column} IN ({', '.join(_show(v) for v in self.values)})"


@dataclass(frozen=True)
class IsNull:
    """`column IS NULL`: TRUE or FALSE, never NULL."""

    column: str

    def __str__(self) -> str:
        return f"{self.column} IS NULL"


@dataclass(frozen=True)
class IsNotNull:
    """`column IS NOT NULL`: TRUE or FALSE, never NULL."""

    column: str

    def __str__(self) -> str:
        return f"{self.column} IS NOT NULL"


@dataclass(frozen=True)
class StartsWith:
    """`column LIKE 'prefix%'` on a string column (or its negation, which is TRUE for non-null misses)."""

    column: str
    prefix: str
    negated: bool = False

    def __str__(self) -> str:
        return f"{self.column} {'NOT ' if self.negated else ''}LIKE {_show(self.prefix + '%')}"


@dataclass(frozen=True)
class And:
    """TRUE when every child is TRUE. No children: TRUE."""

    children: tuple["Predicate", ...]

    def __str__(self) -> str:
        return " AND ".join(_show_child(c) for c in self.children) if self.children else "TRUE"


@dataclass(frozen=True)
class Or:
    """TRUE when some child is TRUE. No children: FALSE."""

    children: tuple["Predicate", ...]

    def __str__(self) -> str:
        return " OR ".join(_show_child(c) for c in self.children) if self.children else "FALSE"


@dataclass(frozen=True)
class Not:
    """`NOT child`: TRUE where the child is FALSE; NULL stays NULL."""

    child: "Predicate"

    def __str__(self) -> str:
        return f"NOT {_show_child(self.child)}"


@dataclass(frozen=True)
class Constant:
    """A condition Spark folded to a constant: True, False, or None (NULL, which no row satisfies)."""

    value: bool | None

    def __str__(self) -> str:
        return {True: "TRUE", False: "FALSE", None: "NULL"}[self.value]


@dataclass(frozen=True)
class Unknown:
    """A part of the filter the stats cannot judge (functions of columns, LIKE '%x', column vs column, ...).

    `description` is Spark's SQL text for it; `columns` are the columns it reads.
    """

    description: str
    columns: frozenset[str] = frozenset()

    def __str__(self) -> str:
        return f"UNKNOWN[{self.description}]"


Predicate = Union[Comparison, In, IsNull, IsNotNull, StartsWith, And, Or, Not, Constant, Unknown]

ALWAYS_TRUE = Constant(True)
ALWAYS_FALSE = Constant(False)
ALWAYS_NULL = Constant(None)


def all_of(*predicates: Predicate) -> Predicate:
    """AND of `predicates`, nested ANDs flattened; a single one is returned as it is."""
    flat: list[Predicate] = []
    for p in predicates:
        flat.extend(p.children if isinstance(p, And) else (p,))
    return flat[0] if len(flat) == 1 else And(tuple(flat))


def any_of(*predicates: Predicate) -> Predicate:
    """OR of `predicates`, nested ORs flattened; a single one is returned as it is."""
    flat: list[Predicate] = []
    for p in predicates:
        flat.extend(p.children if isinstance(p, Or) else (p,))
    return flat[0] if len(flat) == 1 else Or(tuple(flat))


def _show(value: Any) -> str:
    if isinstance(value, dt.datetime):
        return repr(value.isoformat(sep=" "))
    if isinstance(value, dt.date):
        return repr(value.isoformat())
    return "NULL" if value is None else repr(value)


def _show_child(p: Predicate) -> str:
    return f"({p})" if isinstance(p, (And, Or)) and len(p.children) > 1 else str(p)


# ---- negation, referenced columns, key lookups -----------------------------------------


def negation_normal_form(predicate: Predicate) -> Predicate:
    """The same condition with every NOT pushed down to the leaves and removed.

    Each rewrite is exact in SQL three-valued logic, so it keeps which rows are TRUE:
    De Morgan for AND/OR; NOT (x < v) is x >= v (a NULL x gives NULL both ways);
    NOT (x IN (a, b)) is x != a AND x != b; NOT (x IS NULL) is x IS NOT NULL;
    NOT NULL is NULL. A negated `Unknown` stays unknown.
    """
    if isinstance(predicate, Not):
        return _negate(predicate.child)
    if isinstance(predicate, And):
        return all_of(*(negation_normal_form(c) for c in predicate.children))
    if isinstance(predicate, Or):
        return any_of(*(negation_normal_form(c) for c in predicate.children))
    return predicate


def _negate(p: Predicate) -> Predicate:
    """NOT p, in negation normal form."""
    if isinstance(p, Not):
        return negation_normal_form(p.child)
    if isinstance(p, And):
        return any_of(*(_negate(c) for c in p.children)) if p.children else ALWAYS_FALSE
    if isinstance(p, Or):
        return all_of(*(_negate(c) for c in p.children)) if p.children else ALWAYS_TRUE
    if isinstance(p, Comparison):
        return Comparison(p.column, p.op.negated(), p.value)
    if isinstance(p, In):
        return all_of(*(Comparison(p.column, Op.NE, v) for v in p.values)) if p.values else ALWAYS_TRUE
    if isinstance(p, IsNull):
        return IsNotNull(p.column)
    if isinstance(p, IsNotNull):
        return IsNull(p.column)
    if isinstance(p, StartsWith):
        return StartsWith(p.column, p.prefix, not p.negated)
    if isinstance(p, Constant):
        return p if p.value is None else Constant(not p.value)
    if isinstance(p, Unknown):
        return Unknown(f"NOT ({p.description})", p.columns)
    raise TypeError(f"not a predicate: {p!r}")


def columns_referenced(predicate: Predicate) -> set[str]:
    """Every column the predicate reads, including those inside `Unknown` parts."""
    if isinstance(predicate, (And, Or)):
        return set().union(*(columns_referenced(c) for c in predicate.children))
    if isinstance(predicate, Not):
        return columns_referenced(predicate.child)
    if isinstance(predicate, Unknown):
        return set(predicate.columns)
    if isinstance(predicate, Constant):
        return set()
    return {predicate.column}


def key_equality_values(predicate: Predicate, column: str) -> set | None:
    """The finite set of values `column` must equal wherever the predicate is TRUE, or None if there is none.

    From `column = v` and `column IN (...)`; through AND (the intersection of the sides that
    constrain) and OR (the union, only when both sides constrain). An empty set means the
    predicate is never TRUE. The bloom index turns these values into point lookups.
    """
    return _equality_values(negation_normal_form(predicate), column)


def _equality_values(p: Predicate, column: str) -> set | None:
    if isinstance(p, Comparison):
        if p.value is None:
            return set()  # a comparison with NULL is never TRUE
        return {p.value} if p.column == column and p.op is Op.EQ else None
    if isinstance(p, In):
        return set(p.values) if p.column == column else None
    if isinstance(p, Constant):
        return None if p.value is True else set()
    if isinstance(p, And):
        result: set | None = None
        for child in p.children:
            values = _equality_values(child, column)
            if values is not None:
                result = values if result is None else _intersect(result, values)
        return result
    if isinstance(p, Or):
        union: set = set()
        for child in p.children:
            values = _equality_values(child, column)
            if values is None:
                return None
            union |= values
        return union
    return None


def _intersect(a: set, b: set) -> set:
    # NaN = NaN is TRUE in Spark but two NaN objects are not equal members of a Python set:
    # keep one side whole then (still sound, only less tight).
    if any(_is_nan(v) for v in a | b):
        return a
    return a & b


# ---- one file's stats and the skipping test ----------------------------------------------


class Match(enum.Enum):
    """The answer of the skipping test for one file. Not a bool on purpose: compare it to a constant."""

    ROWS_CANNOT_MATCH = "rows cannot match"
    ROWS_MIGHT_MATCH = "rows might match"

    def __bool__(self) -> bool:
        # `if might_match(...)` would be always true and silently prune nothing.
        raise TypeError("compare a Match with ROWS_MIGHT_MATCH or ROWS_CANNOT_MATCH instead of testing its truth")


ROWS_CANNOT_MATCH = Match.ROWS_CANNOT_MATCH
ROWS_MIGHT_MATCH = Match.ROWS_MIGHT_MATCH


def might_match(predicate: Predicate, stats: Mapping[str, ColumnStats]) -> Match:
    """`ROWS_CANNOT_MATCH` only if no row of the file described by `stats` can make `predicate` TRUE.

    `stats` maps a column name to that column's `ColumnStats` in one file. A column without
    stats, and every `Unknown` part, might match.
    """
    return ROWS_MIGHT_MATCH if _might_be_true(negation_normal_form(predicate), stats) else ROWS_CANNOT_MATCH


def _might_be_true(p: Predicate, stats: Mapping[str, ColumnStats]) -> bool:
    """Can some row make `p` (in negation normal form) TRUE? False only with proof."""
    if isinstance(p, And):
        return all(_might_be_true(c, stats) for c in p.children)
    if isinstance(p, Or):
        return any(_might_be_true(c, stats) for c in p.children)
    if isinstance(p, Constant):
        return p.value is True
    if isinstance(p, Unknown):
        return True
    if isinstance(p, Not):  # not reached after negation_normal_form; kept so the function is total
        return _might_be_true(negation_normal_form(p), stats)
    if isinstance(p, Comparison) and p.value is None:
        return False  # x <op> NULL is NULL for every row
    s = stats.get(p.column)
    if s is None:
        return True
    if isinstance(p, IsNull):
        return s.null_count is None or s.null_count > 0
    if not s.may_hold_non_null():
        return False  # all rows NULL: IS NOT NULL is FALSE, every other leaf is NULL
    if isinstance(p, IsNotNull):
        return True
    if isinstance(p, Comparison):
        return _value_might_satisfy(s, p.op, p.value)
    if isinstance(p, In):
        return any(_value_might_satisfy(s, Op.EQ, v) for v in p.values)
    if isinstance(p, StartsWith):
        return _prefix_might_satisfy(s, p.prefix, p.negated)
    raise TypeError(f"not a predicate: {p!r}")


_NAN_KEY = (1, 0.0)


def _is_floating(v: Any) -> bool:
    return isinstance(v, numbers.Real) and not isinstance(v, numbers.Integral)


def _is_nan(v: Any) -> bool:
    return _is_floating(v) and v != v


def _sort_key(v: Any) -> tuple:
    """Spark's order as a Python key: NaN above every number; naive datetimes read as UTC."""
    if _is_floating(v):
        return _NAN_KEY if v != v else (0, float(v))
    if isinstance(v, dt.datetime) and v.tzinfo is None:
        return (0, v.replace(tzinfo=dt.timezone.utc))
    return (0, v)


def _holds(a: tuple, op: Op, b: tuple) -> bool:
    if op is Op.EQ:
        return a == b
    if op is Op.NE:
        return a != b
    if op is Op.LT:
        return a < b
    if op is Op.LE:
        return a <= b
    if op is Op.GT:
        return a > b
    return a >= b


def _value_might_satisfy(s: ColumnStats, op: Op, value: Any) -> bool:
    """Might some non-null value x of the file, min <= x <= max or NaN, make `x <op> value` TRUE?"""
    if s.min is None or s.max is None or _is_nan(s.min):
        return True  # no bounds; a NaN minimum only comes from stats that put NaN in the wrong place
    try:
        lo, hi, v = _sort_key(s.min), _sort_key(s.max), _sort_key(value)
        if op is Op.EQ:
            in_range = lo <= v <= hi
        elif op is Op.NE:
            in_range = not (lo == v == hi)  # only a file holding nothing but `value` fails
        elif op in (Op.LT, Op.LE):
            in_range = _holds(lo, op, v)
        else:
            in_range = _holds(hi, op, v)
        nan_may_be_present = s.nan_count != 0 and (_is_floating(s.min) or _is_floating(s.max))
        return in_range or (nan_may_be_present and _holds(_NAN_KEY, op, v))
    except TypeError:
        return True  # stats and literal of types Python cannot order: no proof, keep the file


def _prefix_might_satisfy(s: ColumnStats, prefix: str, negated: bool) -> bool:
    """Truncation to len(prefix) is monotone, so every value's head lies in [min[:n], max[:n]]."""
    if not isinstance(s.min, str) or not isinstance(s.max, str):
        return True
    n = len(prefix)
    lo, hi = s.min[:n], s.max[:n]
    if negated:
        return not (lo == prefix == hi)
    return lo <= prefix <= hi


# ---- from a Spark filter to a predicate ---------------------------------------------------


@contextlib.contextmanager
def _quiet_query_context_logs():
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
    try:
        with _quiet_query_context_logs():
            execution = relation.filter(condition)._jdf.queryExecution()
        analyzed, optimized = execution.analyzed(), execution.optimizedPlan()
    except AttributeError as e:  # Spark Connect: there is no JVM plan to read on this side
        raise LabformatError("to_predicate needs a classic (py4j) SparkSession, not Spark Connect") from e
    except (PySparkException, Py4JError) as e:
        hint = ""
        if "MISSING_ATTRIBUTES" in str(e):
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
    return java_object.getClass().getSimpleName().rstrip("$")


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

    def _in(self, value_expr: Any, values: list) -> Predicate:
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
        return e.name()

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
