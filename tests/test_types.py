"""Query records are validated at the type boundary: one clear error naming the field and the value."""

from __future__ import annotations

import json

import pytest

from star_lib.types import (
    MAX_LITERAL_CHARS,
    LocalConstraint,
    QueryRecord,
    RecordError,
    parse_literal,
)


@pytest.fixture(scope="module")
def train_rows(tp_dir) -> list[dict]:
    """The 45 real train rows, as the official file writes them (literal strings for date/constraints)."""
    rows = [json.loads(line) for line in (tp_dir / "train.jsonl").read_text().splitlines() if line.strip()]
    assert len(rows) == 45
    return rows


def test_types_every_real_train_query_is_valid_and_round_trips(train_rows) -> None:
    for row in train_rows:
        record = QueryRecord.from_dict(row)
        assert isinstance(row["date"], str) and len(record.date) == record.days
        assert QueryRecord.from_dict(record.to_dict()) == record
        assert QueryRecord.from_dict(json.loads(json.dumps(record.to_dict()))) == record


BAD_VALUES = [
    ("people_number", 0),
    ("people_number", -2),
    ("people_number", 9),
    ("people_number", "two"),
    ("days", 0),
    ("days", -3),
    ("days", 2.9),
    ("days", True),
    ("days", 4),
    ("days", "3 days"),
    ("budget", -1),
    ("budget", 0),
    ("budget", float("inf")),
    ("budget", float("nan")),
    ("budget", "Infinity"),
    ("budget", "NaN"),
    ("budget", 1700.5),
    ("budget", [1700]),
    ("date", "'abc'"),
    ("date", "abc"),
    ("date", ["2022-03-16", "2022-03-17"]),
    ("date", ["2022-03-16", "2022-03-17", "2022-03-17"]),
    ("date", ["2022-03-16", "2022-03-17", "2022-02-30"]),
    ("date", ["16/03/2022", "17/03/2022", "18/03/2022"]),
    ("date", "__import__('os').getcwd()"),
    ("visiting_city_number", 2),
    ("visiting_city_number", 0),
    ("level", "expert"),
    ("level", 3),
    ("org", ""),
    ("org", 5),
    ("dest", None),
    ("query", ["a"]),
    ("idx", "first"),
]


@pytest.mark.parametrize(("field", "value"), BAD_VALUES, ids=[f"{f}={v!r}" for f, v in BAD_VALUES])
def test_types_bad_field_values_are_refused_naming_field_and_value(train_rows, field, value) -> None:
    row = {**train_rows[0], field: value}
    with pytest.raises(RecordError) as caught:
        QueryRecord.from_dict(row)
    message = str(caught.value)
    assert f"'{field}'" in message and "\n" not in message
    assert repr(value)[:40] in message or field == "dest"
    assert isinstance(caught.value, ValueError) and caught.value.field == field


BAD_CONSTRAINTS = [
    ("{'pool': True}", "local_constraint"),
    ({"house rule": "dancing"}, "local_constraint['house rule']"),
    ({"room type": "suite"}, "local_constraint['room type']"),
    ({"transportation": "no train"}, "local_constraint['transportation']"),
    ({"cuisine": ["Thai"]}, "local_constraint['cuisine']"),
    ({"cuisine": 3}, "local_constraint['cuisine']"),
    ("['house rule']", "local_constraint"),
    ("{'house rule': 'pets'", "local_constraint"),
]


@pytest.mark.parametrize(("value", "field"), BAD_CONSTRAINTS)
def test_types_local_constraints_outside_the_spec_are_refused(train_rows, value, field) -> None:
    with pytest.raises(RecordError) as caught:
        QueryRecord.from_dict({**train_rows[0], "local_constraint": value})
    assert caught.value.field == field and field in str(caught.value)


def test_types_deep_nesting_and_huge_literals_are_refused_without_recursion(train_rows) -> None:
    for text in ("[" * 100_000, "[" * 50 + "]" * 50, "{'a': " * 5_000 + "1" + "}" * 5_000):
        with pytest.raises(RecordError, match="deeper than"):
            QueryRecord.from_dict({**train_rows[0], "date": text})
    with pytest.raises(RecordError, match="deeper than"):
        QueryRecord.from_dict({**train_rows[0], "local_constraint": "(" * 20_000})
    with pytest.raises(RecordError, match="longer than"):
        parse_literal("'" + "a" * MAX_LITERAL_CHARS + "'", "query")
    nested: list = ["2022-03-16"]
    for _ in range(500):  # an already-decoded deep value (JSON reader) is refused, not recursed into
        nested = [nested]
    with pytest.raises(RecordError, match="ISO date"):
        QueryRecord.from_dict({**train_rows[0], "date": [nested, "2022-03-17", "2022-03-18"]})


def test_types_parse_literal_never_evaluates() -> None:
    for text in ("__import__('os').system('true')", "print(1)", "1 + 1", "lambda: 0"):
        with pytest.raises(RecordError, match="not a JSON or Python literal"):
            parse_literal(text, "date")
    assert parse_literal("{'house rule': None}") == {"house rule": None}


def test_types_official_string_forms_are_accepted(train_rows) -> None:
    row = train_rows[0]
    want = QueryRecord.from_dict(row)
    forms = {"days": "3", "people_number": "1", "visiting_city_number": "1", "budget": "1700"}
    assert QueryRecord.from_dict({**row, **forms}) == want
    assert QueryRecord.from_dict({**row, "budget": "$1,700"}).budget == 1700
    assert QueryRecord.from_dict({**row, "budget": 1700.0, "days": 3.0}) == want
    assert QueryRecord.from_dict({**row, "date": json.dumps(list(want.date))}) == want
    no_cities = {k: v for k, v in row.items() if k != "visiting_city_number"}
    assert QueryRecord.from_dict(no_cities).visiting_city_number == 1


@pytest.mark.parametrize("value", [None, "", {}, "None", "{}"])
def test_types_absent_local_constraint_means_none_requested(value) -> None:
    assert LocalConstraint.from_dict(value) == LocalConstraint()


def test_types_partial_and_single_cuisine_constraints() -> None:
    got = LocalConstraint.from_dict({"cuisine": "Indian", "transportation": "no flight"})
    assert got == LocalConstraint(cuisine=("Indian",), transportation="no flight")
    assert got.requested == ["cuisine", "transportation"]


def test_types_missing_fields_and_non_objects_are_named(train_rows) -> None:
    row = {k: v for k, v in train_rows[0].items() if k not in ("budget", "date")}
    with pytest.raises(RecordError, match=r"\['date', 'budget'\] missing"):
        QueryRecord.from_dict(row)
    for value in ([1, "a"], 5, "record"):
        with pytest.raises(RecordError, match="must be a JSON object"):
            QueryRecord.from_dict(value)  # type: ignore[arg-type]
