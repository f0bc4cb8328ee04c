"""The quickstart's walkthrough: the expert, an untrained and a trained model on the same held-out tasks.

The eval stage scores a trained model on its run's held-out tasks (from worlds no training task comes from,
with per-query worlds), in the protocol the model was trained on, with the run's turn and token budgets.
:func:`walkthrough` replays the first few of those episodes in a notebook, so a reader sees what training
bought:

- the **trained model** is the newest one in the runs folder (:func:`star_lib.viz.runs.latest_model`); its
  protocol is the one recorded beside it (``star_protocol.json``,
  :func:`star_lib.agent.protocol.read_protocol`);
- the **tasks and their worlds** are the eval stage's own inputs in the run that trained it (synth
  ``base/test.jsonl``, world ``db/``), and the **budgets, policy backend, sampling and faults** come from
  that run's eval stage config (``rollout_config`` of the protocol, as the stage builds it);
- the **untrained model** is the run's ``sft`` ``base/`` (the freshly built model SFT started from, same
  tokenizer), or a fresh tiny model when the run has none;
- the **expert** is the programmatic teacher of the same protocol, acting out each task's reference plan.

With no trained model (or none whose run is in the folder), the tasks and budgets are those a run of the
tiny recipe (``learning-signal``, what ``make demo`` trains) would be evaluated with: its first held-out
tasks are synthesised with the synth stage's functions (:func:`~star_lib.synth.per_world.world_seeds`,
:func:`~star_lib.synth.per_world.synthesize_per_world`), so they are the ones its eval stage scores first.
"""

from __future__ import annotations

import dataclasses
import math
import tempfile
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import polars as pl

    from star_lib.agent.config import RolloutConfig
    from star_lib.experiments.config import ExperimentConfig
    from star_lib.experiments.stages.eval import EvalStageConfig
    from star_lib.travel.faults import FaultConfig
    from star_lib.types import EpisodeResult, QueryRecord

EXPERT, UNTRAINED, TRAINED = "expert", "untrained model", "trained model"
"""The policies of a walkthrough, as its episodes, chart and table name them."""
N_TASKS = 5
"""Held-out tasks a walkthrough runs by default (each policy runs every one)."""
SPARE_WORLDS = 5
"""Extra evaluation worlds, as the synth stage draws them: a world too sparse for a task is skipped."""


@dataclass(frozen=True)
class EvalSetting:
    """How the eval stage runs a model: the held-out tasks and their worlds, the protocol, the budgets."""

    tasks: tuple[QueryRecord, ...]
    """The first held-out tasks (at most ``eval.max_queries``; with reference plans, which the expert acts
    out)."""
    world: Any
    """Their database: a ``World``, or the ``WorldSet`` of per-query worlds (a task's ``idx`` names one)."""
    eval_config: EvalStageConfig
    """The eval stage's resolved config, its ``protocol`` set to the model's."""
    rollout: RolloutConfig
    """The episode settings the eval stage builds from it (protocol fields, turn/token/context limits)."""
    faults: FaultConfig | None
    """The evaluation's tool faults (None: none)."""
    source: str
    """Where the tasks and budgets come from, in words (``run reward-tiny/…``, ``the learning-signal
    recipe``)."""
    base_model: Path | None = None
    """The untrained model SFT started from (the run's ``sft`` ``base/``), when there is one."""

    @property
    def protocol(self) -> str:
        """The episode protocol (``react`` | ``compact``)."""
        return str(self.eval_config.protocol)


