"""Teacher runs → an SFT dataset in TRL's conversational format.

A teacher is any :class:`~star_lib.agent.policies.Policy`: the programmatic
:class:`~star_lib.agent.expert.ExpertPolicy` (no LLM needed) or an OpenAI-compatible model. Episodes that
are format-valid and pass the strict evaluator (final pass) are kept — the paper's rejection sampling
(1,198 of 5,000 kept, 9.2 tool calls on average). Each kept episode becomes one JSONL row
``{"messages": [...], "tools": "<JSON list of schemas>"}``: TRL's ``SFTTrainer`` passes ``tools`` to the
chat template (it accepts the JSON string form, which keeps the Arrow schema simple), and with
``assistant_only_loss=True`` trains on the assistant turns only.

Outputs in ``out_dir``: ``train.jsonl`` (the kept set), ``stats.json`` (kept/total, mean turns, tool
calls, tokens, tool-call histogram, terminations, faults) and ``episodes.parquet`` (one row per episode).
"""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from star_lib.agent.config import RolloutConfig
from star_lib.agent.env import Episode
from star_lib.agent.policies import Policy
from star_lib.agent.rollout import RolloutStats, episodes_frame, run_episodes
from star_lib.types import QueryRecord, Tools


@dataclass
class TeacherStats:
    """Summary of one teacher run (written to ``stats.json``)."""

    total: int = 0
    """Episodes run."""
    kept: int = 0
    """Episodes kept (format-valid and strict final pass)."""
    format_valid: int = 0
    """Episodes without a format error that ended with a parseable answer."""
    mean_turns: float = 0.0
    """Assistant turns per kept episode."""
    mean_tool_calls: float = 0.0
    """Tool calls per kept episode."""
    mean_tokens: float | None = None
    """Tokens per kept episode (prompt + completion; None without a tokenizer)."""
    mean_model_tokens: float | None = None
    """Assistant tokens per kept episode (None without a tokenizer)."""
    mean_chars: float = 0.0
    """Characters of all messages per kept episode."""
    tool_histogram: dict[str, int] = field(default_factory=dict)
    """Tool calls per tool over the kept episodes."""
    terminations: dict[str, int] = field(default_factory=dict)
    """How all episodes ended."""
    faults: dict[str, int] = field(default_factory=dict)
    """Injected faults seen, over all episodes."""
    seconds: float = 0.0
    """Wall time of the episode runs."""

    @property
    def kept_rate(self) -> float:
        """Share of episodes kept."""
        return self.kept / self.total if self.total else 0.0

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready form (with ``kept_rate``)."""
        return {**asdict(self), "kept_rate": self.kept_rate}


def keep_episode(episode: Episode) -> bool:
    """Keep an episode for SFT: no format error, answered, parseable plan, strict final pass."""
    return not episode.malformed and episode.report is not None and episode.report.final_pass


def sft_record(episode: Episode, tools: Sequence[dict[str, Any]]) -> dict[str, Any]:
    """One TRL conversational row: the episode's messages and the tool schemas (as a JSON string)."""
    messages = [{"role": m["role"], "content": m["content"]} for m in episode.messages]
    return {"messages": messages, "tools": json.dumps(list(tools), ensure_ascii=False)}


