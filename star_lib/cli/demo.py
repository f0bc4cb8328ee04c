"""``star demo`` (what ``make demo`` runs): the tiny STAR pipeline end to end, then the report notebooks.

Four steps, each printed as it runs:

1. **Testbed tour** — a seeded synthetic world, a few tool calls (one through the fault injector), and the
   strict evaluator's verdict on a synthesized task's reference plan.
2. **The learning signal** (``star run learning-signal``, the experiment runner) — world → synth → compact
   expert SFT data → copy warm-up + SFT → GRPO (SUM) → greedy strict evaluation of the untrained, SFT and
   RL models on held-out tasks from unseen worlds; its table and reward curve are printed.
3. **A finding grid that trains** (``star run-grid``): by default the reward finding's tiny grid restricted
   to SUM and SUCCESS. Both arms start from the learning-signal recipe, so the content-addressed stage cache
   shares world, data, teacher and SFT with step 2, and the SUM arm *is* step 2's run (reused whole): only
   the SUCCESS arm trains (GRPO) and is evaluated. Complete runs are skipped on a second ``make demo``.
4. **Reports** (``star report --scale tiny``): every finding notebook executed with papermill into
   ``reports/`` with ``reports/index.html`` linking them; the reward page shows the two trained arms.
"""

from __future__ import annotations

import argparse
import json
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

DEFAULT_STAGES: tuple[str, ...] = ("world", "synth", "teacher", "sft", "rl", "eval")
"""Stages of every demo grid run: the whole recipe (``--stages world,synth,eval`` evaluates the expert
instead, in seconds)."""
DEFAULT_AXES: dict[str, tuple[Any, ...]] = {"reward": ("sum", "success")}
"""The default grid's arms: SUM (the learning signal's own run) and SUCCESS (the paper: never best)."""


@dataclass(frozen=True)
class DemoConfig:
    """What ``star demo`` runs and where it writes."""

    runs_dir: str = "runs"
    """Runs folder (one sub-folder per grid)."""
    reports_dir: str = "reports"
    """Where the executed notebooks, HTML pages and figures go."""
    grid: str = "reward"
    """Finding whose tiny grid is run (reward | scale | data | difficulty | algorithm | noise)."""
    axis_values: dict[str, tuple[Any, ...]] = field(default_factory=lambda: dict(DEFAULT_AXES))
    """Restrict the grid's axes to these values (only those of the chosen finding apply)."""
    pipeline: bool = True
    """Run the learning signal (``star run learning-signal``) into ``<runs_dir>/learning-signal/``."""
    stages: tuple[str, ...] = DEFAULT_STAGES
    """Stages of every run."""
    seed: int = 0
    """Seed of the world, the data and the runs."""
    report: bool = True
    """Execute the notebooks afterwards."""

    def __post_init__(self) -> None:
        from star_lib.experiments.grids import FINDINGS

        if self.grid not in FINDINGS:
            raise ValueError(f"grid {self.grid!r} is not a finding; choose one of {list(FINDINGS)}")
        if not self.stages:
            raise ValueError("stages must name at least one stage, e.g. world,synth,teacher,eval")


def register(sub: argparse._SubParsersAction) -> None:
    """Add ``star demo`` to the ``star`` parser."""
    demo = sub.add_parser("demo", help="testbed tour + the tiny learning signal + a small grid + reports")
    demo.add_argument("--runs", default="runs", help="runs folder (default: runs)")
    demo.add_argument("--reports", default="reports", help="reports folder (default: reports)")
    demo.add_argument("--grid", default="reward", help="finding whose tiny grid runs (default: reward)")
    demo.add_argument("--stages", default=None, help="comma-separated stages (default: the whole pipeline)")
    demo.add_argument("--seed", type=int, default=0, help="seed of world, data and runs")
    demo.add_argument("--no-pipeline", action="store_true", help="skip the learning-signal pipeline")
    demo.add_argument("--no-report", action="store_true", help="skip executing the notebooks")
    demo.set_defaults(func=_demo)


def _demo(args: argparse.Namespace) -> int:
    from star_lib.io import check_output_dir
    from star_lib.paths import refuse_overlap

    check_output_dir(args.runs, "--runs")
    check_output_dir(args.reports, "--reports")
    refuse_overlap({"--runs": args.runs}, {"--reports": args.reports})  # the reports read the runs

    cfg = DemoConfig(
        runs_dir=args.runs,
        reports_dir=args.reports,
        grid=args.grid,
        stages=main_steps(args.stages.split(",") if args.stages else None),
        seed=args.seed,
        pipeline=not args.no_pipeline,
        report=not args.no_report,
    )
    result = run_demo(cfg)
    timings = {k: round(v, 1) for k, v in result["timings"].items()}
    summary = {"timings": timings, "learning_signal": result["learning_signal"]}
    print(json.dumps({**summary, "runs": result["runs"], "index": str(result["index"])}))
    failed = any(status == "failed" for _, status in result["runs"])
    return 1 if failed else 0