@dataclass(frozen=True)
class Walkthrough:
    """The episodes of the expert, the untrained model and (when there is one) the trained model."""

    setting: EvalSetting
    """The tasks, protocol and budgets every policy ran with."""
    episodes: dict[str, list[EpisodeResult]]
    """Policy name (:data:`EXPERT`, :data:`UNTRAINED`, :data:`TRAINED`) → one episode per task."""
    untrained_model: Path
    """The untrained model's folder."""
    trained_model: Path | None = None
    """The trained model's folder (None: the runs folder holds none)."""
    run: Path | None = None
    """The run folder whose stages trained it (None: the recipe's setting was used)."""
    results_dir: str = "runs"
    """The runs folder searched."""

    @property
    def model_name(self) -> str:
        """The model to read an episode of: :data:`TRAINED` when there is one, else :data:`UNTRAINED`."""
        return TRAINED if TRAINED in self.episodes else UNTRAINED

    def passes(self) -> dict[str, int]:
        """Tasks each policy passes end to end (strict final pass)."""
        return {name: sum(_final(ep) for ep in eps) for name, eps in self.episodes.items()}

    def table(self) -> pl.DataFrame:
        """One row per policy and task: how the episode ended, its turns, format errors and verdicts."""
        import polars as pl

        rows = [
            {
                "policy": name,
                "task": i + 1,
                "days": ep.query.days,
                "ended": ep.termination.value,
                "turns": ep.turns,
                "format errors": ep.format_errors,
                "plan delivered": _delivered(ep),
                "commonsense": ep.report.cs_micro if ep.report else 0.0,
                "final pass": _final(ep),
            }
            for name, eps in self.episodes.items()
            for i, ep in enumerate(eps)
        ]
        return pl.DataFrame(rows)

    def summary(self) -> str:
        """One sentence: the setting and how many tasks each policy passes."""
        s, n, passes = self.setting, len(self.setting.tasks), self.passes()
        where = (
            f"On {n} held-out tasks of {s.source} ({s.protocol} protocol, at most {s.rollout.max_turns} "
            f"turns of {s.rollout.max_new_tokens} new tokens, as its eval stage runs them), the expert "
            f"passes {passes[EXPERT]} of {n}"
        )
        if TRAINED not in self.episodes:
            return (
                f"{where} and the untrained model {passes[UNTRAINED]} of {n}; there is no trained model "
                f"under {self.results_dir} yet (`make demo` trains one)."
            )
        return f"{where}, the untrained model {passes[UNTRAINED]} and the trained model {passes[TRAINED]}."

    def bought(self) -> str:
        """Say what training bought on these tasks (trained against untrained), or how to train a model."""
        if TRAINED not in self.episodes:
            return (
                f"No trained model under `{self.results_dir}` yet. `make demo` runs the tiny learning signal "
                "(expert transcripts of the compact protocol → SFT → GRPO → eval on worlds no training task "
                "comes from) into `runs/`; run this notebook again and the trained model joins the chart."
            )
        n = len(self.setting.tasks)
        trained, untrained = (_facts(self.episodes[k]) for k in (TRAINED, UNTRAINED))
        return (
            f"What training bought on these {n} tasks: the trained model delivers {trained['delivered']} "
            f"plans (untrained: {untrained['delivered']}), makes {trained['format errors']} format errors "
            f"(untrained: {untrained['format errors']}), passes {trained['commonsense']:.0%} of the "
            f"commonsense checks (untrained: {untrained['commonsense']:.0%}) and {trained['passes']} of {n} "
            f"tasks end to end (untrained: {untrained['passes']}; the expert: {self.passes()[EXPERT]})."
        )


def _final(ep: EpisodeResult) -> bool:
    return bool(ep.report is not None and ep.report.final_pass)


def _delivered(ep: EpisodeResult) -> bool:
    return bool(ep.report is not None and ep.report.delivered)


def _facts(episodes: Sequence[EpisodeResult]) -> dict[str, Any]:
    """Delivered plans, format errors, mean commonsense share and final passes of some episodes."""
    shares = [ep.report.cs_micro if ep.report else 0.0 for ep in episodes]
    return {
        "delivered": sum(_delivered(ep) for ep in episodes),
        "format errors": sum(ep.format_errors for ep in episodes),
        "commonsense": sum(shares) / max(1, len(shares)),
        "passes": sum(_final(ep) for ep in episodes),
    }


# ───────────────────────────── the setting ─────────────────────────────


