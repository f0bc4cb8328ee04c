"""What the study costs: stage timings, each stage's content signature, and the dry run's estimate.

:func:`estimate` predicts the compute each grid adds, in study order: a stage whose content (its resolved
config and its inputs' content) an earlier run already produced costs nothing, exactly as in the cache.
:func:`describe_estimates` is the text ``star study --dry-run`` prints.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from star_lib.experiments.artifacts import stable_hash
from star_lib.experiments.config import ExperimentConfig
from star_lib.experiments.evalpool import splittable
from star_lib.experiments.grids import Grid


@dataclass(frozen=True)
class Timing:
    """Seconds per unit of work on 2 CPU cores, for :func:`estimate` (``timing:`` in ``study.yaml``)."""

    world: float = 2.0
    """A world stage."""
    synth: float = 60.0
    """A synth stage."""
    teacher: float = 100.0
    """A teacher stage."""
    warmup_step: float = 0.15
    """One copy warm-up step of ``tiny``."""
    sft_step: float = 1.2
    """One SFT step of ``tiny``."""
    rl_episode: float = 0.27
    """One RL episode of ``tiny`` (rollout and update)."""
    eval_episode: float = 0.1
    """One held-out evaluation episode of ``tiny``."""
    ood_episode: float = 0.25
    """One OOD evaluation episode of ``tiny``."""
    eval_split: float = 1.0
    """How many times faster a greedy evaluation runs split over processes (``eval_processes`` > 1) than in
    one (``benchmarks/bench_eval_processes.py`` measures it); the estimate divides evaluation time by it."""
    model_factor: dict[str, float] = field(
        default_factory=lambda: {"tiny-s": 0.6, "tiny": 1.0, "tiny-l": 2.0}
    )
    """Cost of a model size relative to ``tiny`` (others: 1)."""
    algorithm_factor: dict[str, float] = field(
        default_factory=lambda: {"grpo": 1.0, "dapo": 1.8, "arpo": 1.2}
    )
    """Cost of an RL algorithm relative to GRPO."""


_BASE_ONLY: dict[tuple[str, str], tuple[str, ...]] = {
    ("synth", "base"): ("rl_data_size", "difficulty", "ood")
}
"""Outputs that do not depend on some of their stage's settings (the SFT/test tasks ignore the RL axes and
the OOD split), so runs differing only there share what reads them, as the cache does."""
_WRITTEN_WHEN: dict[tuple[str, str], Callable[[Any], bool]] = {("synth", "ood"): lambda cfg: bool(cfg.ood)}
"""Optional outputs (inputs ending in ``?``) and when their stage writes them."""


@dataclass
class RunEstimate:
    """The stages one run adds, and their seconds."""

    run: str
    """Run name."""
    new: dict[str, float]
    """Stage → seconds, for the stages no earlier run produced."""

    @property
    def seconds(self) -> float:
        """Seconds of the new stages."""
        return sum(self.new.values())


@dataclass
class GridEstimate:
    """A grid's estimate: per run, the new stages it computes."""

    grid: Grid
    """The grid."""
    runs: list[RunEstimate]
    """One per run, in order."""
    alone_s: float
    """Seconds the grid takes run on its own (an empty cache)."""

    @property
    def seconds(self) -> float:
        """Seconds the grid adds in study order (stages earlier grids computed are free)."""
        return sum(r.seconds for r in self.runs)

    def count(self, stage: str) -> int:
        """Return how many runs compute ``stage`` anew."""
        return sum(1 for r in self.runs if stage in r.new)


