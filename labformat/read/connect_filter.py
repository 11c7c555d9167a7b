"""From a filter on a Spark Connect session to a `Predicate`, with no JVM on this side.

A Connect Column carries the unresolved expression it will send to the server
(`UnresolvedFunction(">", [ColumnReference("t"), LiteralExpression(5, LongType)])`); a SQL
string is parsed here by sqlglot (Spark dialect), and its constants (`'2024-01-16 10:00'`,
`DATE '2024-01-01'`, `1.5`, `-5`) are evaluated by the server in one query, so each has Spark's own
type and value, and a string compared with a date or timestamp column is cast as Spark casts it.
Nothing is optimized, so only what needs no optimizer becomes a `Predicate`: a column of the
table compared with a constant whose Python value orders as Spark would compare the two (the
same type family, no implicit cast that could round), AND, OR, NOT, IN, BETWEEN, IS [NOT] NULL,
`<=>`, a prefix LIKE or `startswith`. Everything else is `Unknown`: no file is skipped on its
account, and the query still filters every row.
"""

from __future__ import annotations

import datetime as dt
import struct
from dataclasses import dataclass
from decimal import Decimal
from typing import Any, Iterator

from pyspark.sql import types as T

from labformat.errors import ConfigError
from labformat.expressions.predicates import (
    ALWAYS_NULL,
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

__all__ = ["connect_predicate"]

_INTEGRAL = (T.ByteType, T.ShortType, T.IntegerType, T.LongType)
_FLOATING = (T.FloatType, T.DoubleType)
_TEMPORAL = (T.DateType, T.TimestampType)
# Above 2**53 a long cast to double (as Spark casts it beside a double) stops being exact.
_EXACT_IN_DOUBLE = 2 ** 53

_EPOCH_UTC = dt.datetime(1970, 1, 1, tzinfo=dt.timezone.utc)
_EPOCH_NAIVE = dt.datetime(1970, 1, 1)
_EPOCH_DATE = dt.date(1970, 1, 1)


class _CannotModel(Exception):
    """Raised inside a walk when an expression has to become `Unknown`."""


@dataclass(frozen=True)
class _Literal:
    """A constant as Python holds it (dates as `date`, timestamps as UTC `datetime`) and its Spark type."""

    value: Any
    data_type: T.DataType


def connect_predicate(spark: Any, condition: Any, schema: T.StructType) -> Predicate:
    """The `Predicate` of a filter (a Connect Column or a SQL string the server accepted) over `schema`."""
    if isinstance(condition, str):
        return _SqlWalker(spark, schema).predicate_of(condition)
    return _ColumnWalker(schema).predicate(condition._expr)


class _Schema:
    """Column lookup as Spark resolves names (case-insensitively), and the comparison rules."""

    def __init__(self, schema: T.StructType):
        self.fields = {f.name.lower(): f for f in schema.fields}

    def field(self, name: str) -> T.StructField:
        found = self.fields.get(name.lower())
        if found is None:  # the server accepted it: a name this schema does not hold as a column
            raise _CannotModel
        return found

    def name(self, name: str) -> str:
        found = self.fields.get(name.lower())
        return found.name if found else name

    @staticmethod
    def value(lit: _Literal, field: T.StructField) -> Any:
        """`lit`'s value, when it compares with `field` as Spark compares the two (else _CannotModel)."""
        value, lit_type, col = lit.value, lit.data_type, field.dataType
        if isinstance(lit_type, T.NullType) or value is None:
            return None
        if isinstance(col, T.StringType):
            if not isinstance(lit_type, T.StringType) or getattr(col, "collation", "UTF8_BINARY") != "UTF8_BINARY":
                raise _CannotModel  # other collations do not order by code point
            return value
        if isinstance(col, _INTEGRAL + _FLOATING + (T.DecimalType,)):
            return _number(value, lit_type, col)
        for spark_type in (T.BooleanType, T.BinaryType, T.DateType, T.TimestampType, T.TimestampNTZType):
            if isinstance(col, spark_type) and type(lit_type) is spark_type:
                return value
        raise _CannotModel


def _number(value: Any, lit: T.DataType, col: T.DataType) -> Any:
    if isinstance(lit, _INTEGRAL):
        if isinstance(col, _FLOATING) and abs(value) >= _EXACT_IN_DOUBLE:
            raise _CannotModel
        return int(value)
    if isinstance(lit, T.FloatType):
        value = struct.unpack("f", struct.pack("f", float(value)))[0]  # the float32 Spark holds
    if isinstance(lit, _FLOATING):
        if isinstance(col, T.DecimalType):
            raise _CannotModel  # Spark compares as doubles, Python a Decimal with a float exactly
        return float(value)
    if isinstance(lit, T.DecimalType):
        # Beside a double Spark casts the decimal to the nearest double, which float() is.
        return float(value) if isinstance(col, _FLOATING) else Decimal(value)
    raise _CannotModel


def _in(column: str, values: list[Any]) -> Predicate:
    present = tuple(dict.fromkeys(v for v in values if v is not None))
    if any(v is None for v in values):  # x IN (1, NULL): TRUE when x = 1, else NULL; its negation never TRUE
        return any_of(In(column, present), Comparison(column, Op.EQ, None))
    return In(column, present)


def _equal_null_safe(column: str, value: Any) -> Predicate:
    if value is None:
        return IsNull(column)
    # x <=> v is never NULL: FALSE for a NULL x, exactly `x = v AND x IS NOT NULL`.
    return all_of(Comparison(column, Op.EQ, value), IsNotNull(column))


# ---- a Connect Column ------------------------------------------------------------------------------

_COMPARISONS = {"==": Op.EQ, "<": Op.LT, "<=": Op.LE, ">": Op.GT, ">=": Op.GE}


def _kind(e: Any) -> str:
    return type(e).__name__


class _ColumnWalker:
    def __init__(self, schema: T.StructType):
        self.schema = _Schema(schema)

    def predicate(self, e: Any) -> Predicate:
        try:
            return self._predicate(e)
        except _CannotModel:
            return Unknown(repr(e), frozenset(self._columns(e)))

    def _predicate(self, e: Any) -> Predicate:
        name = e._name.lower() if _kind(e) == "UnresolvedFunction" else None
        args = list(e._args) if name is not None else []
        if name == "and" and len(args) == 2:
            return all_of(self.predicate(args[0]), self.predicate(args[1]))
        if name == "or" and len(args) == 2:
            return any_of(self.predicate(args[0]), self.predicate(args[1]))
        if name == "not" and len(args) == 1:
            return Not(self.predicate(args[0]))
        if name in _COMPARISONS and len(args) == 2:
            return self._comparison(_COMPARISONS[name], *args)
        if name == "!=" and len(args) == 2:
            return Not(self._comparison(Op.EQ, *args))
        if name == "<=>" and len(args) == 2:
            column, other = (args[0], args[1]) if _kind(args[0]) == "ColumnReference" else (args[1], args[0])
            field = self._field(column)
            return _equal_null_safe(field.name, self.schema.value(self._literal(other), field))
        if name == "in" and args:
            field = self._field(args[0])
            return _in(field.name, [self.schema.value(self._literal(a), field) for a in args[1:]])
        if name in ("isnull", "isnotnull") and len(args) == 1:
            return (IsNull if name == "isnull" else IsNotNull)(self._field(args[0]).name)
        if name == "startswith" and len(args) == 2:
            field = self._field(args[0])
            prefix = self.schema.value(self._literal(args[1]), field)
            if not isinstance(prefix, str) and prefix is not None:
                raise _CannotModel
            return ALWAYS_NULL if prefix is None else StartsWith(field.name, prefix)
        if _kind(e) == "ColumnReference" and isinstance(self._field(e).dataType, T.BooleanType):
            return Comparison(self._field(e).name, Op.EQ, True)  # `WHERE flag`
        if _kind(e) == "LiteralExpression" and isinstance(e._dataType, (T.BooleanType, T.NullType)):
            return Constant(e._value)
        raise _CannotModel

    def _comparison(self, op: Op, left: Any, right: Any) -> Predicate:
        if _kind(left) != "ColumnReference":
            left, right, op = right, left, op.mirrored()
        field = self._field(left)
        return Comparison(field.name, op, self.schema.value(self._literal(right), field))

    def _field(self, e: Any) -> T.StructField:
        if _kind(e) != "ColumnReference" or e._is_metadata_column:
            raise _CannotModel
        name = e._unparsed_identifier
        if len(name) > 1 and name[0] == name[-1] == "`":
            name = name[1:-1].replace("``", "`")
        elif "." in name:
            raise _CannotModel  # a struct field (or a qualified name): not a column's own stats
        return self.schema.field(name)

    @staticmethod
    def _literal(e: Any) -> _Literal:
        """A LiteralExpression's value; it holds dates as days and timestamps as microseconds."""
        if _kind(e) != "LiteralExpression":
            raise _CannotModel
        value, data_type = e._value, e._dataType
        try:
            if value is not None and isinstance(data_type, T.DateType):
                value = _EPOCH_DATE + dt.timedelta(days=int(value))
            elif value is not None and isinstance(data_type, T.TimestampType):
                value = _EPOCH_UTC + dt.timedelta(microseconds=int(value))
            elif value is not None and isinstance(data_type, T.TimestampNTZType):
                value = _EPOCH_NAIVE + dt.timedelta(microseconds=int(value))
        except OverflowError as err:
            raise _CannotModel from err
        return _Literal(value, data_type)

    def _columns(self, e: Any) -> set[str]:
        found = set()
        if _kind(e) == "ColumnReference":
            found.add(self.schema.name(e._unparsed_identifier.strip("`")))
        children = list(getattr(e, "_args", None) or ())
        children += [c for c in (getattr(e, "_expr", None), getattr(e, "_child", None)) if c is not None]
        for child in children:
            found |= self._columns(child)
        return found


# ---- a SQL string -----------------------------------------------------------------------------------


class _SqlWalker:
    """A SQL condition through sqlglot's parse tree; its constants evaluated by the server in one query."""

    def __init__(self, spark: Any, schema: T.StructType):
        self.spark = spark
        self.schema = _Schema(schema)
        self.constants: dict[int, _Literal | None] = {}

    def predicate_of(self, condition: str) -> Predicate:
        try:
            import sqlglot
            from sqlglot import exp
        except ImportError:
            from labformat.spark.session import CONNECT_EXTRA

            raise ConfigError("a SQL filter on a Spark Connect session is parsed here by sqlglot, which is not "
                              f"installed: {CONNECT_EXTRA})") from None

        self.exp = exp
        try:
            tree = sqlglot.parse_one(condition, read="spark")
        except sqlglot.errors.ParseError:  # the server parsed it; sqlglot cannot: claim nothing
            return Unknown(condition)
        self._evaluate_constants(tree)
        return self.predicate(tree)

    # -- constants

    def _is_constant(self, node: Any) -> bool:
        exp = self.exp
        return (node.find(exp.Column, exp.Subquery, exp.Select, exp.AggFunc) is None
                and not isinstance(node, (exp.Null, exp.Boolean)))

    def _comparisons(self, tree: Any) -> Iterator[tuple[Any, Any]]:
        """(constant node, the column it is compared with) for every constant the predicate could use."""
        exp = self.exp
        for node in tree.walk():
            if isinstance(node, (exp.EQ, exp.NEQ, exp.GT, exp.GTE, exp.LT, exp.LTE, exp.NullSafeEQ, exp.Like)):
                pairs = [(node.this, node.expression), (node.expression, node.this)]
            elif isinstance(node, exp.Between):
                pairs = [(node.this, node.args["low"]), (node.this, node.args["high"])]
            elif isinstance(node, exp.In) and not node.args.get("query"):
                pairs = [(node.this, e) for e in node.expressions]
            else:
                continue
            for column, other in pairs:
                if isinstance(column, exp.Column) and self._is_constant(other):
                    yield other, column

    def _evaluate_constants(self, tree: Any) -> None:
        pairs = list(self._comparisons(tree))
        if not pairs:
            return
        texts = [node.sql(dialect="spark") for node, _ in pairs]
        try:
            types = self.spark.sql("SELECT " + ", ".join(f"{t} AS c{i}" for i, t in enumerate(texts))).schema
        except Exception:  # noqa: BLE001 - a constant sqlglot rewrote into SQL Spark rejects: claim nothing
            return
        selects, kinds = [], []
        for i, ((_, column), text) in enumerate(zip(pairs, texts)):
            data_type = types.fields[i].dataType
            target = self._temporal_target(column, data_type)
            if target is not None:  # Spark casts a string compared with a date or timestamp column
                text, data_type = f"TRY_CAST({text} AS {target.simpleString().upper()})", target
            if isinstance(data_type, T.DateType):
                text = f"unix_date({text})"
            elif isinstance(data_type, T.TimestampType):
                text = f"unix_micros({text})"
            elif isinstance(data_type, T.TimestampNTZType):
                data_type = None  # its value depends on the session's time zone on the way here
            selects.append(f"{text} AS c{i}")
            kinds.append(data_type)
        try:
            row = self.spark.sql("SELECT " + ", ".join(selects)).first()
        except Exception:  # noqa: BLE001 - an ANSI cast error: the query itself will report it
            return
        for (node, _), data_type, raw, text in zip(pairs, kinds, row, texts):
            if data_type is None:
                continue
            if raw is None and not isinstance(node, self.exp.Null) and "NULL" not in text.upper():
                continue  # a string no date or timestamp reads: Spark's filter decides, not the stats
            if raw is not None and isinstance(data_type, T.DateType):
                raw = _EPOCH_DATE + dt.timedelta(days=raw)
            elif raw is not None and isinstance(data_type, T.TimestampType):
                raw = _EPOCH_UTC + dt.timedelta(microseconds=raw)
            self.constants[id(node)] = _Literal(raw, data_type)

    def _temporal_target(self, column: Any, data_type: T.DataType) -> T.DataType | None:
        if not isinstance(data_type, T.StringType):
            return None
        try:
            col_type = self._field(column).dataType
        except _CannotModel:
            return None
        return col_type if type(col_type) in _TEMPORAL else None

    # -- the boolean structure

    def predicate(self, node: Any) -> Predicate:
        try:
            return self._predicate(node)
        except _CannotModel:
            columns = frozenset(self.schema.name(c.name) for c in node.find_all(self.exp.Column))
            return Unknown(node.sql(dialect="spark"), columns)

    def _predicate(self, node: Any) -> Predicate:
        exp = self.exp
        if isinstance(node, exp.Paren):
            return self.predicate(node.this)
        if isinstance(node, exp.And):
            return all_of(self.predicate(node.this), self.predicate(node.expression))
        if isinstance(node, exp.Or):
            return any_of(self.predicate(node.this), self.predicate(node.expression))
        if isinstance(node, exp.Not):
            return Not(self.predicate(node.this))
        comparisons = {exp.EQ: Op.EQ, exp.GT: Op.GT, exp.GTE: Op.GE, exp.LT: Op.LT, exp.LTE: Op.LE}
        if type(node) in comparisons:
            return self._comparison(comparisons[type(node)], node.this, node.expression)
        if isinstance(node, exp.NEQ):
            return Not(self._comparison(Op.EQ, node.this, node.expression))
        if isinstance(node, exp.NullSafeEQ):
            column, other = (node.this, node.expression) if isinstance(node.this, exp.Column) else (node.expression, node.this)
            field = self._field(column)
            return _equal_null_safe(field.name, self._value(other, field))
        if isinstance(node, exp.Between):
            return all_of(self._comparison(Op.GE, node.this, node.args["low"]),
                          self._comparison(Op.LE, node.this, node.args["high"]))
        if isinstance(node, exp.In) and not node.args.get("query"):
            field = self._field(node.this)
            return _in(field.name, [self._value(e, field) for e in node.expressions])
        if isinstance(node, exp.Is) and isinstance(node.expression, exp.Null):
            return IsNull(self._field(node.this).name)
        if isinstance(node, exp.Like) and not node.args.get("escape"):
            field = self._field(node.this)
            pattern = self._value(node.expression, field)
            if pattern is None:
                return ALWAYS_NULL
            prefix = pattern[:-1] if isinstance(pattern, str) and pattern.endswith("%") else None
            if prefix is None or any(c in prefix for c in "%_\\"):
                raise _CannotModel  # only 'prefix%' is a range of keys
            return StartsWith(field.name, prefix)
        if isinstance(node, exp.Column) and isinstance(self._field(node).dataType, T.BooleanType):
            return Comparison(self._field(node).name, Op.EQ, True)  # `WHERE flag`
        if isinstance(node, exp.Boolean):
            return Constant(bool(node.this))
        if isinstance(node, exp.Null):
            return ALWAYS_NULL
        raise _CannotModel

    def _comparison(self, op: Op, left: Any, right: Any) -> Predicate:
        if not isinstance(left, self.exp.Column):
            left, right, op = right, left, op.mirrored()
        field = self._field(left)
        return Comparison(field.name, op, self._value(right, field))

    def _field(self, node: Any) -> T.StructField:
        if not isinstance(node, self.exp.Column) or node.table:
            raise _CannotModel  # a function of a column, a qualified name, a struct field
        return self.schema.field(node.name)

    def _value(self, node: Any, field: T.StructField) -> Any:
        if isinstance(node, self.exp.Null):
            return None
        literal = self.constants.get(id(node))
        if literal is None:
            raise _CannotModel
        return self.schema.value(literal, field)
