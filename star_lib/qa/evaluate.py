"""Run an agent over the QA sets with the Search tool and score it — the paper's Table 2 (OOD QA).

Episodes run on the travel agent's own runner (:func:`star_lib.agent.rollout.run_episodes`: the same
protocol and parser, the same policies, format-error observations, context-limit request and token
traces) with :class:`~star_lib.qa.tools.SearchTools` instead of the travel registry, the QA prompts of
:mod:`star_lib.qa.prompt`, and plan evaluation off; an episode ends at ``<answer>`` (terminated) or at
the turn / context limit (truncated). Each question rides in a placeholder ``QueryRecord`` whose
``query`` text is the user turn (:func:`question_record`) — the runner takes travel task records.

Files written by :func:`write_results` (both polars parquet, written atomically)::

    <out>.parquet           one row per question
        dataset        str    canonical set name (nq, triviaqa, popqa, hotpotqa, 2wikimultihopqa, musique,
                              bamboogle)
        id             str    question id from the data file
        question       str
        golden_answers list[str]
        prediction     str?   text inside <answer>, null when the episode gave none
        em, f1, cover_em f64  metrics of star_lib.qa.metrics (0.0 when no prediction)
        turns          i64    assistant turns
        search_calls   i64    tool calls made (valid_search_calls: those that returned passages)
        valid_search_calls i64
        format_errors  i64    turns that broke the protocol
        termination    str    answer | turn_limit | context_limit | malformed (an answer given after the
                              context-limit request still counts as the prediction)
        model          str    policy name (``baseline``, a checkpoint path, …)
        trajectory     str    the episode's chat messages as JSON

    <out stem>_summary.parquet   long format, one row per (dataset, metric)
        dataset        str    a set name, or ``average`` (unweighted mean over the sets, Table 2's Avg.)
        metric         str    em | f1 | cover_em | answered | turns | search_calls | format_errors | n
        value          f64    mean over the set's questions (``n``: number of questions; summed for average)

Example:
    >>> tools = SearchTools(BM25Retriever.open("corpus.jsonl"))  # doctest: +SKIP
    >>> frame = evaluate_policy(BaselineAgent(), {"nq": examples}, tools)  # doctest: +SKIP
    >>> write_results(frame, "runs/qa/baseline/qa.parquet")  # doctest: +SKIP

"""

from __future__ import annotations

import json
import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import polars as pl

from star_lib.agent.config import RolloutConfig
from star_lib.agent.env import Episode
from star_lib.agent.policies import Policy
from star_lib.agent.rollout import run_episodes
from star_lib.io import write_parquet_atomic
from star_lib.qa.datasets import DATASET_NAMES, QAExample
from star_lib.qa.metrics import AVERAGE, METRICS, score_answer
from star_lib.qa.prompt import CONTEXT_LIMIT_PROMPT, qa_system_prompt, qa_user_prompt
from star_lib.types import LocalConstraint, QueryRecord, Termination, Tools

SUMMARY_METRICS: tuple[str, ...] = (*METRICS, "answered", "turns", "search_calls", "format_errors")
RESULT_SCHEMA: dict[str, Any] = {
    "dataset": pl.String,
    "id": pl.String,
    "question": pl.String,
    "golden_answers": pl.List(pl.String),
    "prediction": pl.String,
    "em": pl.Float64,
    "f1": pl.Float64,
    "cover_em": pl.Float64,
    "turns": pl.Int64,
    "search_calls": pl.Int64,
    "valid_search_calls": pl.Int64,
    "format_errors": pl.Int64,
    "termination": pl.String,
    "model": pl.String,
    "trajectory": pl.String,
}
SUMMARY_SCHEMA: dict[str, Any] = {"dataset": pl.String, "metric": pl.String, "value": pl.Float64}


