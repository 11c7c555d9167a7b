"""The predicate tree of a query's filter, its negation normal form, and the facts read off it.

A filter becomes a frozen tree of `Comparison`, `In`, `IsNull`, ... nodes holding plain
Python values (`labformat.read.catalyst` builds it from Spark's optimized plan). Whatever
the tree cannot say exactly is an `Unknown` leaf. The tree keeps SQL's three-valued logic:
a filter returns a row only when its condition is TRUE, never when it is FALSE or NULL.

- `negation_normal_form` pushes every NOT down to the leaves, exactly in that logic.
- `columns_referenced` lists the columns a filter reads.
- `key_equality_values` gives the finite set of values a column must take for the filter
  to hold (`key = v`, `key IN (...)`): the point lookups that the bloom filters answer.

Pure Python: no Spark, no JVM. `labformat.expressions.data_skipping` tests a tree against a base
file's column stats.
"""

from __future__ import annotations

import datetime as dt
import enum
from dataclasses import dataclass
from typing import Any, Union

__all__ = [
    "ALWAYS_FALSE", "ALWAYS_NULL", "ALWAYS_TRUE", "And", "Comparison", "Constant", "In", "IsNotNull", "IsNull",
    "Not", "Op", "Or", "Predicate", "StartsWith", "Unknown", "all_of", "any_of", "columns_referenced",
    "key_equality_values", "negation_normal_form",
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
    """`column IN (values)`, non-null values only (a NULL in the list is split off as `column = NULL`).

    With no values it is FALSE for every row, a NULL one included (Spark's rule for an empty list).
    """

    column: str
    values: tuple[Any, ...]

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


def key_equality_values(predicate: Predicate, column: str) -> set[Any] | None:
    """The finite set of values `column` must equal wherever the predicate is TRUE, or None if there is none.

    From `column = v` and `column IN (...)`; through AND (the intersection of the sides that
    constrain) and OR (the union, only when both sides constrain). An empty set means the
    predicate is never TRUE. The bloom index turns these values into point lookups.
    """
    return _equality_values(negation_normal_form(predicate), column)


def _equality_values(p: Predicate, column: str) -> set[Any] | None:
    if isinstance(p, Comparison):
        if p.value is None:
            return set()  # a comparison with NULL is never TRUE
        return {p.value} if p.column == column and p.op is Op.EQ else None
    if isinstance(p, In):
        return set(p.values) if p.column == column else None
    if isinstance(p, Constant):
        return None if p.value is True else set()
    if isinstance(p, And):
        result: set[Any] | None = None
        for child in p.children:
            values = _equality_values(child, column)
            if values is not None:
                result = values if result is None else _intersect(result, values)
        return result
    if isinstance(p, Or):
        union: set[Any] = set()
        for child in p.children:
            values = _equality_values(child, column)
            if values is None:
                return None
            union |= values
        return union
    return None


def _intersect(a: set[Any], b: set[Any]) -> set[Any]:
    # NaN = NaN is TRUE in Spark but two NaN objects are not equal members of a Python set:
    # keep one side whole then (still sound, only less tight). `v != v` holds for NaN only.
    if any(v != v for v in a | b):
        return a
    return a & b