def _stage_seconds(name: str, config: ExperimentConfig, timing: Timing, eval_processes: int = 1) -> float:
    """Seconds one stage of ``config`` takes, from its budgets (steps, episodes) and :class:`Timing`.

    With ``eval_processes`` > 1 a greedy evaluation is split (:mod:`star_lib.experiments.evalpool`), so it
    takes ``1 / timing.eval_split`` of the time.
    """
    factor = timing.model_factor.get(config.model, 1.0)
    if name in ("world", "synth", "teacher"):
        return float(getattr(timing, name))
    if name == "sft":
        warm = (config.sft.get("copy_warmup") or {}).get("steps", 0)
        return factor * (warm * timing.warmup_step + config.sft.get("max_steps", 0) * timing.sft_step)
    if name == "rl":
        rl = config.rl
        steps = rl.get("max_steps", 50)
        episodes = steps * rl.get("prompts_per_step", 2) * rl.get("num_generations", 8)
        seconds = factor * timing.algorithm_factor.get(config.algorithm, 1.0) * episodes * timing.rl_episode
        if rl.get("eval_data"):  # the held-out curve: every eval_steps and at the end, greedy in-process
            every = rl.get("eval_steps", 25)
            scored = min(rl.get("eval_limit", 100), config.synth.get("n_test", 200))
            seconds += factor * (steps // every + bool(steps % every)) * scored * timing.eval_episode
        return seconds
    if name == "eval":
        models = len(config.eval.get("models") or [None])
        cap = config.eval.get("max_queries")
        held_out = config.synth.get("n_test", 200)
        ood = (config.synth.get("ood") or {}).get("n", 0) if config.synth.get("ood") else 0
        if cap:
            held_out, ood = min(held_out, cap), min(ood, cap)
        greedy_fast = splittable(config.eval.get("policy"), config.eval.get("temperature", 0.0))
        split = timing.eval_split if eval_processes > 1 and greedy_fast else 1.0
        return factor * models * (held_out * timing.eval_episode + ood * timing.ood_episode) / split
    return 0.0


def stage_signatures(config: ExperimentConfig, registry: Any = None) -> dict[str, str]:
    """Return a content signature per stage of ``config``: equal signatures mean the cache shares the stage.

    A stage's signature hashes its resolved config and the signatures of the outputs it reads, as the stage
    cache's key hashes the inputs' content; the SFT/test tasks (``synth`` ``base/``) ignore the RL axes.
    """
    from star_lib.experiments.stages import build_registry

    registry = registry or build_registry()
    resolved = registry.check(config)
    signatures: dict[str, str] = {}
    reads: dict[str, dict[str, str]] = {}
    for name, stage_config in resolved.items():
        stage = registry.get(name)
        inputs = {}
        for input_name, (source, spec) in stage.inputs(config.stages, stage_config).items():
            if source not in signatures:
                continue
            top = spec.removesuffix("?").split("/")[0]
            written = _WRITTEN_WHEN.get((source, top))
            if spec.endswith("?") and written is not None and not written(resolved[source]):
                continue  # the runner leaves an optional input out when its stage did not write it
            ignored = _BASE_ONLY.get((source, top))
            if ignored:
                own = registry.get(source).config_dict(resolved[source])
                part = {k: v for k, v in own.items() if k not in ignored}
                inputs[input_name] = stable_hash({"config": part, "inputs": reads[source], "out": spec})
            else:
                inputs[input_name] = stable_hash({"sig": signatures[source], "out": spec})
        reads[name] = inputs
        signatures[name] = stable_hash(
            {"stage": name, "config": stage.config_dict(stage_config), "inputs": inputs}
        )
    return signatures


def estimate(
    grids: Sequence[Grid],
    timing: Timing,
    done: Iterable[str] = (),
    skip: Mapping[str, str] | None = None,
    *,
    eval_processes: int = 1,
) -> list[GridEstimate]:
    """Estimate each grid's compute in order: stages an earlier run (or ``done``) produced cost nothing.

    ``skip`` maps the runs the study will not run (:func:`.publish.publication_status`) to why: they add
    nothing, so the estimate is what is left to run with an empty cache; ``alone_s`` still counts every run.
    ``eval_processes`` is the study's split of greedy evaluations (see :func:`_stage_seconds`).
    """
    from star_lib.experiments.stages import build_registry

    registry = build_registry()
    skip = skip or {}
    seen = set(done)
    out = []
    for grid in grids:
        runs = []
        alone: set[str] = set()
        alone_s = 0.0
        for config in grid.runs:
            signatures = stage_signatures(config, registry)
            new = {}
            for name, signature in signatures.items():
                seconds = _stage_seconds(name, config, timing, eval_processes)
                if signature not in alone:
                    alone.add(signature)
                    alone_s += seconds
                if signature not in seen and config.name not in skip:
                    seen.add(signature)
                    new[name] = seconds
            runs.append(RunEstimate(config.name, new))
        out.append(GridEstimate(grid, runs, alone_s))
    return out


def describe_estimates(estimates: Sequence[GridEstimate], budget_minutes: float, jobs: int = 1) -> str:
    """Return the dry run's text: every run with the stages it adds, and per grid its minutes.

    With ``jobs`` runs at once a grid takes about its compute divided by ``jobs``: a rough guess, as the
    timings are of one run at a time and runs side by side share the memory bandwidth.
    """
    lines = []
    total = 0.0
    for est in estimates:
        grid = est.grid
        arms = sorted({r.name.rsplit("__s", 1)[0] for r in grid.runs})
        seeds = sorted({r.seed for r in grid.runs})
        shape = f"= {len(arms)} arms x {len(seeds)} seeds {seeds}"
        if len(grid) != len(arms) * len(seeds):  # a top-up (study.yaml more_seeds) gave some arms more seeds
            shape = f"over {len(arms)} arms, seeds {seeds} (more_seeds: some arms have more)"
        lines.append(
            f"{grid.name} (finding {grid.finding}): {len(grid)} runs {shape}; "
            f"axes {[a for a in grid.axes if a != 'seed']}"
        )
        for run in est.runs:
            added = ", ".join(f"{s} {v / 60:.1f}" for s, v in run.new.items()) or "all stages shared"
            lines.append(f"  {run.run:48s} {run.seconds / 60:6.1f} min  ({added})")
        minutes, alone = est.seconds / 60 / jobs, est.alone_s / 60 / jobs
        flag = "" if minutes <= budget_minutes else f"  OVER the {budget_minutes:g}-minute budget"
        lines.append(
            f"  = {minutes:.0f} min in study order ({est.count('sft')} SFT, {est.count('rl')} RL, "
            f"{est.count('eval')} eval stages new); {alone:.0f} min run alone{flag}"
        )
        total += est.seconds / jobs
    runs = sum(len(e.grid) for e in estimates)
    at_once = f", {jobs} runs at once" if jobs > 1 else ""
    lines.append(f"study: {total / 3600:.1f} h estimated (2-core timings) for {runs} runs{at_once}")
    return "\n".join(lines)
