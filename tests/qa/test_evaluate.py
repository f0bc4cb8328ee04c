from __future__ import annotations

import json
from collections.abc import Sequence

import polars as pl
import pytest

from star_lib.agent.policies import Conversation, Generation
from star_lib.qa.baseline import BaselineAgent
from star_lib.qa.datasets import QAExample, load_datasets
from star_lib.qa.evaluate import (
    RESULT_SCHEMA,
    SUMMARY_SCHEMA,
    QAEvalConfig,
    episodes_frame,
    evaluate_policy,
    evaluate_qa,
    metric_values,
    question_record,
    run_qa_episodes,
    summary_frame,
    summary_path,
    summary_table,
    write_results,
)
from star_lib.qa.retriever import BM25Retriever
from star_lib.qa.tools import SearchTools
from star_lib.types import Termination

TOY_QUESTIONS = [
    QAExample("t1", "who got the first nobel prize in physics", ("Wilhelm Conrad Röntgen", "Röntgen"), "nq"),
    QAExample("t2", "when was the Eiffel Tower built", ("1889",), "nq"),
    QAExample("t3", "which river is longer than the danube in europe", ("the Volga",), "bamboogle"),
]


@pytest.fixture
def toy_tools(toy_corpus, tmp_path) -> SearchTools:
    return SearchTools(BM25Retriever.open(toy_corpus, tmp_path / "idx"))


class ScriptedPolicy:
    """Replays the same assistant text every turn (a real policy, just not a learned one)."""

    name = "scripted"
    tokenizer = None

    def __init__(self, text: str):
        self.text = text
        self.calls = 0

    def generate(self, conversations: Sequence[Conversation], *, max_new_tokens: int) -> list[Generation]:
        self.calls += 1
        return [Generation(text=self.text) for _ in conversations]


def test_evaluate_baseline_on_toy_corpus_scores_hand_checked_answers(toy_tools):
    results = evaluate_policy(
        BaselineAgent(), {"nq": TOY_QUESTIONS[:2], "bamboogle": TOY_QUESTIONS[2:]}, toy_tools
    )
    assert results.schema == pl.Schema(RESULT_SCHEMA)
    assert results["prediction"].to_list() == ["Röntgen", "1889", "Volga"]
    assert results["em"].to_list() == [1.0, 1.0, 1.0]  # "the Volga" normalises to "volga"
    assert results["turns"].to_list() == [2, 2, 2]
    assert results["search_calls"].to_list() == [1, 1, 1]
    assert set(results["termination"]) == {"answer"}
    assert results["model"].unique().to_list() == ["baseline"]
    trajectory = json.loads(results["trajectory"][0])
    assert [m["role"] for m in trajectory] == ["system", "user", "assistant", "tool", "assistant"]
    assert "Search" in trajectory[0]["content"] and trajectory[1]["content"].startswith("Question: ")


def test_evaluate_summary_long_format_with_unweighted_average(toy_tools):
    examples = {
        "nq": TOY_QUESTIONS[:2],
        "bamboogle": [TOY_QUESTIONS[2], QAExample("t4", "zzqxv", ("x",), "bamboogle")],
    }
    summary = summary_frame(evaluate_policy(BaselineAgent(), examples, toy_tools))
    assert summary.schema == pl.Schema(SUMMARY_SCHEMA)
    values = metric_values(summary)
    assert values["qa/nq/em"] == 1.0 and values["qa/bamboogle/em"] == 0.5
    assert values["qa/average/em"] == 0.75  # mean over sets, not over the 4 questions
    assert values["qa/nq/n"] == 2 and values["qa/average/n"] == 4
    assert values["qa/bamboogle/search_calls"] == 1.5  # the unanswerable one retries with keywords
    assert summary["dataset"].unique(maintain_order=True).to_list() == ["nq", "bamboogle", "average"]
    wide = summary_table(summary)
    assert wide.columns[:4] == ["dataset", "n", "em", "f1"] and wide.height == 3


def test_evaluate_malformed_turns_end_the_episode_without_prediction(toy_tools):
    policy = ScriptedPolicy("I think the answer is Paris.")
    cfg = QAEvalConfig(max_format_errors=2, max_turns=5)
    (episode,) = run_qa_episodes(policy, TOY_QUESTIONS[:1], toy_tools, cfg)
    assert episode.termination is Termination.MALFORMED
    assert episode.prediction is None and episode.episode.format_errors == 2
    assert episode.messages[3]["content"].startswith("Format error:")
    row = evaluate_policy(policy, {"nq": TOY_QUESTIONS[:1]}, toy_tools, cfg).row(0, named=True)
    assert (row["em"], row["f1"], row["cover_em"], row["prediction"]) == (0.0, 0.0, 0.0, None)


def test_evaluate_endless_searching_hits_the_turn_limit(toy_tools):
    search = '<think>look</think><tool_call>{"name": "Search", "arguments": {"query": "Danube"}}</tool_call>'
    (episode,) = run_qa_episodes(
        ScriptedPolicy(search), TOY_QUESTIONS[:1], toy_tools, QAEvalConfig(max_turns=3)
    )
    assert episode.termination is Termination.TURN_LIMIT
    assert (episode.episode.turns, episode.episode.tool_calls, episode.episode.valid_tool_calls) == (3, 3, 3)


