from __future__ import annotations

import pytest

from star_lib.qa.retriever import BM25Retriever, Passage
from star_lib.qa.tools import SEARCH_TOOL, SearchTools, format_passages
from star_lib.types import Observation, Tools


@pytest.fixture
def tools(toy_corpus, tmp_path) -> SearchTools:
    return SearchTools(BM25Retriever.open(toy_corpus, tmp_path / "idx"), top_k=2)


def test_tools_implements_tools_protocol(tools):
    assert isinstance(tools, Tools)
    (schema,) = tools.schemas()
    assert schema["type"] == "function"
    assert schema["function"]["name"] == SEARCH_TOOL == "Search"
    assert schema["function"]["parameters"]["required"] == ["query"]


def test_tools_search_returns_top_k_passages_in_searchr1_format(tools):
    obs = tools.call("Search", {"query": "first Nobel Prize in Physics"})
    assert obs.ok and obs.error is None
    lines = obs.text.splitlines()
    assert len(lines) <= 2
    assert lines[0].startswith("Doc 1(Title: Wilhelm Röntgen) Wilhelm Röntgen Wilhelm Conrad Röntgen")
    assert tools.counters["ok"] == 1


def test_tools_top_k_limits_passages(toy_corpus, tmp_path):
    tools = SearchTools(BM25Retriever.open(toy_corpus, tmp_path / "i"), top_k=1)
    assert len(tools.call("Search", {"query": "the capital city river mountain"}).text.splitlines()) == 1


@pytest.mark.parametrize(
    ("arguments", "needle"),
    [
        ({"query": ""}, "empty"),
        ({"query": "   \n"}, "empty"),
        ({"query": 42}, "must be a string"),
        ({"query": None}, "must be a string"),
        ({"query": ["a", "b"]}, "must be a string"),
        ({}, "needs a 'query'"),
        ({"query": "x", "k": 5}, "remove ['k']"),
        (["query"], "must be an object"),
        (None, "must be an object"),
        ("not json", "JSON object"),
    ],
)
def test_tools_bad_arguments_come_back_as_observations(tools, arguments, needle):
    obs = tools.call("Search", arguments)
    assert isinstance(obs, Observation)
    assert not obs.ok and obs.error == "bad_arguments"
    assert needle in obs.text


def test_tools_huge_query_is_refused_with_its_length(tools):
    obs = tools.call("Search", {"query": "word " * 400})
    assert obs.error == "bad_arguments"
    assert "1999 characters" in obs.text and "under 500" in obs.text


def test_tools_unknown_tool_names_the_only_tool(tools):
    obs = tools.call("FlightSearch", {"query": "x"})
    assert obs.error == "unknown_tool" and "Search{query}" in obs.text
    assert tools.counters["unknown_tool"] == 1


def test_tools_no_match_is_a_no_result_observation(tools):
    obs = tools.call("Search", {"query": "zzqxv wobblefrump"})
    assert not obs.ok and obs.error == "no_result" and "zzqxv" in obs.text


def test_tools_json_string_arguments_are_accepted(tools):
    assert tools.call("Search", '{"query": "Danube"}').ok


def test_tools_never_raise_on_odd_names(tools):
    for name in (None, 3, "", "search"):
        assert tools.call(name, {"query": "Paris"}).error == "unknown_tool"


def test_tools_format_passages_cuts_long_text():
    text = format_passages([Passage("1", "T", "word " * 50)], max_chars=20)
    assert text.startswith("Doc 1(Title: T) word") and text.endswith("…") and len(text) < 45


def test_tools_rejects_bad_settings(tools):
    with pytest.raises(ValueError, match="top_k"):
        SearchTools(tools.retriever, top_k=0)