@dataclass(frozen=True)
class QAEvalConfig:
    """Settings of one OOD QA evaluation (Search-R1 protocol as used in the STAR paper, Table 2)."""

    datasets: tuple[str, ...] = DATASET_NAMES
    """Sets to run, by canonical name."""
    limit: int | None = None
    """Questions per set (seeded sample); None = all (512 per set, Bamboogle 125)."""
    seed: int = 0
    """Seed of the ``limit`` sample."""
    top_k: int = 3
    """Passages per Search call (Search-R1 uses 3)."""
    max_turns: int = 6
    """Assistant turns before an episode is truncated (Search-R1 allows 4 searches + the answer)."""
    max_new_tokens: int = 512
    """Token budget of one assistant turn."""
    max_context_tokens: int = 8192
    """Context budget; on overflow the model is asked once for its answer, then the episode stops."""
    max_format_errors: int = 3
    """End an episode as malformed after this many malformed turns (0 = never); each is answered with a
    format-error observation, as in the travel runner."""
    batch_size: int = 64
    """Episodes run in lockstep (one ``generate`` call per turn for the whole batch)."""
    max_passage_chars: int | None = None
    """Cut each passage in an observation to this many characters (None: whole passage)."""
    tools_in_system_prompt: bool = False
    """List the Search schema in the system text instead of the chat template's ``tools=``."""

    def __post_init__(self) -> None:
        if not self.datasets:
            raise ValueError("datasets is empty; name at least one set, e.g. ('nq',)")
        if self.limit is not None and self.limit < 1:
            raise ValueError(f"limit must be >= 1 or None, got {self.limit}")
        for name in ("top_k", "max_turns", "max_new_tokens", "batch_size"):
            if getattr(self, name) < 1:
                raise ValueError(f"{name} must be >= 1, got {getattr(self, name)}")
        if self.max_context_tokens <= self.max_new_tokens:
            raise ValueError("max_context_tokens must exceed max_new_tokens (room for one more turn)")
        if self.max_format_errors < 0:
            raise ValueError(f"max_format_errors must be >= 0 (0 = never stop), got {self.max_format_errors}")

    def rollout_config(self, tools: Tools) -> RolloutConfig:
        """Build the travel runner's config for QA: QA prompts, no plan evaluation, no reward."""
        return RolloutConfig(
            max_turns=self.max_turns,
            max_context_tokens=self.max_context_tokens,
            max_new_tokens=self.max_new_tokens,
            max_format_errors=self.max_format_errors,
            evaluate=False,
            reward="none",
            tools_in_system_prompt=self.tools_in_system_prompt,
            system_prompt=qa_system_prompt(tools, include_tools=self.tools_in_system_prompt),
            context_limit_prompt=CONTEXT_LIMIT_PROMPT,
            seed=self.seed,
        )


@dataclass
class QAEpisode:
    """One finished QA episode (the runner's episode record plus its question)."""

    example: QAExample
    episode: Episode
    """The travel runner's record: messages, termination, counts, token ids (for RL on QA)."""

    @property
    def prediction(self) -> str | None:
        """Text inside ``<answer>``; None when the episode ended without one."""
        return self.episode.answer_text

    @property
    def messages(self) -> list[dict[str, Any]]:
        """The chat messages of the episode."""
        return self.episode.messages

    @property
    def termination(self) -> Termination:
        """Why the episode ended."""
        return self.episode.termination


# ───────────────────────────── episodes ─────────────────────────────


def question_record(example: QAExample, index: int = 0) -> QueryRecord:
    """Wrap a question as the runner's task record.

    The episode runner takes :class:`~star_lib.types.QueryRecord` tasks and shows ``query`` as the user
    turn; the travel fields are placeholders that nothing reads (plans are neither parsed for a score
    nor evaluated: ``RolloutConfig(evaluate=False, reward="none")``).
    """
    return QueryRecord(
        org="-",
        dest="-",
        days=1,
        visiting_city_number=1,
        date=("-",),
        people_number=1,
        local_constraint=LocalConstraint(),
        budget=0,
        query=qa_user_prompt(example.question),
        level="qa",
        idx=index,
    )


