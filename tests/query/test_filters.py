"""Tier 1: the nine metadata predicates, their validation and the CLI form."""

from __future__ import annotations

import numpy as np
import pytest

from ragspine_core.errors import FilterError
from ragspine_query.filters import OPERATORS, Predicate, combined_mask, parse_filter_arg, parse_filters

PERIOD = np.asarray(["2024Q1", "2024Q3", "", "2025H1", "2024Q4", "2024Q3"])
ENTITY = np.asarray(["ACME_CN", "ACME_US", "ACME_CN", "GLOBEX", "", "ACME_EU"])
FIELDS = ("entity", "period", "valid_as_of")


def rows(pred: Predicate, column: np.ndarray = PERIOD) -> list[int]:
    return np.flatnonzero(pred.mask(column)).tolist()


def test_exactly_nine_operators():
    assert OPERATORS == ("eq", "ne", "in", "nin", "gt", "gte", "lt", "lte", "between")


@pytest.mark.parametrize(
    ("op", "value", "expected"),
    [
        ("eq", "2024Q3", [1, 5]),
        ("ne", "2024Q3", [0, 3, 4]),  # row 2 lacks the field: filters only narrow
        ("in", ("2024Q1", "2025H1"), [0, 3]),
        ("nin", ("2024Q1", "2025H1"), [1, 4, 5]),
        ("gt", "2024Q3", [3, 4]),
        ("gte", "2024Q3", [1, 3, 4, 5]),
        ("lt", "2024Q3", [0]),  # the empty value never satisfies an ordering predicate
        ("lte", "2024Q3", [0, 1, 5]),
        ("between", ("2024Q2", "2024Q4"), [1, 4, 5]),  # inclusive on both ends
    ],
)
def test_each_operator_on_a_small_column(op, value, expected):
    assert rows(Predicate("period", op, value)) == expected


def test_mapping_forms_parse_to_predicates_in_order():
    preds = parse_filters({
        "entity": "ACME_CN",
        "period": {"gte": "2024Q1", "lt": "2025"},
        "valid_as_of": {"between": ["2024-01-01", "2024-12-31"]},
        "topic": ["finance", "strategy"],
    })
    assert preds == (
        Predicate("entity", "eq", "ACME_CN"),
        Predicate("period", "gte", "2024Q1"),
        Predicate("period", "lt", "2025"),
        Predicate("valid_as_of", "between", ("2024-01-01", "2024-12-31")),
        Predicate("topic", "in", ("finance", "strategy")),
    )


def test_numbers_are_compared_as_strings():
    assert parse_filters({"period": {"gte": 2024}}) == (Predicate("period", "gte", "2024"),)


def test_empty_filters_mean_no_predicate():
    assert parse_filters(None) == ()
    assert parse_filters({}) == ()
    assert combined_mask((), {}, 3) is None


def test_combined_mask_is_an_and():
    preds = parse_filters({"entity": "ACME_CN", "period": {"gte": "2024Q1"}})
    mask = combined_mask(preds, {"entity": ENTITY, "period": PERIOD}, len(PERIOD))
    assert np.flatnonzero(mask).tolist() == [0]  # row 2 is ACME_CN but has no period


@pytest.mark.parametrize(
    ("filters", "message"),
    [
        ({"period": {"like": "2024%"}}, r"unknown filter operator 'like' for field 'period'; allowed: eq, ne, in"),
        ({"entity": {"in": "ACME_CN"}}, r"'entity' in needs a list of values"),
        ({"entity": {"in": []}}, r"'entity' in needs a non-empty list"),
        ({"period": {"between": ["2024Q1"]}}, r"between needs exactly two values"),
        ({"period": {"between": ["a", "b", "c"]}}, r"between needs exactly two values"),
        ({"entity": None}, r"filter value for 'entity' must be a string or number, got None"),
        ({"entity": True}, r"filter value for 'entity' must be a string or number"),
        ({"period": {"gt": ["2024Q1"]}}, r"filter value for 'period' must be a string or number"),
        ({"entity": {}}, r"empty mapping"),
    ],
)
def test_bad_operator_or_value_is_a_filter_error_naming_it(filters, message):
    with pytest.raises(FilterError, match=message):
        parse_filters(filters, allowed_fields=FIELDS)