def run_demo(cfg: DemoConfig, echo: Any = print) -> dict[str, Any]:
    """Run the demo steps; returns timings, the learning signal, run statuses and the report index path."""
    from star_lib.experiments.runner import run_grid_local

    timings: dict[str, float] = {}
    start = time.perf_counter()
    tour = tour_testbed(cfg.seed)
    timings["tour_s"] = time.perf_counter() - start
    _echo_tour(tour, echo)

    signal = None
    if cfg.pipeline:
        from star_lib.experiments.runner import run_experiment
        from star_lib.experiments.signal import GRID, learning_signal, print_learning_signal, signal_run_dir
        from star_lib.experiments.stages import load_config

        config = load_config("learning-signal").replace(seed=cfg.seed)
        run_dir = signal_run_dir(cfg.runs_dir, config)
        echo(f"\n[2/4] the learning signal: world → synth → SFT → GRPO → eval, tiny scale (into {run_dir}/)")
        start = time.perf_counter()
        run_experiment(config, run_dir, grid=GRID)
        timings["pipeline_s"] = time.perf_counter() - start
        measured = learning_signal(run_dir)
        print_learning_signal(measured)
        signal = measured.final_json()

    grid = demo_grid(cfg)
    stages = " → ".join(cfg.stages)
    echo(f"\n[3/4] grid {grid.name}: {len(grid)} runs × stages {stages} (into {cfg.runs_dir}/)")
    start = time.perf_counter()
    results = run_grid_local(grid, cfg.runs_dir)
    timings["grid_s"] = time.perf_counter() - start
    for result in results:
        echo(f"  {result.status:8s} {result.name}" + (f"  {result.error}" if result.error else ""))

    index = None
    if cfg.report:
        from star_lib.cli.report_pages import ReportConfig, build_reports, describe_failure

        echo(f"\n[4/4] reports: executing the notebooks into {cfg.reports_dir}/")
        start = time.perf_counter()
        reports, index = build_reports(
            ReportConfig(out_dir=cfg.reports_dir, results_dir=cfg.runs_dir, scale="tiny", progress=True)
        )
        timings["report_s"] = time.perf_counter() - start
        for failed in (r for r in reports if not r.ok):
            echo(f"  FAILED {describe_failure(failed)}")
        echo(f"  {sum(r.ok for r in reports)}/{len(reports)} notebooks ok → {index}")
    return {
        "timings": timings,
        "learning_signal": signal,
        "runs": [(r.name, r.status) for r in results],
        "index": index,
    }


def tour_testbed(seed: int = 0) -> dict[str, Any]:
    """Build a tiny world, call a few tools (one through a failing fault injector), verify one task's plan."""
    from star_lib.synth import SynthConfig, synthesize
    from star_lib.travel import FaultConfig, FaultInjector, ToolRegistry, World, evaluate_plan

    world = World.synthetic(seed=seed, scale="tiny")
    tools = ToolRegistry(world)
    state = world.states[0]
    city = world.cities_in(state)[0]
    calls = [("SearchCity", {"state": state}), ("SearchAccommodation", {"city": city}), ("SearchFlight", {})]
    observations = [(name, tools.call(name, args)) for name, args in calls]
    flaky = FaultInjector(tools, FaultConfig(failure_rate=1.0, seed=seed, sleep=False))
    failed = flaky.call("SearchRestaurant", {"city": city})
    observations.append(("SearchRestaurant (injected failure)", failed))
    result = synthesize(world, SynthConfig(n=3, mix="1:0:0", seed=seed), progress=False)
    record = result.records[0]
    report = evaluate_plan(record, record.reference_plan, world, mode="strict")
    return {"world": world.summary(), "observations": observations, "record": record, "report": report}


def _echo_tour(tour: dict[str, Any], echo: Any) -> None:
    summary = tour["world"]
    echo("[1/4] testbed tour: a seeded synthetic world (tiny)")
    echo("  " + ", ".join(f"{k}={v}" for k, v in summary.items() if not isinstance(v, (list, dict))))
    for name, obs in tour["observations"]:
        first = obs.text.splitlines()[0] if obs.text else ""
        echo(f"  {name:36s} ok={obs.ok!s:5s} {first[:90]}")
    record, report = tour["record"], tour["report"]
    echo(f"  synthesized task: {record.query[:110]}")
    echo(
        f"  its reference plan, strict evaluator: commonsense {report.commonsense_passed}/8, "
        f"hard {report.hard_passed}/{report.hard_applicable}, final pass {report.final_pass}"
    )


def demo_grid(cfg: DemoConfig) -> Any:
    """Return the tiny grid of ``cfg.grid`` restricted to ``cfg.axis_values``, with ``cfg.stages``."""
    from star_lib.experiments.grids import base_config, factorial, finding_axes

    finding = finding_axes(cfg.grid, "tiny")
    axes = {name: list(cfg.axis_values.get(name, values)) for name, values in finding.items()}
    base = base_config("tiny").replace(stages=list(cfg.stages))
    return factorial(f"{cfg.grid}-tiny", base, axes, seeds=(cfg.seed,), finding=cfg.grid)


def main_steps(stages: Sequence[str] | None) -> tuple[str, ...]:
    """Parse a ``--stages`` value (comma list) or return the defaults.

    Raises:
        ValueError: naming ``--stages`` for an unknown stage, or stages out of pipeline order (refused
            before the demo starts, not when its grid step reaches them).

    """
    from star_lib.experiments.config import ConfigError, check_stages

    if not stages:
        return DEFAULT_STAGES
    chosen = [s.strip() for s in stages if s.strip()]
    if not chosen:
        return ()  # DemoConfig says a demo needs a stage
    try:
        return check_stages(chosen)
    except ConfigError as exc:  # "stages: 'bogus' is not allowed; …" → "--stages: 'bogus' …"
        raise ValueError(f"--{exc}") from None