def test_evaluate_batches_keep_question_order(toy_tools):
    episodes = run_qa_episodes(BaselineAgent(), TOY_QUESTIONS, toy_tools, QAEvalConfig(batch_size=2))
    assert [ep.example.id for ep in episodes] == ["t1", "t2", "t3"]
    assert [ep.episode.query.idx for ep in episodes] == [0, 1, 2]


def test_evaluate_question_record_carries_the_user_turn():
    record = question_record(TOY_QUESTIONS[1], 7)
    assert record.query == "Question: when was the Eiffel Tower built?" and record.idx == 7


def test_evaluate_baseline_nq_sample_end_to_end_writes_tables(qa_dir, wiki_corpus, tmp_path):
    out = tmp_path / "runs" / "qa.parquet"
    cfg = QAEvalConfig(datasets=("nq",))
    results, summary = evaluate_qa(
        BaselineAgent(), qa_dir / "corpus" / "flashrag_nq_test_sample.jsonl", wiki_corpus, cfg,
        out=out, index_dir=tmp_path / "index",
    )  # fmt: skip
    assert results.height == 17 and set(results["termination"]) == {"answer"}
    assert pl.read_parquet(out).equals(results)
    stored = pl.read_parquet(summary_path(out))
    assert summary_path(out).name == "qa_summary.parquet" and stored.equals(summary)
    assert stored.columns == ["dataset", "metric", "value"]
    assert metric_values(stored)["qa/nq/n"] == 17
    for metric in ("em", "f1", "cover_em"):
        assert 0.0 <= metric_values(stored)[f"qa/nq/{metric}"] <= 1.0


def test_evaluate_limit_sample_over_the_seven_sets(qa_dir, wiki_retriever):
    cfg = QAEvalConfig(limit=3, seed=1)
    examples = load_datasets(cfg.datasets, qa_dir / "deepresearcher_test", limit=cfg.limit, seed=cfg.seed)
    results = evaluate_policy(BaselineAgent(), examples, SearchTools(wiki_retriever), cfg)
    assert results.height == 21
    assert results["dataset"].unique(maintain_order=True).to_list() == list(cfg.datasets)
    again = evaluate_policy(BaselineAgent(), examples, SearchTools(wiki_retriever), cfg)
    assert again.equals(results)  # deterministic


def test_evaluate_write_results_needs_parquet(tmp_path):
    with pytest.raises(ValueError, match=r"\.parquet"):
        write_results(pl.DataFrame(schema=RESULT_SCHEMA), tmp_path / "qa.csv")


def test_evaluate_config_errors_say_what_to_change():
    with pytest.raises(ValueError, match="limit"):
        QAEvalConfig(limit=0)
    with pytest.raises(ValueError, match="datasets"):
        QAEvalConfig(datasets=())
    with pytest.raises(ValueError, match="max_context_tokens"):
        QAEvalConfig(max_context_tokens=100, max_new_tokens=200)


def test_evaluate_tiny_random_transformers_model_runs_end_to_end(qwen_tokenizer_dir, toy_tools):
    torch = pytest.importorskip("torch")
    from transformers import AutoTokenizer, Qwen2Config, Qwen2ForCausalLM

    from star_lib.agent.policies import SamplingParams, TransformersPolicy

    tokenizer = AutoTokenizer.from_pretrained(qwen_tokenizer_dir)
    tokenizer.chat_template = (qwen_tokenizer_dir / "qwen2.5_instruct_chat_template.jinja").read_text()
    torch.manual_seed(0)
    config = Qwen2Config(
        vocab_size=len(tokenizer), hidden_size=32, intermediate_size=64, num_hidden_layers=1,
        num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=4096,
    )  # fmt: skip
    policy = TransformersPolicy(Qwen2ForCausalLM(config).eval(), tokenizer, SamplingParams(temperature=0))
    cfg = QAEvalConfig(max_turns=2, max_new_tokens=6, max_format_errors=0)
    episodes = run_qa_episodes(policy, TOY_QUESTIONS[:2], toy_tools, cfg)
    for ep in episodes:
        assert ep.termination in (Termination.TURN_LIMIT, Termination.MALFORMED, Termination.ANSWER)
        assert ep.episode.turns >= 1
        assert ep.episode.prompt_ids and len(ep.episode.completion_ids) == len(ep.episode.env_mask)
        assert sum(ep.episode.env_mask) >= 1  # the model's own tokens are marked
    prompt = tokenizer.decode(episodes[0].episode.prompt_ids)
    assert '"name": "Search"' in prompt and "Question: who got the first nobel prize in physics?" in prompt
    results = episodes_frame(episodes, model="tiny-random")
    assert results.height == 2 and results["model"].to_list() == ["tiny-random"] * 2
    assert results["turns"].to_list() == [ep.episode.turns for ep in episodes]