def test_unknown_field_lists_the_filterable_fields():
    with pytest.raises(FilterError, match=r"unknown filter field 'entitee'; filterable fields: entity, period, valid_as_of"):
        parse_filters({"entitee": "ACME_CN"}, allowed_fields=FIELDS)


def test_filter_error_is_a_value_error():
    assert issubclass(FilterError, ValueError)


# ---------------------------------------------------------------------------- CLI
@pytest.mark.parametrize(
    ("arg", "expected"),
    [
        ("entity=eq:ACME_CN", Predicate("entity", "eq", "ACME_CN")),
        ("entity=ACME_CN", Predicate("entity", "eq", "ACME_CN")),
        ("entity=EQ:ACME_CN", Predicate("entity", "eq", "ACME_CN")),
        ("entity=in:ACME_CN,ACME_US", Predicate("entity", "in", ("ACME_CN", "ACME_US"))),
        ("entity=nin:GLOBEX", Predicate("entity", "nin", ("GLOBEX",))),
        ("period=between:2024Q1,2024Q4", Predicate("period", "between", ("2024Q1", "2024Q4"))),
        ("period=gte:2024Q3", Predicate("period", "gte", "2024Q3")),
        ("source_locator=web/faq.html", Predicate("source_locator", "eq", "web/faq.html")),
        ("valid_as_of=lt:2025-01-01", Predicate("valid_as_of", "lt", "2025-01-01")),
    ],
)
def test_cli_filter_form_field_op_value(arg, expected):
    assert parse_filter_arg(arg) == expected


@pytest.mark.parametrize(
    ("arg", "message"),
    [
        ("entity", r"expected field=op:value"),
        ("=eq:x", r"expected field=op:value"),
        ("entity=like:ACME", r"unknown filter operator 'like' in 'entity=like:ACME'; allowed: eq, ne"),
        ("period=between:2024Q1", r"between needs exactly two values"),
        ("entity=in:", r"needs a non-empty list"),
    ],
)
def test_bad_cli_filter_names_the_problem(arg, message):
    with pytest.raises(FilterError, match=message):
        parse_filter_arg(arg)


def _reference(op: str, value, cell: str) -> bool:
    """The reference semantics, row by row: a missing (empty) field never matches."""
    if cell == "":
        return False
    if op == "eq":
        return cell == value
    if op == "ne":
        return cell != value
    if op == "in":
        return cell in value
    if op == "nin":
        return cell not in value
    if op == "between":
        return value[0] <= cell <= value[1]
    return {"gt": cell > value, "gte": cell >= value, "lt": cell < value, "lte": cell <= value}[op]


@pytest.mark.parametrize("op", OPERATORS)
def test_no_operator_matches_a_row_lacking_the_field(op):
    column = np.asarray(["", "A", "", "B"])
    value = ("A", "Z") if op in ("in", "nin", "between") else "Z"
    if op in ("in", "nin"):
        value = ("Z",)
    mask = Predicate("entity", op, value).mask(column)
    assert not mask[0] and not mask[2], f"{op} matched a row without the field"


@pytest.mark.parametrize("op", ["ne", "nin"])
def test_negations_only_narrow(op):
    value = "ACME_CN" if op == "ne" else ("ACME_CN",)
    # the rows that lack an entity (index 4) are not returned by a negation
    assert rows(Predicate("entity", op, value), ENTITY) == [1, 3, 5]


def test_every_operator_agrees_with_the_reference_on_random_rows():
    rng = np.random.default_rng(28)
    pool = ["", "", "2024Q1", "2024Q3", "2024Q4", "2025H1", "ACME", "b"]
    column = np.asarray(rng.choice(pool, size=2000))
    disagreements = 0
    for _ in range(60):
        op = OPERATORS[int(rng.integers(len(OPERATORS)))]
        if op in ("in", "nin"):
            value = tuple(str(v) for v in rng.choice(pool[2:], size=int(rng.integers(1, 4))))
        elif op == "between":
            value = tuple(sorted(str(v) for v in rng.choice(pool[2:], size=2)))
        else:
            value = str(rng.choice(pool[2:]))
        got = Predicate("period", op, value).mask(column)
        want = np.asarray([_reference(op, value, c) for c in column])
        disagreements += int((got != want).sum())
    assert disagreements == 0
