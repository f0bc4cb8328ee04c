"""The ReAct turn protocol: strict parsing, formatting round trips, prompts."""

from __future__ import annotations

import json

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from star_lib.agent.react import (
    CALL_CLOSE,
    CALL_OPEN,
    TAGS,
    FinalAnswer,
    FormatError,
    format_answer,
    format_tool_call,
    parse_turn,
    system_prompt,
    user_prompt,
)
from star_lib.types import DayPlan, LocalConstraint, QueryRecord, ToolCall

GOOD_CALL = (
    '<think>need cities</think><tool_call>{"name": "SearchCity", "arguments": {"state": "Ohio"}}</tool_call>'
)


def test_protocol_parses_tool_call_with_whitespace_around():
    turn = parse_turn("\n  " + GOOD_CALL.replace("</think>", "</think>\n") + "\n")
    assert turn == ToolCall(name="SearchCity", arguments={"state": "Ohio"})


def test_protocol_parses_answer():
    turn = parse_turn('<think>all set</think>\n<answer>\n[{"days": 1}]\n</answer>')
    assert isinstance(turn, FinalAnswer)
    assert turn.text == '[{"days": 1}]'
    assert turn.think == "all set"


def test_protocol_format_round_trip():
    text = format_tool_call(
        "look", "SearchFlight", {"departure": "A", "destination": "B", "date": "2022-03-01"}
    )
    assert parse_turn(text) == ToolCall(
        "SearchFlight", {"departure": "A", "destination": "B", "date": "2022-03-01"}
    )
    plan = [DayPlan(days=1, current_city="from A to B")]
    answer = parse_turn(format_answer("done", plan))
    assert isinstance(answer, FinalAnswer)
    assert json.loads(answer.text) == [plan[0].to_dict()]


def test_protocol_rejects_each_broken_rule():
    cases = {
        "no think": '<tool_call>{"name": "A", "arguments": {}}</tool_call>',
        "two thinks": "<think>a</think><think>b</think><answer>x</answer>",
        "two calls": GOOD_CALL + CALL_OPEN + '{"name": "A", "arguments": {}}' + CALL_CLOSE,
        "call and answer": GOOD_CALL + "<answer>x</answer>",
        "nothing after think": "<think>a</think>",
        "text outside": "Sure! " + GOOD_CALL,
        "text between": "<think>a</think> ok <answer>x</answer>",
        "unclosed": '<think>a</think><tool_call>{"name": "A", "arguments": {}}',
        "bad json": "<think>a</think><tool_call>{name: A}</tool_call>",
        "json list": "<think>a</think><tool_call>[1, 2]</tool_call>",
        "no name": '<think>a</think><tool_call>{"arguments": {}}</tool_call>',
        "args not object": '<think>a</think><tool_call>{"name": "A", "arguments": "x"}</tool_call>',
        "extra key": '<think>a</think><tool_call>{"name": "A", "arguments": {}, "id": 1}</tool_call>',
        "empty answer": "<think>a</think><answer>  </answer>",
        "answer first": "<answer>x</answer><think>a</think>",
        "not text": None,
    }
    for label, text in cases.items():
        turn = parse_turn(text)
        assert isinstance(turn, FormatError), label
        assert turn.reason, label


def test_protocol_deep_json_is_a_format_error():
    deep = "<think>a</think><tool_call>" + "[" * 100_000 + "]" * 100_000 + "</tool_call>"
    assert isinstance(parse_turn(deep), FormatError)


_FRAGMENTS = st.one_of(
    st.sampled_from(TAGS),
    st.sampled_from(
        ['{"name": "SearchCity", "arguments": {"state": "Ohio"}}', "{", "}", '"', "[", "]", "\n", " "]
    ),
    st.text(max_size=12),
)


@settings(max_examples=10_000, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(_FRAGMENTS, max_size=12))
def test_protocol_fuzz_garbled_turns_never_raise(parts):
    turn = parse_turn("".join(parts))
    assert isinstance(turn, ToolCall | FinalAnswer | FormatError)
    if isinstance(turn, ToolCall):
        assert isinstance(turn.name, str) and isinstance(turn.arguments, dict)


def test_protocol_system_prompt_lists_tools_only_on_request():
    schemas = [{"type": "function", "function": {"name": "SearchCity", "parameters": {}}}]
    assert "<tools>" not in system_prompt(schemas)
    assert '"name": "SearchCity"' in system_prompt(schemas, include_tools=True)
    assert "<answer>" in system_prompt()


def test_protocol_user_prompt_falls_back_to_fields():
    record = QueryRecord(
        org="Austin",
        dest="Ohio",
        days=5,
        visiting_city_number=2,
        date=("2022-03-01",) * 5,
        people_number=3,
        local_constraint=LocalConstraint(cuisine=("Italian",)),
        budget=4000,
    )
    text = user_prompt(record)
    assert "Austin" in text and "Ohio" in text and "Italian" in text and "3 people" in text
    assert user_prompt(QueryRecord(**{**record.__dict__, "query": "Plan it."})) == "Plan it."