def run_qa_episodes(
    policy: Policy,
    examples: Sequence[QAExample],
    tools: Tools,
    cfg: QAEvalConfig | None = None,
    *,
    progress: bool = False,
) -> list[QAEpisode]:
    """Run one episode per question with the travel agent's runner, ``cfg.batch_size`` at a time.

    Args:
        policy: any :class:`~star_lib.agent.policies.Policy` (a model backend or the baseline).
        examples: the questions.
        tools: the QA tools (:class:`~star_lib.qa.tools.SearchTools`).
        cfg: limits (default :class:`QAEvalConfig`).
        progress: show a progress bar.

    Returns:
        Finished episodes, in the order of ``examples``.

    """
    cfg = cfg or QAEvalConfig()
    rollout_cfg = cfg.rollout_config(tools)
    out: list[QAEpisode] = []
    for start in range(0, len(examples), cfg.batch_size):
        batch = examples[start : start + cfg.batch_size]
        records = [question_record(ex, start + i) for i, ex in enumerate(batch)]
        episodes = run_episodes(policy, records, None, rollout_cfg, tools=tools, progress=progress)
        out.extend(QAEpisode(ex, ep) for ex, ep in zip(batch, episodes, strict=True))
    return out


# ───────────────────────────── tables ─────────────────────────────


def episodes_frame(episodes: Sequence[QAEpisode], model: str = "") -> pl.DataFrame:
    """One row per episode with the metrics (schema in the module docstring)."""
    rows = []
    for ep in episodes:
        scores = score_answer(ep.prediction, ep.example.golden_answers)
        rows.append(
            {
                "dataset": ep.example.dataset,
                "id": ep.example.id,
                "question": ep.example.question,
                "golden_answers": list(ep.example.golden_answers),
                "prediction": ep.prediction,
                "em": scores.em,
                "f1": scores.f1,
                "cover_em": scores.cover_em,
                "turns": ep.episode.turns,
                "search_calls": ep.episode.tool_calls,
                "valid_search_calls": ep.episode.valid_tool_calls,
                "format_errors": ep.episode.format_errors,
                "termination": ep.termination.value,
                "model": model,
                "trajectory": json.dumps(ep.messages, ensure_ascii=False),
            }
        )
    return pl.DataFrame(rows, schema=RESULT_SCHEMA)


def summary_frame(results: pl.DataFrame) -> pl.DataFrame:
    """Long summary ``dataset, metric, value``: per-set means, the set size ``n``, and an ``average`` row set.

    ``average`` is the unweighted mean over sets (Table 2's Avg. column); its ``n`` is the total.
    """
    if results.height == 0:
        return pl.DataFrame(schema=SUMMARY_SCHEMA)
    wide = (
        results.with_columns(pl.col("prediction").is_not_null().cast(pl.Float64).alias("answered"))
        .group_by("dataset", maintain_order=True)
        .agg(
            pl.len().cast(pl.Float64).alias("n"),
            *[pl.col(m).cast(pl.Float64).mean() for m in SUMMARY_METRICS],
        )
    )
    average = wide.select(
        pl.lit(AVERAGE).alias("dataset"),
        pl.col("n").sum(),
        *[pl.col(m).mean() for m in SUMMARY_METRICS],
    )
    both = pl.concat([wide, average])
    long = both.unpivot(
        index="dataset", on=[*SUMMARY_METRICS, "n"], variable_name="metric", value_name="value"
    )
    order = {name: i for i, name in enumerate([*both["dataset"].to_list()])}
    metric_order = {name: i for i, name in enumerate([*SUMMARY_METRICS, "n"])}
    return (
        long.with_columns(
            pl.col("dataset").replace_strict(order, return_dtype=pl.Int64).alias("_d"),
            pl.col("metric").replace_strict(metric_order, return_dtype=pl.Int64).alias("_m"),
        )
        .sort("_d", "_m")
        .drop("_d", "_m")
        .cast(SUMMARY_SCHEMA)
    )