def teacher_stats(episodes: Sequence[Episode], seconds: float = 0.0) -> TeacherStats:
    """Summarise episodes as the paper reports its teacher data."""
    kept = [ep for ep in episodes if keep_episode(ep)]
    histogram: Counter[str] = Counter()
    faults: Counter[str] = Counter()
    for ep in kept:
        histogram.update(ep.tool_histogram)
    for ep in episodes:
        faults.update(ep.faults)
    tokenised = bool(kept) and all(ep.prompt_ids for ep in kept)
    return TeacherStats(
        total=len(episodes),
        kept=len(kept),
        format_valid=sum(1 for ep in episodes if not ep.malformed),
        mean_turns=_mean([ep.turns for ep in kept]),
        mean_tool_calls=_mean([ep.tool_calls for ep in kept]),
        mean_tokens=_mean([len(ep.prompt_ids) + len(ep.completion_ids) for ep in kept])
        if tokenised
        else None,
        mean_model_tokens=_mean([ep.model_tokens for ep in kept]) if tokenised else None,
        mean_chars=_mean([sum(len(m["content"]) for m in ep.messages) for ep in kept]),
        tool_histogram=dict(sorted(histogram.items())),
        terminations=dict(Counter(ep.termination.value for ep in episodes)),
        faults=dict(faults),
        seconds=seconds,
    )


def _mean(values: Sequence[float]) -> float:
    return float(sum(values) / len(values)) if values else 0.0


def build_sft_dataset(
    policy: Policy,
    queries: Sequence[QueryRecord],
    world: Any,
    out_dir: str | Path,
    cfg: RolloutConfig | None = None,
    faults: Any = None,
    *,
    tools: Tools | None = None,
    tokenizer: Any = None,
    chunk_size: int = 256,
    progress: bool = False,
) -> TeacherStats:
    """Run the teacher on every query, keep the good episodes and write the SFT dataset.

    Args:
        policy: The teacher.
        queries: Tasks (for the expert they need a ``reference_plan``).
        world: The database behind tools and evaluation.
        out_dir: Folder for ``train.jsonl``, ``stats.json`` and ``episodes.parquet`` (created).
        cfg: Episode settings; evaluation is forced on (strict by default) since it decides what is kept.
        faults: Optional ``FaultConfig`` (teacher data with tool failures and retries).
        tools: Tools instead of ``ToolRegistry(world)``.
        tokenizer: Optional tokenizer with a chat template, to report token counts.
        chunk_size: Episodes run in lockstep at once.
        progress: Show a progress bar.

    Returns:
        The run's statistics (also in ``stats.json``).

    Raises:
        ValueError: When there are no queries or ``chunk_size`` < 1.

    """
    if not queries:
        raise ValueError("no queries given: pass at least one QueryRecord")
    if chunk_size < 1:
        raise ValueError(f"chunk_size must be >= 1, got {chunk_size}")
    cfg = cfg or RolloutConfig(reward="none")
    if not cfg.evaluate:
        raise ValueError("the teacher keeps episodes by evaluation: use a RolloutConfig with evaluate=True")
    timing = RolloutStats()
    episodes: list[Episode] = []
    for start in range(0, len(queries), chunk_size):
        chunk = list(queries[start : start + chunk_size])
        run = run_episodes(
            policy,
            chunk,
            world,
            cfg,
            faults,
            tools=tools,
            tokenizer=tokenizer,
            stats=timing,
            progress=progress,
        )
        for ep in run:
            ep.index += start
        episodes.extend(run)
    stats = teacher_stats(episodes, timing.total_s)
    _write(Path(out_dir), episodes, stats)
    return stats


TEACHER_FILES: tuple[str, ...] = ("train.jsonl", "stats.json", "episodes.parquet")
"""The files :func:`build_sft_dataset` writes into its ``out_dir``."""


def _write(out: Path, episodes: Sequence[Episode], stats: TeacherStats) -> None:
    """Write the three files as one unit: a temporary folder swapped in (old set or new set, never a mix)."""
    from star_lib.io import atomic_dir, write_json_atomic, write_jsonl_atomic, write_parquet_atomic

    with atomic_dir(out, replaces=TEACHER_FILES) as tmp:
        rows = (sft_record(ep, ep.tool_schemas) for ep in episodes if keep_episode(ep))
        write_jsonl_atomic(tmp / "train.jsonl", rows)
        write_json_atomic(tmp / "stats.json", stats.to_dict())
        write_parquet_atomic(tmp / "episodes.parquet", episodes_frame(episodes))
