"""``star run CONFIG``, ``star run-grid GRID``, ``star submit GRID --cluster PROFILE``, ``star status``."""

from __future__ import annotations

import argparse
from pathlib import Path


def register(sub: argparse._SubParsersAction) -> None:
    """Add the experiment commands to the ``star`` parser."""
    run = sub.add_parser("run", help="run one experiment config locally (finished stages are reused)")
    run.add_argument("config", help="experiment YAML (see star_lib.experiments.config)")
    run.add_argument("--runs", default="runs", help="runs folder (default: runs)")
    run.add_argument("--grid", default="adhoc", help="grid folder to file the run under (default: adhoc)")
    run.add_argument("--cache", default=None, help="stage cache (default: <runs>/_stages)")
    run.add_argument("--force", action="store_true", help="rerun even when the run is already complete")
    run.set_defaults(func=_run)

    run_grid = sub.add_parser("run-grid", help="run every run of a grid locally, one after another")
    _grid_arguments(run_grid)
    run_grid.set_defaults(func=_run_grid)

    submit = sub.add_parser("submit", help="submit a grid as a job array through submitit (Slurm or local)")
    _grid_arguments(submit)
    submit.add_argument("--cluster", required=True, help="cluster profile YAML, e.g. slurm/a100-8gpu.yaml")
    submit.add_argument("--wait", action="store_true", help="wait for the jobs and print the final status")
    submit.set_defaults(func=_submit)

    status = sub.add_parser("status", help="pending / running / done / failed for every run of a grid")
    status.add_argument("grid", help="grid name (folder under --runs) or a grid folder")
    status.add_argument("--runs", default="runs", help="runs folder (default: runs)")
    status.add_argument("--json", action="store_true", help="print JSON lines instead of a table")
    status.set_defaults(func=_status)


def _grid_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "grid",
        help="grid YAML, or a finding name: reward|scale|data|difficulty|algorithm|noise"
        " with -tiny / -paper (e.g. noise-paper)",
    )
    parser.add_argument("--runs", default="runs", help="runs folder (default: runs)")
    parser.add_argument("--cache", default=None, help="stage cache (default: <runs>/_stages)")
    parser.add_argument("--seeds", default=None, help="comma-separated seeds (overrides the grid's)")
    parser.add_argument(
        "--stages", default=None, help="comma-separated stages for every run, e.g. world,synth,teacher,eval"
    )


def parse_seeds(text: str, option: str = "--seeds") -> list[int]:
    """Parse a comma-separated list of integer seeds (``0,1,2``).

    Raises:
        ValueError: naming ``option`` and the item that is no integer (or an empty list).

    """
    items = [item.strip() for item in text.split(",")]
    seeds = []
    for item in items:
        try:
            seeds.append(int(item))
        except ValueError:
            raise ValueError(
                f"{option} {text!r}: {item!r} is not an integer seed; give comma-separated integers (0,1,2)"
            ) from None
    if len(set(seeds)) != len(seeds):
        raise ValueError(f"{option} {text!r} repeats a seed; give each seed once")
    return seeds


def _load_grid(args: argparse.Namespace):
    from star_lib.experiments.grids import load_grid

    seeds = parse_seeds(args.seeds) if args.seeds is not None else None
    grid = load_grid(args.grid, seeds=seeds)
    if args.stages:
        grid = grid.with_stages([s.strip() for s in args.stages.split(",") if s.strip()])
    return grid


def _run(args: argparse.Namespace) -> int:
    from star_lib.experiments.pipeline import load_config
    from star_lib.experiments.runner import run_experiment

    config = load_config(args.config)
    run_dir = Path(args.runs) / args.grid / config.name
    result = run_experiment(config, run_dir, cache=args.cache, force=args.force, grid=args.grid)
    reused = sum(1 for s in result.stages if s["reused"])
    print(
        f"{result.status}: {run_dir} ({len(result.stages)} stages, {reused} reused, {result.wall_s:.1f} s, "
        f"{result.gpu_hours:.3f} GPU-h)"
    )
    return 0


def _run_grid(args: argparse.Namespace) -> int:
    from star_lib.experiments.runner import run_grid_local

    grid = _load_grid(args)
    results = run_grid_local(grid, args.runs, cache=args.cache)
    for result in results:
        line = f"{result.status:8s} {result.name}"
        print(line + (f"  {result.error}" if result.error else ""))
    return 0 if all(r.status != "failed" for r in results) else 1


def _submit(args: argparse.Namespace) -> int:
    from star_lib.experiments.profiles import load_profile
    from star_lib.experiments.runner import grid_dir, submit_grid

    profile = load_profile(args.cluster)  # a bad profile is refused before anything is written or submitted
    grid = _load_grid(args)
    jobs = submit_grid(grid, profile, args.runs, cache=args.cache)
    print(f"{grid.name}: {len(jobs)} of {len(grid)} runs submitted ({profile.describe()})")
    for job in jobs:
        print(f"  job {job.job_id}")
    if args.wait and jobs:
        for job in jobs:
            try:
                job.result()
            except Exception as exc:  # a failed run shows in the status table below
                print(
                    f"  job {job.job_id} failed: {str(exc).strip().splitlines()[-1] if str(exc) else exc!r}"
                )
        args.grid = str(grid_dir(args.runs, grid))
        return _status(args)
    return 0


def _status(args: argparse.Namespace) -> int:
    import json

    from rich.console import Console

    from star_lib.experiments.status import grid_status, render_status

    folder = Path(args.grid)
    if not (folder / "grid.yaml").is_file() and not folder.is_dir():
        folder = Path(args.runs) / args.grid
    statuses = grid_status(folder)
    if getattr(args, "json", False):
        for status in statuses:
            print(json.dumps(status.__dict__))
    else:
        Console(width=200).print(render_status(statuses, title=f"star status {folder.name}"))
    return 1 if any(s.state == "failed" for s in statuses) else 0
