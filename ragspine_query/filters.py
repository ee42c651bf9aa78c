"""The nine metadata predicates, parsed once and applied as boolean masks over rows.

Predicates narrow the candidate set **before** any scoring or embedding. Values compare
as strings (ISO dates and periods such as ``2024Q3`` order correctly as strings).

Filters only narrow: a row that lacks the field (its value is empty) satisfies **no**
predicate on that field, not even ``ne`` or ``nin``. ``{"entity": {"ne": "ACME"}}``
therefore means "has an entity, and it is not ACME"; a row without an entity is not
returned. No predicate selects rows lacking a field (``eq ""`` matches nothing).

The one exception is a predicate built with ``keep_missing=True``: what filter extraction
(:mod:`ragspine_query.filter_extraction`) reads off a query. A row that lacks the field
passes it (the query named a company or a period; a memo with no ``entity`` field may be
about that company), so an *extracted* filter never excludes a document lacking the field.
A caller's filter never has it.

Accepted forms::

    {"entity": "ACME_CN"}                               # eq
    {"period": {"gte": "2024Q1"}}
    {"entity": {"in": ["ACME_CN", "ACME_US"]}}
    {"valid_as_of": {"between": ["2024-01-01", "2024-12-31"]}}   # inclusive
    parse_filter_arg("entity=in:ACME_CN,ACME_US")       # CLI form field=op:value
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Mapping, Sequence, cast

import numpy as np

from ragspine_core.errors import FilterError

OPERATORS = ("eq", "ne", "in", "nin", "gt", "gte", "lt", "lte", "between")
_LIST_OPS = ("in", "nin", "between")


@dataclass(frozen=True, slots=True)
class Predicate:
    """One validated ``field op value`` predicate."""

    field: str
    op: str
    value: str | tuple[str, ...]
    #: a row lacking the field passes (extracted predicates only; a caller's filter narrows)
    keep_missing: bool = False

    def __post_init__(self) -> None:
        if self.op not in OPERATORS:
            raise FilterError(
                f"unknown filter operator {self.op!r} for field {self.field!r}; allowed: {', '.join(OPERATORS)}"
            )
        if self.op in _LIST_OPS:
            if not isinstance(self.value, tuple) or not self.value:
                raise FilterError(f"filter {self.field!r} {self.op} needs a non-empty list of values, got {self.value!r}")
            if self.op == "between" and len(self.value) != 2:
                raise FilterError(
                    f"filter {self.field!r} between needs exactly two values [low, high], got {list(self.value)!r}"
                )
        elif not isinstance(self.value, str):
            raise FilterError(f"filter {self.field!r} {self.op} needs a single value, got {self.value!r}")

    def mask(self, column: np.ndarray) -> np.ndarray:
        """Boolean mask of rows of ``column`` (a numpy str array) satisfying the predicate.

        Filters only narrow: a row whose value is empty (it lacks the field) never matches,
        whatever the operator (``ne`` and ``nin`` included) — unless ``keep_missing``
        (an extracted predicate), when it always does.
        """
        if self.keep_missing:
            return cast("np.ndarray", self._raw_mask(column) | (column == ""))
        return cast("np.ndarray", self._raw_mask(column) & (column != ""))

    def _raw_mask(self, column: np.ndarray) -> np.ndarray:
        v: Any = self.value
        if self.op == "eq":
            return cast("np.ndarray", column == v)
        if self.op == "ne":
            return cast("np.ndarray", column != v)
        if self.op == "in":
            return np.isin(column, np.asarray(v))
        if self.op == "nin":
            return ~np.isin(column, np.asarray(v))
        if self.op == "between":
            lo, hi = v
            return cast("np.ndarray", (column >= lo) & (column <= hi))
        cmp = {"gt": np.greater, "gte": np.greater_equal, "lt": np.less, "lte": np.less_equal}[self.op]
        return cast("np.ndarray", cmp(column, v))

    def matches(self, value: str) -> bool:
        return bool(self.mask(np.asarray([value]))[0])


def _as_str(field: str, value: Any) -> str:
    if isinstance(value, bool) or value is None or isinstance(value, (dict, list, tuple, set)):
        raise FilterError(f"filter value for {field!r} must be a string or number, got {value!r}")
    return str(value)


def parse_filters(filters: Mapping[str, Any] | Sequence[Predicate] | None, *, allowed_fields: Sequence[str] | None = None) -> tuple[Predicate, ...]:
    """Validate a filter mapping into predicates (AND-combined, order preserved)."""
    if not filters:
        return ()
    if not isinstance(filters, Mapping):
        preds = tuple(filters)
        for p in preds:
            if not isinstance(p, Predicate):
                raise FilterError(f"filters must be a mapping or Predicate objects, got {p!r}")
    else:
        out: list[Predicate] = []
        for field, spec in filters.items():
            if isinstance(spec, Mapping):
                if not spec:
                    raise FilterError(f"filter for {field!r} is an empty mapping; give e.g. {{'eq': 'value'}}")
                for op, val in spec.items():
                    op = str(op).lower()
                    if op in _LIST_OPS:
                        if isinstance(val, (str, bytes)) or not isinstance(val, (list, tuple, set, frozenset)):
                            raise FilterError(f"filter {field!r} {op} needs a list of values, got {val!r}")
                        items = sorted(val) if isinstance(val, (set, frozenset)) else val
                        out.append(Predicate(field, op, tuple(_as_str(field, x) for x in items)))
                    else:
                        out.append(Predicate(field, op, _as_str(field, val)))
            elif isinstance(spec, (list, tuple, set, frozenset)):
                items = sorted(spec) if isinstance(spec, (set, frozenset)) else spec
                out.append(Predicate(field, "in", tuple(_as_str(field, x) for x in items)))
            else:
                out.append(Predicate(field, "eq", _as_str(field, spec)))
        preds = tuple(out)
    if allowed_fields is not None:
        allowed = set(allowed_fields)
        for p in preds:
            if p.field not in allowed:
                raise FilterError(
                    f"unknown filter field {p.field!r}; filterable fields: {', '.join(sorted(allowed))}"
                )
    return preds


def parse_filter_arg(arg: str) -> Predicate:
    """Parse the CLI form ``field=op:value`` (list values comma-separated); ``field=value`` means eq."""
    field, sep, rest = arg.partition("=")
    field = field.strip()
    if not sep or not field:
        raise FilterError(f"bad --filter {arg!r}: expected field=op:value, e.g. entity=eq:ACME_CN or period=between:2024Q1,2024Q4")
    op, sep2, value = rest.partition(":")
    if not sep2 or op.strip().lower() not in OPERATORS:
        if sep2 and op.strip().isidentifier() and op.strip().lower() not in OPERATORS:
            raise FilterError(f"unknown filter operator {op!r} in {arg!r}; allowed: {', '.join(OPERATORS)}")
        return Predicate(field, "eq", rest)
    op = op.strip().lower()
    if op in _LIST_OPS:
        values = tuple(v.strip() for v in value.split(","))
        return Predicate(field, op, values if op == "between" else tuple(v for v in values if v))
    return Predicate(field, op, value)


def combined_mask(predicates: Sequence[Predicate], columns: Mapping[str, np.ndarray], n_rows: int) -> np.ndarray | None:
    """AND of every predicate's mask; None when there is no predicate."""
    if not predicates:
        return None
    mask = np.ones(n_rows, dtype=bool)
    for p in predicates:
        mask &= p.mask(columns[p.field])
    return mask
