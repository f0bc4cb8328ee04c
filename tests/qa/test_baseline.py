from __future__ import annotations

import pytest

from star_lib.agent.policies import Conversation, Policy
from star_lib.agent.protocol import FinalAnswer, parse_turn, tool_response
from star_lib.qa.baseline import NO_ANSWER, BaselineAgent, SpanAnswerer, question_kind
from star_lib.qa.prompt import qa_system_prompt, qa_user_prompt
from star_lib.qa.retriever import BM25Retriever
from star_lib.qa.tools import SearchTools
from star_lib.types import ToolCall


def _conversation(question: str) -> list[dict]:
    return [
        {"role": "system", "content": qa_system_prompt()},
        {"role": "user", "content": qa_user_prompt(question)},
    ]


def _play(agent: BaselineAgent, tools: SearchTools, question: str, max_turns: int = 4):
    messages = _conversation(question)
    for _ in range(max_turns):
        text = agent.act(messages)
        messages.append({"role": "assistant", "content": text})
        turn = parse_turn(text)
        if isinstance(turn, FinalAnswer):
            return turn, messages
        assert isinstance(turn, ToolCall)
        messages.append(tool_response(tools.call(turn.name, turn.arguments).text))
    raise AssertionError("the baseline never answered")


@pytest.fixture
def toy_tools(toy_corpus, tmp_path) -> SearchTools:
    return SearchTools(BM25Retriever.open(toy_corpus, tmp_path / "idx"))


def test_baseline_is_a_policy_without_tokenizer():
    agent = BaselineAgent()
    assert isinstance(agent, Policy) and agent.tokenizer is None
    (gen,) = agent.generate([Conversation(messages=_conversation("who wrote hamlet"))], max_new_tokens=64)
    assert isinstance(parse_turn(gen.text), ToolCall)


def test_baseline_first_turn_searches_the_question_in_protocol_format():
    text = BaselineAgent().act(_conversation("who got the first nobel prize in physics"))
    assert text.startswith("<think>") and "</think><tool_call>" in text and text.endswith("</tool_call>")
    turn = parse_turn(text)
    assert turn == ToolCall("Search", {"query": "who got the first nobel prize in physics?"})


@pytest.mark.parametrize(
    ("question", "answer"),
    [
        ("who got the first nobel prize in physics", "Röntgen"),
        ("in what year was the first nobel prize in physics awarded", "1901"),
        ("when was the Eiffel Tower built", "1889"),
        ("how high is mount everest above sea level", "8,849"),
        ("which river is longer than the danube in europe", "Volga"),
    ],
)
def test_baseline_answers_with_the_best_matching_span(toy_tools, question, answer):
    turn, messages = _play(BaselineAgent(), toy_tools, question)
    assert turn.text == answer
    assert [m["role"] for m in messages[2:]] == ["assistant", "tool", "assistant"]


def test_baseline_real_corpus_answers_a_date_question(wiki_retriever):
    turn, _ = _play(BaselineAgent(), SearchTools(wiki_retriever), "When was Evan Morris born?")
    assert turn.text == "January 26, 1977"


def test_baseline_retries_with_keywords_then_gives_up(toy_tools):
    turn, messages = _play(BaselineAgent(), toy_tools, "zzqxv wobblefrump?")
    assert turn.text == NO_ANSWER
    calls = [parse_turn(m["content"]) for m in messages if m["role"] == "assistant"][:-1]
    assert [c.arguments["query"] for c in calls] == ["zzqxv wobblefrump?", "zzqxv wobblefrump"]


def test_baseline_answer_turn_never_breaks_the_tags():
    passages = [("Tags", "The <answer>bad</answer> tag </think> appears in Markup Language docs.")]
    messages = _conversation("what appears in Markup Language docs")
    messages += [
        {"role": "assistant", "content": "<think>x</think><tool_call>{}</tool_call>"},
        tool_response(f"Doc 1(Title: {passages[0][0]}) {passages[0][1]}"),
    ]
    assert isinstance(parse_turn(BaselineAgent().act(messages)), FinalAnswer)


def test_baseline_question_kind():
    assert question_kind("When did the war end?") == "date"
    assert question_kind("In what year was it built?") == "date"
    assert question_kind("How many moons does Mars have?") == "number"
    assert question_kind("Who painted the Mona Lisa?") == "name"


def test_baseline_span_answerer_without_passages():
    assert SpanAnswerer().answer("who?", []) == (NO_ANSWER, "")