def model_run(results_dir: str | Path, model_dir: str | Path) -> Path | None:
    """Return the run folder (``<results_dir>/<grid>/<run>``) whose stages trained ``model_dir``.

    ``model_dir`` is a stage output's ``model/`` (``<cache>/<sft|rl>/<key>/model``); a run trained it when its
    ``run.json`` lists that stage and key with that cache. Several runs share a cached model (the arms of a
    grid): a finished one is preferred, then the newest.
    """
    from star_lib.experiments.runner import RUN_FILE, read_run_record

    stage_dir = Path(model_dir).resolve().parent
    stage, key, cache = stage_dir.parent.name, stage_dir.name, stage_dir.parent.parent
    found: list[tuple[bool, float, Path]] = []
    for path in Path(results_dir).glob(f"*/*/{RUN_FILE}"):
        record = read_run_record(path.parent) or {}
        if not record.get("cache") or Path(record["cache"]).resolve() != cache:
            continue
        if any(r.get("stage") == stage and r.get("key") == key for r in record.get("stages") or []):
            found.append((record.get("status") == "done", path.stat().st_mtime, path.parent))
    return max(found)[2] if found else None


def run_setting(run_dir: str | Path, n_tasks: int = N_TASKS, protocol: str | None = None) -> EvalSetting:
    """Return the eval setting of a run: the first held-out tasks its eval stage read, its world, its budgets.

    The tasks and the world are the eval stage's inputs in the run's stage cache (the same input spec the
    runner gives the stage); the budgets come from the run's config, resolved as the eval stage resolves it.

    Args:
        run_dir: A run folder (``config.yaml`` and a ``run.json`` listing its finished stages).
        n_tasks: How many held-out tasks (the first ones).
        protocol: The model's protocol (None: the run's).

    Raises:
        star_lib.experiments.config.ConfigError: The run has not finished the stages the eval stage reads.

    """
    from star_lib.experiments.config import ExperimentConfig
    from star_lib.experiments.runner import input_paths, read_run_record
    from star_lib.experiments.stages import build_registry
    from star_lib.experiments.stages.common import load_world
    from star_lib.io import read_queries, read_yaml

    run_dir = Path(run_dir)
    config = ExperimentConfig.from_dict(read_yaml(run_dir / "config.yaml"))
    record = read_run_record(run_dir) or {}
    cache = Path(record.get("cache") or run_dir.parent.parent / "_stages")
    folders = {row["stage"]: cache / row["stage"] / row["key"] for row in record.get("stages") or []}
    stage = build_registry().get("eval")
    inputs = input_paths(stage, config.stages, folders, stage.resolve_config(config))
    base = inputs["sft"] / "base" if "sft" in inputs else None
    return _setting(
        config,
        tuple(read_queries(inputs["data"])[:n_tasks]),
        load_world(inputs["world"]),
        f"run {run_dir.parent.name}/{run_dir.name}",
        protocol,
        base if base is not None and (base / "config.json").is_file() else None,
    )


def recipe_setting(
    config: ExperimentConfig, n_tasks: int = N_TASKS, protocol: str | None = None, name: str = ""
) -> EvalSetting:
    """Return the eval setting a run of ``config`` would have, without running it.

    Its first held-out tasks are synthesised as its synth stage synthesises them (the same world seeds,
    tasks per world, difficulty mix and options), so they equal the first lines of the ``base/test.jsonl``
    such a run writes; the budgets are its eval section's.

    Raises:
        ValueError: The recipe does not use per-query worlds, or reads its held-out tasks from a file (its
            held-out tasks then come from a synthesis or a file this function does not repeat).

    """
    from star_lib.experiments.stages import build_registry
    from star_lib.synth.per_world import synthesize_per_world, world_seeds
    from star_lib.travel.worldset import WorldSet

    registry = build_registry()
    world = registry.get("world").resolve_config(config)
    synth = registry.get("synth").resolve_config(config)
    if world.source != "synthetic-per-query" or synth.test_queries is not None:
        raise ValueError(
            f"recipe {config.name!r}: a walkthrough synthesises held-out tasks of per-query worlds only "
            f"(world.source is {world.source!r}, synth.test_queries {synth.test_queries!r}); run it and "
            "use run_setting instead"
        )
    worlds = WorldSet(world.scale)
    seeds = world_seeds(synth.data_seed, "eval", math.ceil(n_tasks / synth.test_per_world) + SPARE_WORLDS)
    mix = synth.base_mix if synth.test_mix is None else synth.test_mix
    tasks = synthesize_per_world(worlds, seeds, synth.test_per_world, mix, synth.options)[:n_tasks]
    return _setting(config, tuple(tasks), worlds, f"the {name or config.name} recipe", protocol, None)


