"""``star demo``: the tiny STAR pipeline end to end, then the report notebooks (what ``make demo`` runs)."""

from __future__ import annotations

import argparse


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
    import json

    from star_lib.demo import DemoConfig, main_steps, run_demo
    from star_lib.io import check_output_dir

    check_output_dir(args.runs, "--runs")
    check_output_dir(args.reports, "--reports")

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
