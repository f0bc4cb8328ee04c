"""``star pipeline --preset tiny``: the learning signal at tiny scale, end to end on 2 CPU cores.

world → synth → expert SFT data → SFT → GRPO (SUM) → evaluation, each stage the project's own code:

1. **Worlds and tasks**: seeded ``tiny`` worlds (:meth:`~star_lib.travel.world.World.synthetic`) drawing names
   from the shared pools; easy queries from :func:`star_lib.synth.synthesize` in each. Training, RL and
   held-out evaluation use disjoint world seeds, so evaluation measures copying from observations, not
   memorised worlds. A query's ``idx`` encodes its world seed (:class:`WorldSet` rebuilds worlds on demand).
2. **Teacher data**: :class:`~star_lib.agent.compact.CompactExpert` acts out each reference plan in the
   compact protocol; episodes that pass the strict evaluator become TRL conversational rows.
3. **Model**: a BPE tokenizer in which every city, state, venue, tool name, date of 2022, the flight
   prefix ``F`` and every three-digit group is one token (:func:`whole_words`), and the ``tiny`` Qwen2 model
   built for it; then a copy-task warm-up over the whole vocabulary (:func:`copy_warmup_all`).
4. **SFT**: TRL ``SFTTrainer`` (:func:`star_lib.train.sft.make_sft_trainer`, assistant-only loss) for a
   number of steps with a warm-up + cosine learning rate (:class:`CosineSchedule`). Every budget counts
   steps, so the numbers do not depend on the machine's speed (only the wall time does); ``*_s`` fields
   switch a stage to a time budget whose schedule decays on the clock.
5. **GRPO**: :func:`star_lib.train.rl.make_grpo_trainer` (TRL ``GRPOTrainer`` with the multi-turn rollout
   function, SUM reward behind the strict format gate, no KL, clip-higher) with the compact protocol and
   :class:`~star_lib.agent.fastgen.FastPolicy` writing the rollouts; a few greedy checks on held-out queries
   along the way draw the curve (nothing is selected with them).
6. **Evaluation**: greedy episodes on the held-out queries for the untrained, SFT and RL models; each compact
   plan is expanded to the official format and judged by the strict evaluator.

Outputs in ``out_dir``: ``data/`` (SFT rows, RL and eval queries), ``base/``, ``warm/``, ``sft/``, ``rl/``
(model folders and metrics), ``eval_<model>.parquet`` (one row per episode) and ``summary.json``.
"""

from __future__ import annotations

import datetime as dt
import json
import math
import shutil
import time
from collections import OrderedDict
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import Any

from star_lib.train.rl import standard_error

IDX_STRIDE = 100
"""A query's ``idx`` is ``world_seed * IDX_STRIDE + k`` (k < IDX_STRIDE)."""
MODELS: tuple[str, ...] = ("base", "sft", "rl")
"""The three evaluated models: untrained, after SFT, after GRPO."""


# ───────────────────────────── config ─────────────────────────────