def summary_table(summary: pl.DataFrame) -> pl.DataFrame:
    """Pivot the long summary to one row per dataset (for printing): ``dataset, n, em, f1, …``."""
    if summary.height == 0:
        return pl.DataFrame({"dataset": []}, schema={"dataset": pl.String})
    wide = summary.pivot(on="metric", index="dataset", values="value", aggregate_function="first")
    columns = ["dataset", "n", *[m for m in SUMMARY_METRICS if m in wide.columns]]
    return wide.select(columns)


def summary_path(out: str | os.PathLike[str]) -> Path:
    """Return where the summary of ``out`` goes: ``qa.parquet`` → ``qa_summary.parquet``."""
    out = Path(out)
    return out.with_name(f"{out.stem}_summary.parquet")


def write_results(results: pl.DataFrame, out: str | os.PathLike[str]) -> tuple[Path, Path]:
    """Write the per-question table to ``out`` and its long summary beside it; return both paths.

    Raises:
        ValueError: when ``out`` does not end in ``.parquet``.

    """
    out = Path(out)
    if out.suffix != ".parquet":
        raise ValueError(f"--out must name a .parquet file (e.g. runs/qa/baseline/qa.parquet), got {out}")
    write_parquet_atomic(out, results)
    summary = summary_path(out)
    write_parquet_atomic(summary, summary_frame(results))
    return out, summary


def metric_values(summary: pl.DataFrame, prefix: str = "qa") -> dict[str, float]:
    """Flatten a long summary to the results store's metric names: ``{"qa/nq/em": 0.41, …}`` (fractions).

    >>> metric_values(pl.DataFrame({"dataset": ["nq"], "metric": ["em"], "value": [0.5]}))
    {'qa/nq/em': 0.5}
    """
    return {
        f"{prefix}/{d}/{m}": float(v) for d, m, v in summary.select("dataset", "metric", "value").iter_rows()
    }


# ───────────────────────────── top level ─────────────────────────────


def policy_name(policy: Any) -> str:
    """Return a short name for the results table: ``policy.name`` or the class name."""
    return str(getattr(policy, "name", None) or type(policy).__name__)


def evaluate_policy(
    policy: Policy,
    examples: Mapping[str, Sequence[QAExample]],
    tools: Tools,
    cfg: QAEvalConfig | None = None,
    *,
    model: str | None = None,
    progress: bool = False,
) -> pl.DataFrame:
    """Run ``policy`` over every set in ``examples`` and return the per-question results table.

    Args:
        policy: the agent (a model policy or :class:`~star_lib.qa.baseline.BaselineAgent`).
        examples: questions by dataset name.
        tools: the QA tools.
        cfg: limits.
        model: name stored in the ``model`` column (default :func:`policy_name`).
        progress: show a progress bar (rich).

    """
    flat = [ex for name in examples for ex in examples[name]]
    episodes = run_qa_episodes(policy, flat, tools, cfg, progress=progress)
    _refuse_all_failed(episodes, policy)
    return episodes_frame(episodes, model or policy_name(policy))


def endpoint_url(policy: Any) -> str | None:
    """Return the endpoint root an :class:`~star_lib.agent.openai_policy.OpenAIPolicy` sends to (or None)."""
    config = getattr(policy, "config", None)
    if not hasattr(config, "api_key_env") or not hasattr(config, "base_url"):
        return None
    return config.base_url or os.environ.get("OPENAI_BASE_URL") or "https://api.openai.com/v1"


def check_endpoint(policy: Any) -> None:
    """Probe an OpenAI-compatible policy's endpoint once with a one-token request; other policies pass.

    Raises:
        EndpointError: (a ``ValueError``) when the endpoint cannot be reached, times out, refuses the key
            (HTTP 401/403) or has no such model or route (404); the message names the endpoint, never the key.

    """
    from star_lib.synth.realise import EndpointError, probe_endpoint

    url = endpoint_url(policy)
    if url is None:
        return
    config = policy.config
    key = os.environ.get(config.api_key_env) or "EMPTY"
    error = probe_endpoint(url, config.model, key, timeout_s=min(config.timeout_s, 60.0))
    if error is not None:
        raise EndpointError(
            f"--backend openai: the endpoint {url} cannot serve {config.model!r}: {error}; nothing evaluated"
        )


