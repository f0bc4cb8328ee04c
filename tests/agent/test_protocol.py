"""The episode protocol object: one interface per protocol, and checkpoints that record theirs."""

from __future__ import annotations

import json

import pytest

from star_lib.agent.compact import CompactExpert
from star_lib.agent.config import PROTOCOLS, RolloutConfig
from star_lib.agent.expert import ExpertPolicy
from star_lib.agent.protocol import (
    PROTOCOL_FILE,
    FinalAnswer,
    FormatError,
    ProtocolMismatchError,
    check_protocol,
    detect_protocol,
    get_protocol,
    read_protocol,
    write_protocol,
)
from star_lib.types import QueryRecord, ToolCall

REACT_CALL = '<think>go</think><tool_call>{"name": "SearchCity", "arguments": {"state": "Ohio"}}</tool_call>'
COMPACT_CALL = "<think>go</think><tool_call>SearchCity|Ohio</tool_call>"


def test_every_protocol_name_has_one_object_with_the_whole_interface() -> None:
    for name in PROTOCOLS:
        protocol = get_protocol(name)
        assert protocol.name == name
        for hook in ("render_task", "parse_turn", "render_observation", "render_format_error", "parse_plan"):
            assert callable(getattr(protocol, hook))
    assert isinstance(get_protocol("react").expert(), ExpertPolicy)
    assert isinstance(get_protocol("compact").expert(max_retries=2), CompactExpert)
    with pytest.raises(ValueError, match=r"protocol must be one of \('react', 'compact'\), got 'json'"):
        get_protocol("json")


def test_each_protocol_parses_its_own_turns_and_rejects_the_other() -> None:
    react, compact = get_protocol("react"), get_protocol("compact")
    assert react.parse_turn(REACT_CALL) == ToolCall("SearchCity", {"state": "Ohio"})
    assert compact.parse_turn(COMPACT_CALL) == ToolCall("SearchCity", {"state": "Ohio"})
    assert isinstance(react.parse_turn(COMPACT_CALL), FormatError)
    assert isinstance(compact.parse_turn("<think>a</think><answer>x|y</answer>"), FinalAnswer)


def test_render_task_follows_the_config(query: QueryRecord) -> None:
    schemas = [{"type": "function", "function": {"name": "SearchCity"}}]
    react = get_protocol("react").render_task(query, schemas, RolloutConfig())
    assert react.template_tools == schemas and react.messages[0]["role"] == "system"
    listed = get_protocol("react").render_task(query, schemas, RolloutConfig(tools_in_system_prompt=True))
    assert listed.template_tools == [] and "SearchCity" in listed.messages[0]["content"]
    compact = get_protocol("compact").render_task(query, schemas, RolloutConfig(protocol="compact"))
    assert compact.template_tools == [] and compact.messages[0]["content"] == "plan"
    assert get_protocol("compact").render_format_error(FormatError("x")) == {
        "role": "tool",
        "content": "format error: x",
    }


def test_detect_protocol_reads_the_system_message(query: QueryRecord) -> None:
    for name in PROTOCOLS:
        task = get_protocol(name).render_task(query, [], RolloutConfig(protocol=name))
        assert detect_protocol(task.messages) == name
    assert detect_protocol([{"role": "system", "content": "something else"}]) == "react"
    assert detect_protocol([]) == "react"


def test_checkpoint_records_its_protocol_and_refuses_the_other(tmp_path) -> None:
    model = tmp_path / "model"
    model.mkdir()
    assert check_protocol(model, "react") is None  # an older folder (or a hub id) records nothing
    path = write_protocol(model, "compact")
    assert path.name == PROTOCOL_FILE and json.loads(path.read_text()) == {"protocol": "compact"}
    assert check_protocol(model, "compact") == "compact"
    with pytest.raises(ProtocolMismatchError) as caught:
        check_protocol(model, "react")
    message = str(caught.value)
    assert "trained on the compact protocol" in message and "speaks react" in message
    assert str(model) in message and "\n" not in message


def test_a_broken_protocol_file_names_the_file(tmp_path) -> None:
    (tmp_path / PROTOCOL_FILE).write_text('{"protocol": "json"}')
    with pytest.raises(ValueError, match=rf"{PROTOCOL_FILE}: \"protocol\" must be one of"):
        read_protocol(tmp_path)
    (tmp_path / PROTOCOL_FILE).write_text("{not json")
    with pytest.raises(ValueError, match="not readable JSON"):
        read_protocol(tmp_path)
    with pytest.raises(ValueError, match="protocol must be one of"):
        write_protocol(tmp_path, "json")


def test_the_explorer_parses_a_transcript_with_its_episodes_protocol() -> None:
    from star_lib.viz.explorer import parse_transcript

    messages = [
        {"role": "system", "content": "plan"},
        {"role": "user", "content": "A>B|d1|1|900"},
        {"role": "assistant", "content": COMPACT_CALL},
        {"role": "tool", "content": "none"},
    ]
    (detected,) = parse_transcript(messages)  # no protocol column: the system message says compact
    (named,) = parse_transcript(messages, "compact")
    assert detected == named and named.kind == "tool_call" and named.action.startswith("SearchCity ")
    (as_react,) = parse_transcript(messages, "react")  # one protocol's parser, no fallback to another
    assert as_react.kind == "format_error"


def test_react_plan_that_repeats_a_key_is_refused_not_read_last_wins(query: QueryRecord) -> None:
    from star_lib.agent.protocol import get_protocol

    days = [day.to_dict() for day in query.reference_plan]
    plan = json.dumps(days)
    assert get_protocol("react").parse_plan(plan, query, None)[0] is not None
    twice = plan.replace('"breakfast": ', '"breakfast": "Nowhere, Denver", "breakfast": ', 1)
    parsed, error = get_protocol("react").parse_plan(twice, query, None)
    assert parsed is None and "repeats a key" in error and "breakfast" in error


def test_wrap_tools_hands_the_task_to_the_compact_renderer_and_leaves_react_tools_alone(
    query: QueryRecord, fake_tools
) -> None:
    from dataclasses import replace

    from star_lib.agent.compact import CompactTools
    from star_lib.types import LocalConstraint

    react, compact = get_protocol("react"), get_protocol("compact")
    assert react.wrap_tools(fake_tools) is fake_tools and react.wrap_tools(fake_tools, query) is fake_tools
    bare = compact.wrap_tools(fake_tools)
    assert isinstance(bare, CompactTools) and bare.query is None and bare.inner is fake_tools
    hard = replace(query, local_constraint=LocalConstraint(room_type="private room"))
    bound = compact.wrap_tools(bare, hard)
    assert (
        bound.query is hard and bound.inner is fake_tools and bare.query is None
    )  # a new wrapper, not a mutation
    assert compact.wrap_tools(bound, hard) is bound