@dataclass
class PipelineConfig:
    """One learning-signal run; the defaults fit 20 minutes on 2 shared CPU cores."""

    out_dir: str = "runs/learning_signal"
    """The run folder (created)."""
    preset: str = "tiny"
    """Model preset; only ``tiny`` (built from scratch for the compact protocol) is supported."""
    seed: int = 0
    """Base seed: world seeds, synthesis, initialisation, sampling."""
    train_worlds: int = 1200
    """Worlds behind the SFT data (the probe: many worlds force copying instead of memorising)."""
    queries_per_world: int = 4
    """Easy queries synthesised per training world."""
    rl_worlds: int = 150
    """Worlds behind the RL prompts (disjoint from SFT and evaluation worlds)."""
    eval_queries: int = 200
    """Held-out queries (from unseen worlds) every model is evaluated on."""
    eval_queries_per_world: int = 2
    """Held-out queries per evaluation world."""
    days: tuple[int, ...] = (3, 5)
    """Trip lengths of the easy queries. 3- and 5-day trajectories hold ~260 and ~455 tokens; 7-day ones
    ~620, too long to learn in this budget on 2 cores (measured: 8 % commonsense micro after SFT), and
    3-day trips alone are learnt almost perfectly by SFT (97 % final pass), leaving GRPO nothing to do."""
    vocab_size: int = 1024
    """Learned BPE vocabulary of the tokenizer (whole-word entities and digit triples come on top)."""
    warmup_steps: int = 1100
    """Copy warm-up steps (it stops earlier once the copy loss is below ``warmup_stop_loss``); 0 skips it.
    Budgets count steps so the numbers do not depend on the machine's speed (about 2 min on 2 cores)."""
    warmup_s: float | None = None
    """A time budget instead of ``warmup_steps`` (the schedule then decays on the clock)."""
    warmup_stop_loss: float = 0.05
    """Copy loss at which the warm-up stops early."""
    sft_steps: int = 490
    """SFT optimizer steps; the learning rate warms up, then decays by a cosine to 5 % (about 8 min)."""
    sft_s: float | None = None
    """A time budget instead of ``sft_steps`` (the cosine then decays on the clock and ends with it)."""
    sft_lr: float = 2e-3
    """Peak SFT learning rate (from scratch)."""
    sft_batch: int = 16
    """Conversations per SFT step (the probe's batch)."""
    rl_steps: int = 140
    """GRPO steps (about 4.5 min)."""
    rl_s: float | None = None
    """A time budget of GRPO; it then stops at whichever of ``rl_steps`` and the budget comes first."""
    rl_lr: float = 3e-5
    """GRPO learning rate (constant)."""
    rl_group: int = 8
    """Episodes per prompt (GRPO group size G)."""
    rl_prompts_per_step: int = 2
    """Prompts per GRPO step (the step trains on ``rl_prompts_per_step × rl_group`` episodes)."""
    rl_temperature: float = 0.8
    """Sampling temperature of the GRPO rollouts."""
    rl_monitor: int = 64
    """Held-out queries evaluated greedily during GRPO for the report's curve (0: none; no selection)."""
    rl_monitor_every: int = 15
    """GRPO steps between those evaluations."""
    max_turns: int = 16
    """Most assistant turns per episode (the expert needs 6 for a 3-day trip, up to 11 for a 5-day one)."""
    max_new_tokens: int = 128
    """Most tokens per assistant turn (a 5-day compact plan needs up to ~90)."""
    max_context_tokens: int = 1024
    """Context budget per episode."""
    threads: int | None = 1
    """Torch threads; one is fastest when other jobs share the 2 cores (None: leave torch's default)."""
    progress: bool = False
    """Show TRL's progress bars."""

    def __post_init__(self) -> None:
        if self.preset != "tiny":
            raise ValueError(f"the pipeline builds the tiny preset from scratch; got preset={self.preset!r}")
        for name in (
            "train_worlds",
            "queries_per_world",
            "rl_worlds",
            "eval_queries",
            "eval_queries_per_world",
        ):
            if getattr(self, name) < 1:
                raise ValueError(f"{name} must be >= 1, got {getattr(self, name)}")
        if self.queries_per_world >= IDX_STRIDE or self.eval_queries_per_world >= IDX_STRIDE:
            raise ValueError(f"queries per world must stay below {IDX_STRIDE}")
        if self.warmup_steps < 0:
            raise ValueError(f"warmup_steps must be >= 0 (0 skips the copy warm-up), got {self.warmup_steps}")
        for name in ("sft_steps", "rl_steps", "sft_lr", "rl_lr"):
            if not getattr(self, name) > 0:
                raise ValueError(f"{name} must be > 0, got {getattr(self, name)}")
        for name in ("warmup_s", "sft_s", "rl_s"):
            if getattr(self, name) is not None and not getattr(self, name) > 0:
                raise ValueError(f"{name} must be > 0 or None (to count steps), got {getattr(self, name)}")
        if self.rl_group < 2:
            raise ValueError(f"rl_group must be >= 2 (GRPO compares episodes), got {self.rl_group}")
        if not self.days or any(d not in (3, 5, 7) for d in self.days):
            raise ValueError(f"days must be a non-empty subset of (3, 5, 7), got {self.days}")
        self.days = tuple(self.days)

    def seeds(self, kind: str, count: int) -> list[int]:
        """World seeds of one kind (``train`` | ``rl`` | ``eval``), disjoint across kinds and base seeds."""
        offset = {"train": 0, "rl": 400_000, "eval": 700_000}[kind]
        return [self.seed * 1_000_000 + offset + i for i in range(count)]

    def rollout_config(self, **overrides: Any) -> Any:
        """Build the compact-protocol episode settings (strict evaluation, SUM reward)."""
        from star_lib.agent.compact import compact_rollout_config

        values = {
            "max_turns": self.max_turns,
            "max_new_tokens": self.max_new_tokens,
            "max_context_tokens": self.max_context_tokens,
            "reward": "sum",
            "eval_mode": "strict",
            "on_format_error": "stop",  # strict protocol: a format error scores 0, so the episode ends there
        }
        values.update(overrides)
        return compact_rollout_config(**values)


# ───────────────────────────── worlds and tasks ─────────────────────────────