def _refuse_all_failed(episodes: Sequence[QAEpisode], policy: Any) -> None:
    """Raise when the model backend failed in every episode: a table of zeros would read as a score."""
    from star_lib.synth.realise import EndpointError

    errors = [ep.episode.error for ep in episodes]
    if not errors or not all(errors):
        return
    url = endpoint_url(policy)
    where = f"at the endpoint {url}" if url else f"in the model backend {policy_name(policy)}"
    raise EndpointError(
        f"every one of the {len(errors)} episodes failed {where}: {errors[0]}; no results written"
    )


def make_policy(
    model: str,
    *,
    backend: str = "transformers",
    temperature: float = 0.0,
    device: str | None = None,
    base_url: str | None = None,
    batch_size: int = 16,
) -> Policy:
    """Build the policy named on the command line: ``baseline`` or a model (path, hub id, endpoint model).

    Args:
        model: ``baseline`` for :class:`~star_lib.qa.baseline.BaselineAgent`, else a checkpoint folder
            (transformers / vllm) or the served model name (openai).
        backend: ``transformers`` | ``vllm`` | ``openai``.
        temperature: sampling temperature (0 = greedy, the evaluation default).
        device: torch device for ``transformers`` (default: CUDA when present).
        base_url: endpoint root for ``openai`` (e.g. ``http://localhost:8000/v1``).
        batch_size: most conversations per ``generate`` call (transformers).

    Raises:
        ValueError: for an unknown backend.

    """
    from star_lib.agent.policies import SamplingParams

    if model == "baseline":
        from star_lib.qa.baseline import BaselineAgent

        return BaselineAgent()
    sampling = SamplingParams(temperature=temperature)
    if backend == "transformers":
        from star_lib.agent.policies import TransformersPolicy

        return TransformersPolicy.from_pretrained(
            model, sampling=sampling, device=device, batch_size=batch_size
        )
    if backend == "vllm":
        from star_lib.agent.policies import VLLMPolicy

        return VLLMPolicy(model, sampling=sampling)
    if backend == "openai":
        from star_lib.agent.openai_policy import OpenAIConfig, OpenAIPolicy

        return OpenAIPolicy(OpenAIConfig(model=model, base_url=base_url), sampling)
    raise ValueError(f"backend must be transformers, vllm or openai; got {backend!r}")


def evaluate_qa(
    policy: Policy,
    data_dir: str | os.PathLike[str],
    corpus: str | os.PathLike[str],
    cfg: QAEvalConfig | None = None,
    *,
    out: str | os.PathLike[str] | None = None,
    retriever: str = "bm25",
    dense_model: str | None = None,
    index_dir: str | os.PathLike[str] | None = None,
    cache_dir: str | os.PathLike[str] | None = None,
    model: str | None = None,
    progress: bool = False,
) -> tuple[pl.DataFrame, pl.DataFrame]:
    """Load the sets, open the retriever, run the episodes, and (with ``out``) write both tables.

    Returns:
        ``(results, summary)``: the per-question table and the long summary.

    """
    from star_lib.qa.datasets import load_datasets
    from star_lib.qa.retriever import open_retriever
    from star_lib.qa.tools import SearchTools

    cfg = cfg or QAEvalConfig()
    examples = load_datasets(cfg.datasets, data_dir, limit=cfg.limit, seed=cfg.seed)
    search = open_retriever(
        corpus, retriever, index_dir=index_dir, cache_dir=cache_dir, dense_model=dense_model
    )
    tools = SearchTools(search, top_k=cfg.top_k, max_passage_chars=cfg.max_passage_chars)
    results = evaluate_policy(policy, examples, tools, cfg, model=model, progress=progress)
    if out is not None:
        write_results(results, out)
    return results, summary_frame(results)