def _setting(
    config: ExperimentConfig,
    tasks: tuple[QueryRecord, ...],
    world: Any,
    source: str,
    protocol: str | None,
    base: Path | None,
) -> EvalSetting:
    """Assemble an :class:`EvalSetting` from the run's resolved eval config, as the eval stage builds one."""
    from star_lib.experiments.stages import build_registry
    from star_lib.experiments.stages.common import fault_config, rollout_config

    cfg = build_registry().get("eval").resolve_config(config)
    cfg = dataclasses.replace(cfg, protocol=protocol or cfg.protocol)
    tasks = tasks[: cfg.max_queries]  # the eval stage scores no task past its cap
    rollout = rollout_config(cfg.protocol, **{**cfg.options, "seed": cfg.seed})
    faults = fault_config(cfg.tool_failure_rate, cfg.tool_latency_ms, cfg.tool_corruption_rate, seed=0)
    return EvalSetting(tasks, world, cfg, rollout, faults, source, base)


# ───────────────────────────── the episodes ─────────────────────────────


def run_policy(setting: EvalSetting, model: Path | None) -> list[EpisodeResult]:
    """Run a model folder (None: the expert) on the setting's tasks with the eval stage's policy backend."""
    from star_lib.agent.rollout import run_episodes
    from star_lib.experiments.stages.evaluation import load_policy

    policy = load_policy(setting.eval_config, model)
    return run_episodes(policy, list(setting.tasks), setting.world, setting.rollout, setting.faults)


def walkthrough(
    results_dir: str | Path = "runs",
    *,
    n_tasks: int = N_TASKS,
    recipe: ExperimentConfig | None = None,
    work_dir: str | Path | None = None,
) -> Walkthrough:
    """Run the expert, an untrained model and the newest trained model (if any) on the same held-out tasks.

    Args:
        results_dir: The runs folder (its ``_stages`` cache holds the trained models).
        n_tasks: How many held-out tasks every policy runs.
        recipe: The experiment whose setting is used when no trained model's run is found (default: the
            tiny recipe, ``base_config("tiny")``).
        work_dir: Where a fresh untrained model is written when the run has none (default: a new temporary
            folder).

    Raises:
        star_lib.agent.protocol.ProtocolMismatchError: A model folder records another protocol than the
            one it is run with (never for the trained model: its own protocol is used).

    """
    from star_lib.agent.protocol import read_protocol
    from star_lib.viz.runs import latest_model

    model = latest_model(results_dir)
    protocol = read_protocol(model) if model is not None else None
    run = model_run(results_dir, model) if model is not None else None
    if run is not None:
        setting = run_setting(run, n_tasks, protocol)
    else:
        from star_lib.experiments.grids import TINY_RECIPE, base_config

        name = "" if recipe is not None else TINY_RECIPE
        setting = recipe_setting(recipe or base_config("tiny"), n_tasks, protocol, name=name)
    episodes = {EXPERT: run_policy(setting, None)}
    untrained = setting.base_model or _fresh_tiny(episodes[EXPERT], work_dir)
    episodes[UNTRAINED] = run_policy(setting, untrained)
    if model is not None:
        episodes[TRAINED] = run_policy(setting, model)
    return Walkthrough(setting, episodes, untrained, model, run, str(results_dir))


def _fresh_tiny(expert: Sequence[EpisodeResult], work_dir: str | Path | None) -> Path:
    """Build an untrained tiny model whose tokenizer is trained on the expert's transcripts."""
    from star_lib.train.models import build_tiny

    corpus = [str(m["content"]) for ep in expert for m in ep.messages if m.get("content")]
    folder = tempfile.mkdtemp(prefix="star-tiny-", dir=str(work_dir) if work_dir is not None else None)
    return build_tiny(corpus, folder).path