class WorldSet:
    """Seeded synthetic worlds built on demand and kept in a bounded cache.

    ``for_query(query)`` returns the world a query was synthesised in (its ``idx`` holds the seed), which
    :func:`star_lib.agent.rollout.run_episodes` uses to run every episode in its own world.

    Args:
        scale: World scale (``tiny``).
        capacity: Most worlds kept in memory.

    """

    def __init__(self, scale: str = "tiny", capacity: int = 512) -> None:
        self.scale = scale
        self.capacity = capacity
        self._worlds: OrderedDict[int, Any] = OrderedDict()

    def world(self, seed: int) -> Any:
        """Return the world of ``seed`` (built once, then cached)."""
        from star_lib.travel.world import World

        world = self._worlds.get(seed)
        if world is None:
            world = self._worlds[seed] = World.synthetic(seed=seed, scale=self.scale)
            while len(self._worlds) > self.capacity:
                self._worlds.popitem(last=False)
        else:
            self._worlds.move_to_end(seed)
        return world

    def for_query(self, query: Any) -> Any:
        """Return the world ``query`` belongs to.

        Raises:
            ValueError: When the query has no ``idx`` (it was not made by :func:`synth_queries`).

        """
        if query.idx is None:
            raise ValueError("the query has no idx: make queries with star_lib.train.pipeline.synth_queries")
        return self.world(int(query.idx) // IDX_STRIDE)


def synth_queries(worlds: WorldSet, seeds: Sequence[int], per_world: int, days: Sequence[int]) -> list[Any]:
    """Synthesise ``per_world`` easy queries with reference plans per world; ``idx`` encodes the seed."""
    from star_lib.synth import SynthConfig, synthesize

    queries = []
    for seed in seeds:
        cfg = SynthConfig(
            n=per_world, mix="easy", days_choices=tuple(days), seed=seed, splits=(1.0, 0.0, 0.0)
        )
        try:
            result = synthesize(worlds.world(seed), cfg)
        except ValueError:  # a world too sparse for any easy trip: skip it
            continue
        records = [r for split in result.splits.values() for r in split]
        queries += [replace(r, idx=seed * IDX_STRIDE + k) for k, r in enumerate(records[:per_world])]
    return queries


def teacher_rows(queries: Sequence[Any], worlds: WorldSet, rollout_cfg: Any) -> tuple[list[dict], dict]:
    """Act out the reference plans with the compact expert; keep episodes that pass the strict evaluator.

    Returns:
        TRL conversational rows (``messages``, ``tools`` None) and counts (``total``, ``kept``).

    """
    from star_lib.agent.compact import CompactExpert
    from star_lib.agent.rollout import run_episodes
    from star_lib.agent.teacher import keep_episode

    episodes = run_episodes(CompactExpert(), list(queries), worlds, replace(rollout_cfg, max_turns=30))
    rows = [
        {"messages": [{"role": m["role"], "content": m["content"]} for m in ep.messages], "tools": None}
        for ep in episodes
        if keep_episode(ep)
    ]
    return rows, {"total": len(episodes), "kept": len(rows)}


def make_training_queries(cfg: PipelineConfig, worlds: WorldSet) -> tuple[list[dict], dict]:
    """Synthesise the training worlds' queries and turn them into SFT rows, world by world (low memory)."""
    rows: list[dict] = []
    counts = {"total": 0, "kept": 0, "worlds": 0}
    seeds = cfg.seeds("train", cfg.train_worlds)
    for start in range(0, len(seeds), 50):
        chunk = WorldSet(worlds.scale, capacity=64)
        queries = synth_queries(chunk, seeds[start : start + 50], cfg.queries_per_world, cfg.days)
        got, n = teacher_rows(queries, chunk, cfg.rollout_config())
        rows += got
        counts["total"] += n["total"]
        counts["kept"] += n["kept"]
        counts["worlds"] += len(chunk._worlds)
    return rows, counts


def write_jsonl(rows: Sequence[dict], path: Path) -> Path:
    """Write rows as JSON lines."""
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("w", encoding="utf-8") as fh:
        for row in rows:
            fh.write(json.dumps(row, ensure_ascii=False) + "\n")
    return path


# ───────────────────────────── tokenizer and model ─────────────────────────────


def whole_words() -> tuple[str, ...]:
    """Strings that are one token each: tiny-pool names, tool names, dates of 2022, ``F`` and ``000``–``999``.

    ``F`` makes a flight number read ``F`` + digit groups wherever it appears (observation, note, plan);
    without it BPE glues the prefix to the character before it (``|F``, `` F``). The three-digit groups
    split a flight number into nearly unique tokens (``F7905936`` → ``F 790 593 6``), which a small model
    copies far more reliably than seven single digits (the tokenizer splits other numbers into digits).
    """
    from star_lib.travel import names
    from star_lib.travel.tools import TOOL_NAMES

    start = dt.date(2022, 1, 1)
    dates = tuple(str(start + dt.timedelta(days=i)) for i in range(365))
    triples = tuple(f"{i:03d}" for i in range(1000))
    pools = names.TINY_STATES + names.TINY_CITIES + names.TINY_HOTELS + names.TINY_RESTAURANTS
    return tuple(dict.fromkeys(pools + names.TINY_ATTRACTIONS + TOOL_NAMES + dates + ("F",) + triples))


def build_base_model(cfg: PipelineConfig, rows: Sequence[dict], out: Path) -> tuple[Any, Any]:
    """Train the tokenizer on the SFT conversations, build the tiny model for it, save both to ``out``."""
    from star_lib.train.models import PRESETS, build_tiny_model, load_model_and_tokenizer
    from star_lib.train.sft import tokenizer_corpus
    from star_lib.train.tokenizer import TokenizerConfig, train_tokenizer

    corpus = list(tokenizer_corpus(list(rows[:2000])))
    config = TokenizerConfig(vocab_size=cfg.vocab_size, digits="single", whole_words=whole_words())
    tokenizer = train_tokenizer(corpus, config)
    model = build_tiny_model(tokenizer, PRESETS[cfg.preset].architecture, seed=cfg.seed)
    out.mkdir(parents=True, exist_ok=True)
    model.save_pretrained(out)
    tokenizer.save_pretrained(out)
    # every later stage loads the folder; use the reloaded tokenizer from here on so all stages agree
    return load_model_and_tokenizer(cfg.preset, path=out)


def copy_warmup_all(model: Any, tokenizer: Any, cfg: PipelineConfig) -> Any:
    """Copy-task warm-up over every ordinary and whole-word token (names are what trajectories copy).

    :func:`star_lib.train.warmup.copy_warmup` draws only learned BPE tokens by default; here its pool
    includes the added entity tokens, and its learning rate follows :class:`CosineSchedule` over
    ``warmup_steps`` (or the ``warmup_s`` clock).
    """
    from star_lib.train.warmup import CopyWarmupConfig, copy_warmup

    wcfg = CopyWarmupConfig(
        steps=cfg.warmup_steps if cfg.warmup_s is None else 100_000,
        batch_size=16,
        max_tokens=40,
        learning_rate=1e-3,
        stop_loss=cfg.warmup_stop_loss,
        time_budget_s=cfg.warmup_s,
        seed=cfg.seed,
    )
    special = set(tokenizer.all_special_ids)
    pool = sorted(i for i in tokenizer.get_vocab().values() if i not in special)
    clock = CosineSchedule(
        budget_s=cfg.warmup_s, budget_steps=cfg.warmup_steps, warmup_steps=wcfg.warmup_steps
    )
    return copy_warmup(model, tokenizer, wcfg, pool=pool, lr_factor=clock)


class CosineSchedule:
    """A learning-rate factor: linear warm-up, then a cosine to ``floor`` over a budget of steps or seconds.

    Counting steps makes a run's numbers independent of the machine's speed; a time budget (``budget_s``)
    decays on the clock instead, so the schedule ends when the budget does however many steps really run.

    Args:
        budget_s: Seconds until the factor reaches ``floor`` (wins over ``budget_steps`` when given).
        budget_steps: Steps until the factor reaches ``floor``.
        warmup_steps: Steps of linear warm-up.
        floor: Final factor.

    """

    def __init__(
        self,
        *,
        budget_s: float | None = None,
        budget_steps: int | None = None,
        warmup_steps: int = 50,
        floor: float = 0.05,
    ) -> None:
        if budget_s is None and not budget_steps:
            raise ValueError("give budget_s or budget_steps")
        self.budget_s, self.budget_steps = budget_s, budget_steps
        self.warmup_steps, self.floor = warmup_steps, floor
        self.start = time.monotonic()

    @property
    def elapsed(self) -> float:
        """Seconds since the schedule was built."""
        return time.monotonic() - self.start

    def progress(self, step: int) -> float:
        """Share of the budget used at ``step`` (0 to 1)."""
        if self.budget_s is not None:
            return min(1.0, self.elapsed / self.budget_s)
        return min(1.0, step / max(1, self.budget_steps or 1))

    def finished(self, step: int) -> bool:
        """Return True once the budget is spent (after ``step`` steps)."""
        return self.progress(step) >= 1.0

    def __call__(self, step: int) -> float:
        """Return the factor for ``step`` (at the current time, for a time budget)."""
        ramp = min(1.0, (step + 1) / max(1, self.warmup_steps))
        return ramp * (self.floor + (1 - self.floor) * 0.5 * (1 + math.cos(math.pi * self.progress(step))))


# ───────────────────────────── evaluation ─────────────────────────────


def summarize(episodes: Sequence[Any]) -> dict[str, float]:
    """Summarise a model's episodes: final pass, commonsense micro, SUM (mean, SE), tool-call and plan shares.

    ``final_pass`` and ``sum`` follow the strict protocol (a malformed episode scores 0); ``cs_micro`` is the
    evaluator's commonsense micro of the delivered plan (0 without one); ``valid_tool_calls`` is the share of
    tool calls with a known tool and well-formed arguments; ``parseable_plans`` the share of episodes whose
    answer expanded to an official plan; ``flight_legs`` the share of travel legs flown (not driven).
    """
    n = len(episodes)
    if n == 0:
        return {"n": 0.0}
    rewards = [float(ep.reward) for ep in episodes]
    calls = sum(ep.tool_calls for ep in episodes)
    return {
        "n": float(n),
        "final_pass": sum(bool(ep.report and ep.report.final_pass) and not ep.malformed for ep in episodes)
        / n,
        "cs_micro": sum(ep.report.cs_micro if ep.report else 0.0 for ep in episodes) / n,
        "sum": sum(rewards) / n,
        "sum_se": standard_error(rewards),
        "valid_tool_calls": sum(ep.valid_tool_calls for ep in episodes) / calls if calls else 0.0,
        "parseable_plans": sum(ep.plan is not None for ep in episodes) / n,
        "format_error_rate": sum(ep.format_errors > 0 for ep in episodes) / n,
        "flight_legs": _flight_share(episodes),
        "turns": sum(ep.turns for ep in episodes) / n,
        "model_tokens": sum(ep.model_tokens for ep in episodes) / n,
    }


def _flight_share(episodes: Sequence[Any]) -> float:
    """Share of the delivered plans' travel legs that are flights (the rest drive or take a taxi)."""
    legs = [
        d.transportation for ep in episodes if ep.plan for d in ep.plan if d.transportation.strip() != "-"
    ]
    return sum(leg.startswith("Flight") for leg in legs) / len(legs) if legs else 0.0


def evaluate_model(
    model: Any, tokenizer: Any, queries: Sequence[Any], worlds: WorldSet, cfg: PipelineConfig
) -> tuple[list[Any], dict[str, float]]:
    """Greedy episodes on ``queries`` with the fast sampler; returns the episodes and :func:`summarize`."""
    from star_lib.agent.policies import SamplingParams
    from star_lib.agent.rollout import run_episodes
    from star_lib.agent.fastgen import FastPolicy

    start = time.perf_counter()
    policy = FastPolicy(model, tokenizer, SamplingParams(temperature=0.0))
    episodes = run_episodes(policy, list(queries), worlds, cfg.rollout_config())
    metrics = summarize(episodes)
    metrics["seconds"] = time.perf_counter() - start
    metrics["gen_tokens_per_s"] = policy.stats.tokens_per_s
    return episodes, metrics


def save_episodes(episodes: Sequence[Any], path: Path) -> Path:
    """Write one row per episode (verdicts, plan, conversation) to parquet."""
    import polars as pl

    from star_lib.agent.rollout import episodes_frame

    frame = episodes_frame(episodes).with_columns(
        pl.Series("messages", [json.dumps(ep.messages, ensure_ascii=False) for ep in episodes])
    )
    path.parent.mkdir(parents=True, exist_ok=True)
    frame.write_parquet(path)
    return path


# ───────────────────────────── SFT ─────────────────────────────


def _cosine_callback(peak_lr: float, budget_s: float | None, budget_steps: int, warmup_steps: int) -> Any:
    """Build a trainer callback that sets the learning rate from :class:`CosineSchedule` before every step."""
    from transformers import TrainerCallback

    class _Callback(TrainerCallback):
        def __init__(self) -> None:
            self.clock: CosineSchedule | None = None

        def on_train_begin(self, args: Any, state: Any, control: Any, **kwargs: Any) -> None:
            self.clock = CosineSchedule(
                budget_s=budget_s, budget_steps=budget_steps, warmup_steps=warmup_steps
            )

        def on_step_begin(self, args: Any, state: Any, control: Any, **kwargs: Any) -> None:
            optimizer = kwargs.get("optimizer")
            if optimizer is None or self.clock is None:
                return
            lr = peak_lr * self.clock(state.global_step)
            for group in optimizer.param_groups:
                group["lr"] = lr

    return _Callback()


def run_sft_stage(cfg: PipelineConfig, data: Path, start_dir: Path, out: Path) -> dict[str, Any]:
    """Run SFT on the expert rows with TRL (:func:`star_lib.train.sft.make_sft_trainer`).

    ``cfg.sft_steps`` steps, or ``cfg.sft_s`` seconds. The learning rate follows :class:`CosineSchedule`
    (set by a callback; TRL's own schedule is constant), so with a time budget the decay ends when the
    budget does whatever the machine's speed.
    """
    from star_lib.train.metrics import MetricsLog, ParquetMetricsCallback, TimeBudgetCallback
    from star_lib.train.models import load_model_and_tokenizer
    from star_lib.train.sft import SFTRunConfig, make_sft_trainer, read_sft_rows

    run_cfg = SFTRunConfig(
        data=str(data),
        output_dir=str(out),
        preset=cfg.preset,
        model_path=str(start_dir),
        learning_rate=cfg.sft_lr,
        lr_scheduler_type="constant",
        warmup_ratio=0.0,
        max_steps=cfg.sft_steps if cfg.sft_s is None else 1_000_000,
        per_device_train_batch_size=cfg.sft_batch,
        max_length=cfg.max_context_tokens,
        logging_steps=25,
        save_steps=1_000_000,
        save_total_limit=1,
        seed=cfg.seed,
        progress=cfg.progress,
        trl_overrides={"weight_decay": 0.0},
    )
    model, tokenizer = load_model_and_tokenizer(cfg.preset, path=start_dir)
    rows = read_sft_rows(data)
    metrics = MetricsLog(out / "metrics.parquet")
    prepared = time.monotonic()
    trainer = make_sft_trainer(
        run_cfg, model, tokenizer, rows, [ParquetMetricsCallback(metrics, stage="sft")]
    )
    prepare_s = time.monotonic() - prepared  # tokenising the conversations counts against the budget
    _quiet(trainer)
    remaining = None if cfg.sft_s is None else max(1.0, cfg.sft_s - prepare_s)
    trainer.add_callback(_cosine_callback(cfg.sft_lr, remaining, cfg.sft_steps, warmup_steps=30))
    if remaining is not None:
        trainer.add_callback(TimeBudgetCallback(remaining))
    start = time.monotonic()
    trainer.train()
    seconds = time.monotonic() - start
    model_dir = out / "model"
    trainer.save_model(str(model_dir))
    tokenizer.save_pretrained(model_dir)
    metrics.flush()
    losses = [(r["step"], r["train/loss"]) for r in metrics.rows if r.get("train/loss") is not None]
    return {
        "model_dir": model_dir,
        "steps": trainer.state.global_step,
        "seconds": seconds,
        "prepare_s": prepare_s,
        "losses": losses,
        "rows": len(rows),
    }


def _quiet(trainer: Any) -> None:
    """Drop the callback that prints every log dict to stdout (metrics still go to ``metrics.parquet``)."""
    from transformers.trainer_callback import PrinterCallback

    trainer.remove_callback(PrinterCallback)


# ───────────────────────────── GRPO ─────────────────────────────


def _monitor_callback(cfg: PipelineConfig, queries: Sequence[Any], worlds: WorldSet, log: list) -> Any:
    """Build a callback that evaluates the policy greedily on ``queries`` every ``rl_monitor_every`` steps.

    It only records (``log`` gets ``(step, mean SUM, final pass)``); nothing is selected with it.
    """
    from transformers import TrainerCallback

    class _Monitor(TrainerCallback):
        def _run(self, state: Any, model: Any, tokenizer: Any) -> None:
            if model is None or tokenizer is None or (log and log[-1][0] == state.global_step):
                return
            was_training = model.training
            model.eval()
            _, metrics = evaluate_model(model, tokenizer, queries, worlds, cfg)
            model.train(was_training)
            log.append((int(state.global_step), metrics["sum"], metrics["final_pass"]))

        def on_train_begin(self, args: Any, state: Any, control: Any, **kwargs: Any) -> None:
            self._run(state, kwargs.get("model"), kwargs.get("processing_class"))

        def on_step_end(self, args: Any, state: Any, control: Any, **kwargs: Any) -> None:
            if state.global_step % cfg.rl_monitor_every == 0:
                self._run(state, kwargs.get("model"), kwargs.get("processing_class"))

        def on_train_end(self, args: Any, state: Any, control: Any, **kwargs: Any) -> None:
            self._run(state, kwargs.get("model"), kwargs.get("processing_class"))

    return _Monitor()


def run_rl_stage(
    cfg: PipelineConfig,
    data: Path,
    sft_dir: Path,
    out: Path,
    worlds: WorldSet,
    monitor: Sequence[Any] = (),
) -> dict[str, Any]:
    """GRPO with the SUM reward on the RL queries for ``cfg.rl_steps`` steps (TRL ``GRPOTrainer``).

    ``monitor`` queries (if any) are evaluated greedily along the way for the report's curve.
    """
    from star_lib.train.rl import RLRunConfig, make_grpo_trainer

    run_cfg = RLRunConfig(
        data=str(data),
        output_dir=str(out),
        model_path=str(sft_dir),
        world="synthetic:tiny:0",  # unused: the episodes run in their queries' worlds (WorldSet)
        preset=cfg.preset,
        reward="sum",
        num_generations=cfg.rl_group,
        prompts_per_step=cfg.rl_prompts_per_step,
        learning_rate=cfg.rl_lr,
        max_steps=cfg.rl_steps,
        temperature=cfg.rl_temperature,
        max_turns=cfg.max_turns,
        max_context_tokens=cfg.max_context_tokens,
        max_new_tokens=cfg.max_new_tokens,
        token_ids="sampled",
        protocol="compact",
        # the format gate scores any format error 0, so later turns could earn nothing: end the episode
        rollout_overrides={"on_format_error": "stop", "max_format_errors": 1},
        fast_generation=True,
        seed=cfg.seed,
        save_steps=1_000_000,
        save_total_limit=1,
        rollouts_per_step=2,
        time_budget_s=cfg.rl_s,
        trl_overrides={"disable_tqdm": not cfg.progress, "weight_decay": 0.0},
    )
    trainer = make_grpo_trainer(run_cfg, world=worlds)
    _quiet(trainer)
    monitored: list[tuple[int, float, float]] = []
    if monitor:
        trainer.add_callback(_monitor_callback(cfg, monitor, worlds, monitored))
    start = time.monotonic()
    trainer.train()
    seconds = time.monotonic() - start
    model_dir = out / "model"
    trainer.save_model(str(model_dir))
    trainer.processing_class.save_pretrained(model_dir)
    metrics = trainer.star_metrics  # type: ignore[attr-defined]
    metrics.flush()
    curve = [
        (int(r["step"]), float(r["train/reward"]))
        for r in metrics.rows
        if r["stage"] == "rl" and r.get("train/reward") is not None
    ]
    return {
        "model_dir": model_dir,
        "steps": trainer.state.global_step,
        "seconds": seconds,
        "curve": curve,
        "monitor": monitored,
    }


# ───────────────────────────── the whole pipeline ─────────────────────────────


@dataclass
class PipelineResult:
    """What :func:`run_pipeline` measured."""

    models: dict[str, dict[str, float]]
    """``base`` | ``sft`` | ``rl`` → :func:`summarize` numbers on the held-out queries."""
    rl_curve: list[tuple[int, float]]
    """(step, mean SUM reward of that step's training rollouts)."""
    paired: dict[str, float]
    """RL − SFT per held-out query: mean difference of SUM and its standard error."""
    rl_monitor: list[tuple[int, float, float]] = field(default_factory=list)
    """(step, greedy mean SUM, greedy final pass) on the first ``rl_monitor`` held-out queries."""
    stages: dict[str, Any] = field(default_factory=dict)
    """Per-stage details: data counts, warm-up losses, SFT losses, steps, seconds, generation speed."""
    minutes: float = 0.0
    """Wall-clock minutes of the whole pipeline."""

    def final_json(self) -> dict[str, float]:
        """Return the benchmark's last line."""
        base, sft, rl = (self.models.get(k, {}) for k in MODELS)
        return {
            "cs_micro_base": round(base.get("cs_micro", 0.0), 4),
            "cs_micro_sft": round(sft.get("cs_micro", 0.0), 4),
            "sum_sft": round(sft.get("sum", 0.0), 4),
            "sum_rl": round(rl.get("sum", 0.0), 4),
            "sum_rl_se": round(rl.get("sum_se", 0.0), 4),
            "success_sft": round(sft.get("final_pass", 0.0), 4),
            "success_rl": round(rl.get("final_pass", 0.0), 4),
            "minutes": round(self.minutes, 2),
        }


def run_pipeline(cfg: PipelineConfig, log: Callable[[str], None] = print) -> PipelineResult:
    """Run every stage and return the measurements (also written to ``out_dir/summary.json``)."""
    import torch

    from star_lib.train.models import load_model_and_tokenizer

    start = time.monotonic()
    out = Path(cfg.out_dir)
    for stage in ("base", "warm", "sft", "rl"):  # a rerun starts fresh (metrics files would be appended to)
        shutil.rmtree(out / stage, ignore_errors=True)
    if cfg.threads is not None:
        torch.set_num_threads(cfg.threads)
    torch.manual_seed(cfg.seed)
    out.mkdir(parents=True, exist_ok=True)
    stages: dict[str, Any] = {}

    def mark(name: str, since: float, **info: Any) -> float:
        now = time.monotonic()
        stages[name] = {"seconds": round(now - since, 1), **info}
        log(f"[{now - start:7.1f}s] {name}: {json.dumps(stages[name], default=str)[:300]}")
        return now

    t = time.monotonic()
    worlds = WorldSet("tiny")
    rows, counts = make_training_queries(cfg, worlds)
    sft_data = write_jsonl(rows, out / "data" / "sft.jsonl")
    rl_queries = synth_queries(worlds, cfg.seeds("rl", cfg.rl_worlds), cfg.queries_per_world, cfg.days)
    rl_data = write_jsonl([q.to_dict() for q in rl_queries], out / "data" / "rl.jsonl")
    eval_worlds = math.ceil(cfg.eval_queries / cfg.eval_queries_per_world) + 5
    held_out = synth_queries(worlds, cfg.seeds("eval", eval_worlds), cfg.eval_queries_per_world, cfg.days)
    held_out = held_out[: cfg.eval_queries]
    write_jsonl([q.to_dict() for q in held_out], out / "data" / "eval.jsonl")
    t = mark("data", t, **counts, rl_queries=len(rl_queries), eval_queries=len(held_out))

    model, tokenizer = build_base_model(cfg, rows, out / "base")
    from star_lib.train.models import count_parameters

    t = mark("model", t, parameters=count_parameters(model), vocab=len(tokenizer))
    results: dict[str, dict[str, float]] = {}
    episodes: dict[str, list[Any]] = {}
    episodes["base"], results["base"] = evaluate_model(model, tokenizer, held_out, worlds, cfg)
    save_episodes(episodes["base"], out / "eval_base.parquet")
    t = mark("eval_base", t, **results["base"])

    warm = copy_warmup_all(model, tokenizer, cfg) if cfg.warmup_steps > 0 else None
    model.save_pretrained(out / "warm")
    tokenizer.save_pretrained(out / "warm")
    t = mark(
        "warmup",
        t,
        **({"steps": warm.steps, "stopped": warm.stopped, "losses": warm.losses[-3:]} if warm else {}),
    )

    sft = run_sft_stage(cfg, sft_data, out / "warm", out / "sft")
    t = mark(
        "sft",
        t,
        steps=sft["steps"],
        rows=sft["rows"],
        prepare_s=round(sft["prepare_s"], 1),
        losses=sft["losses"][-3:],
    )
    model, tokenizer = load_model_and_tokenizer(cfg.preset, path=sft["model_dir"])
    episodes["sft"], results["sft"] = evaluate_model(model, tokenizer, held_out, worlds, cfg)
    save_episodes(episodes["sft"], out / "eval_sft.parquet")
    t = mark("eval_sft", t, **results["sft"])

    speed = generation_speed(model, tokenizer, held_out, worlds, cfg)
    t = mark("generation_speed", t, **speed)

    rl = run_rl_stage(cfg, rl_data, sft["model_dir"], out / "rl", worlds, held_out[: cfg.rl_monitor])
    t = mark("rl", t, steps=rl["steps"], curve=rl["curve"][-3:], monitor=rl["monitor"])
    stages["rl_monitor_queries"] = min(cfg.rl_monitor, len(held_out))
    model, tokenizer = load_model_and_tokenizer(cfg.preset, path=rl["model_dir"])
    episodes["rl"], results["rl"] = evaluate_model(model, tokenizer, held_out, worlds, cfg)
    save_episodes(episodes["rl"], out / "eval_rl.parquet")
    t = mark("eval_rl", t, **results["rl"])

    diffs = [b.reward - a.reward for a, b in zip(episodes["sft"], episodes["rl"], strict=True)]
    paired = {"mean": sum(diffs) / len(diffs), "se": standard_error(diffs)}
    result = PipelineResult(
        models=results,
        rl_curve=rl["curve"],
        paired=paired,
        rl_monitor=rl["monitor"],
        stages=stages,
        minutes=(time.monotonic() - start) / 60,
    )
    summary = {"config": asdict(cfg), **asdict(result), "final": result.final_json()}
    (out / "summary.json").write_text(json.dumps(summary, indent=2, default=str) + "\n", encoding="utf-8")
    return result


def generation_speed(
    model: Any, tokenizer: Any, queries: Sequence[Any], worlds: WorldSet, cfg: PipelineConfig, n: int = 32
) -> dict[str, float]:
    """Time whole greedy episodes with HF ``generate`` (``TransformersPolicy``) and with ``FastPolicy``.

    Both run the same ``n`` held-out episodes through :func:`~star_lib.agent.rollout.run_episodes`; the
    tokens/s count sampled tokens over the time spent inside ``generate``. ``same_episodes`` is the share
    of episodes whose assistant turns are identical (greedy decoding must agree).
    """
    from star_lib.agent.policies import SamplingParams, TransformersPolicy
    from star_lib.agent.rollout import RolloutStats, run_episodes
    from star_lib.agent.fastgen import FastPolicy

    greedy = SamplingParams(temperature=0.0)
    subset = list(queries)[:n]
    out: dict[str, float] = {}
    turns: dict[str, list[list[str]]] = {}
    for name, policy in (
        ("hf", TransformersPolicy(model, tokenizer, greedy, batch_size=len(subset))),
        ("fast", FastPolicy(model, tokenizer, greedy)),
    ):
        stats = RolloutStats()
        episodes = run_episodes(policy, subset, worlds, cfg.rollout_config(), stats=stats)
        tokens = sum(ep.model_tokens for ep in episodes)
        out[f"{name}_tokens_per_s"] = tokens / stats.generation_s if stats.generation_s else 0.0
        out[f"{name}_generate_s"] = round(stats.generation_s, 2)
        out[f"{name}_tokens"] = float(tokens)
        turns[name] = [[m["content"] for m in ep.messages if m["role"] == "assistant"] for ep in episodes]
    out["speedup"] = out["fast_tokens_per_s"] / max(out["hf_tokens_per_s"], 1e-9)
    out["same_episodes"] = sum(a == b for a, b in zip(turns["hf"], turns["fast"], strict=True)) / len(subset)
    return out


# ───────────────────────────── report ─────────────────────────────

_ROWS: tuple[tuple[str, str, str], ...] = (
    ("final pass", "final_pass", "pct"),
    ("commonsense micro", "cs_micro", "pct"),
    ("mean SUM reward", "sum", "sum"),
    ("valid tool calls", "valid_tool_calls", "pct"),
    ("parseable plans", "parseable_plans", "pct"),
    ("format-error episodes", "format_error_rate", "pct"),
    ("travel legs by flight", "flight_legs", "pct"),
    ("model tokens / episode", "model_tokens", "num"),
)


def print_report(result: PipelineResult, console: Any = None) -> None:
    """Print the per-model table, the RL reward curve and the stage timings with rich."""
    from rich.console import Console
    from rich.table import Table

    console = console or Console()
    n = int(result.models.get("sft", {}).get("n", 0))
    table = Table(title=f"Held-out easy queries from unseen worlds (n={n}, greedy, strict evaluator)")
    table.add_column("metric")
    for name in MODELS:
        table.add_column({"base": "untrained", "sft": "SFT", "rl": "SFT + GRPO"}[name], justify="right")
    for label, key, kind in _ROWS:
        cells = []
        for name in MODELS:
            m = result.models.get(name, {})
            value = m.get(key, 0.0)
            if kind == "pct":
                cells.append(f"{100 * value:.1f} %")
            elif kind == "sum":
                cells.append(f"{value:.3f} ± {m.get('sum_se', 0.0):.3f}")
            else:
                cells.append(f"{value:.0f}")
        table.add_row(label, *cells)
    console.print(table)
    diff, se = result.paired["mean"], result.paired["se"]
    console.print(f"RL − SFT mean SUM reward per query: {diff:+.3f} ± {se:.3f} (paired standard error)")
    console.print(curve_text(result.rl_curve))
    if result.rl_monitor:
        shown = " | ".join(f"{step}: {mean:.3f} ({100 * ok:.0f} %)" for step, mean, ok in result.rl_monitor)
        n_monitor = int(result.stages.get("rl_monitor_queries", 0)) or "some"
        console.print(f"greedy mean SUM (final pass) on {n_monitor} held-out queries during GRPO — {shown}")
    timed = {k: v["seconds"] for k, v in result.stages.items() if isinstance(v, dict) and "seconds" in v}
    console.print("stage seconds: " + ", ".join(f"{k} {v}" for k, v in timed.items()))


def curve_text(curve: Sequence[tuple[int, float]], points: int = 12) -> str:
    """Render the RL reward curve as ``step: mean`` over equal windows of steps (training rollouts)."""
    if not curve:
        return "RL reward curve: no steps logged"
    size = max(1, math.ceil(len(curve) / points))
    parts = []
    for start in range(0, len(curve), size):
        window = curve[start : start + size]
        mean = sum(r for _, r in window) / len(window)
        parts.append(f"{window[0][0]}-{window[-1][0]}: {mean:.3f}")
    return "RL mean SUM reward of the training rollouts by steps — " + " | ".join(parts)
