"""``star run CONFIG``, ``star run-grid GRID``, ``star submit GRID --cluster PROFILE``, ``star status``."""

from __future__ import annotations

import argparse
from pathlib import Path

from star_lib.experiments.evalpool import ENV_VAR


def register(sub: argparse._SubParsersAction) -> None:
    """Add the experiment commands to the ``star`` parser."""
    run = sub.add_parser("run", help="run one experiment config locally (finished stages are reused)")
    run.add_argument("config", help="experiment YAML (see star_lib.experiments.config)")
    run.add_argument("--runs", default="runs", help="runs folder (default: runs)")
    run.add_argument("--grid", default="adhoc", help="grid folder to file the run under (default: adhoc)")
    run.add_argument("--cache", default=None, help="stage cache (default: <runs>/_stages)")
    run.add_argument("--force", action="store_true", help="rerun even when the run is already complete")
    run.add_argument(
        "--publish",
        default=None,
        metavar="DIR",
        help="then copy the run's held-out results (no weights) to DIR/<grid>/<run>/, e.g. reports/real-tiny",
    )
    run.add_argument(
        "--eval-processes",
        type=int,
        default=None,
        help="split a greedy evaluation on the fast CPU sampler over this many processes of threads/N "
        f"torch threads (the same episodes; default: ${'{'}{ENV_VAR}{'}'} or 1)",
    )
    run.set_defaults(func=_run)

    run_grid = sub.add_parser(
        "run-grid",
        help="run every run of a grid locally, one after another, with a live table of their progress",
    )
    _grid_arguments(run_grid)
    run_grid.set_defaults(func=_run_grid)

    submit = sub.add_parser("submit", help="submit a grid as a job array through submitit (Slurm or local)")
    _grid_arguments(submit)
    submit.add_argument("--cluster", required=True, help="cluster profile YAML, e.g. slurm/a100-8gpu.yaml")
    submit.add_argument("--wait", action="store_true", help="wait for the jobs and print the final status")
    submit.add_argument(
        "--rehearse",
        nargs="?",
        const="tiny-s",
        default=None,
        metavar="PRESET",
        help="rehearse the grid on CPU: every model swapped for a tiny preset (default tiny-s), no vLLM, "
        "rehearsal budgets (grids.REHEARSAL); use a CPU profile with processes_per_node, e.g. "
        "slurm/rehearsal-cpu.yaml",
    )
    submit.set_defaults(func=_submit)

    status = sub.add_parser(
        "status",
        help="pending / running / done / failed for every run of a grid, with the running stage and its step",
    )
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
    import sys

    from star_lib.experiments.grids import load_grid

    seeds = parse_seeds(args.seeds) if args.seeds is not None else None
    grid = load_grid(args.grid, seeds=seeds)
    if args.stages:
        grid = grid.with_stages([s.strip() for s in args.stages.split(",") if s.strip()])
    note = missing_finding_note(grid, args.grid)
    if note:
        print(note, file=sys.stderr)
    return grid


def missing_finding_note(grid, spec: str) -> str | None:
    """Return the note for a YAML grid without ``finding:`` (no finding notebook reads its runs), or None."""
    from star_lib.experiments.grids import FINDINGS

    if grid.finding is not None:
        return None
    return (
        f"note: {spec} has no `finding:` key, so no finding notebook or `star report` reads the runs of "
        f"grid {grid.name} (they would say 'No finished runs'); add `finding: <one of "
        f"{[*FINDINGS, 'interactions']}>` to compare them with the paper; "
        f"`star status {grid.name}` lists them."
    )


def _run(args: argparse.Namespace) -> int:
    from star_lib.experiments.config import FOLDER_NAME, NAME_RULE, config_path
    from star_lib.experiments.evalpool import use_eval_processes
    from star_lib.experiments.runner import run_experiment
    from star_lib.experiments.stages import load_config
    from star_lib.paths import refuse_overlap

    if not FOLDER_NAME.fullmatch(args.grid):  # a path (../x) would put the run outside --runs
        raise ValueError(f"--grid {args.grid!r} is not a grid name (a folder under --runs); {NAME_RULE}")
    config = load_config(args.config)
    if args.eval_processes is not None:
        use_eval_processes(args.eval_processes)
    run_dir = Path(args.runs) / args.grid / config.name
    published = Path(args.publish) / args.grid / config.name if args.publish else None
    outputs = {"--runs (the run folder)": run_dir, "--cache": args.cache, "--publish": published}
    refuse_overlap({"CONFIG": config_path(args.config)}, outputs)
    result = run_experiment(config, run_dir, cache=args.cache, force=args.force, grid=args.grid)
    reused = sum(1 for s in result.stages if s["reused"])
    print(
        f"{result.status}: {run_dir} ({len(result.stages)} stages, {reused} reused, {result.wall_s:.1f} s, "
        f"{result.gpu_hours:.3f} GPU-h)"
    )
    if args.publish:
        from star_lib.experiments.real import publish_run

        print(f"published: {publish_run(run_dir, args.publish)}")
    return 0


def _run_grid(args: argparse.Namespace) -> int:
    from star_lib.experiments.runner import grid_dir, run_grid_local

    grid = _load_grid(args)
    _refuse_grid_overlap(args, grid)
    with GridProgress(grid_dir(args.runs, grid), f"star run-grid {grid.name}"):
        results = run_grid_local(grid, args.runs, cache=args.cache)
    for result in results:
        line = f"{result.status:8s} {result.name}"
        print(line + (f"  {result.error}" if result.error else ""))
    return 0 if all(r.status != "failed" for r in results) else 1


def _refuse_grid_overlap(args: argparse.Namespace, grid, inputs: dict[str, str] | None = None) -> None:
    """Refuse a grid folder or ``--cache`` that is, holds or lies inside the GRID file (or another input)."""
    from star_lib.experiments.runner import grid_dir
    from star_lib.paths import refuse_overlap

    outputs = {"--runs (the grid folder)": grid_dir(args.runs, grid), "--cache": args.cache}
    refuse_overlap({"GRID": args.grid, **(inputs or {})}, outputs)


class GridProgress:
    """While a grid runs here: a live table (stderr) of each run's state, stage, step / total, reward, ETA.

    On a terminal the table redraws every second (rich ``Live``); elsewhere (a log file, CI) each change of
    a run's state, stage or step is printed as one line, at most every ``interval_s`` seconds. The final
    table is printed in both cases.
    """

    def __init__(self, folder: Path, title: str, interval_s: float = 2.0, console: object = None) -> None:
        from rich.console import Console

        self.folder, self.title, self.interval_s = Path(folder), title, interval_s
        self.console = console or Console(stderr=True, width=200)
        self._live: object = None
        self._stop = None
        self._thread = None
        self._seen: dict[str, tuple] = {}

    def statuses(self) -> list:
        """Return the grid's run statuses now (empty before the manifest exists)."""
        from star_lib.experiments.status import grid_status

        try:
            return grid_status(self.folder, sacct=lambda ids: {})
        except (FileNotFoundError, ValueError):
            return []

    def table(self) -> object:
        """Return the status table of the grid now."""
        from star_lib.experiments.status import render_status

        return render_status(self.statuses(), title=self.title)

    def lines(self) -> list[str]:
        """One line per run whose state, stage or step changed since the last call."""
        from star_lib.experiments.status import format_eta, format_step

        out = []
        for s in self.statuses():
            key = (s.state, s.stage, s.step)
            if self._seen.get(s.run) != key:
                self._seen[s.run] = key
                reward = f" reward {s.reward:.3f}" if s.reward is not None else ""
                eta = f" ETA {format_eta(s.eta_s)}" if s.eta_s is not None else ""
                step = f" step {format_step(s)}" if s.step is not None else ""
                out.append(f"{s.run}: {s.state} {s.stage or ''}{step}{reward}{eta}".rstrip())
        return out

    def __enter__(self) -> GridProgress:
        import threading

        if self.console.is_terminal:
            from rich.live import Live

            self._live = Live(get_renderable=self.table, console=self.console, refresh_per_second=1)
            self._live.start()
            return self
        self._stop = threading.Event()

        def poll() -> None:
            while not self._stop.wait(self.interval_s):
                for line in self.lines():
                    self.console.print(line, soft_wrap=True, highlight=False)

        self._thread = threading.Thread(target=poll, name="star-grid-progress", daemon=True)
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        if self._live is not None:
            self._live.stop()  # leaves the final table on screen
            return
        self._stop.set()
        self._thread.join()
        self.console.print(self.table())


def _submit(args: argparse.Namespace) -> int:
    from star_lib.experiments.profiles import load_profile
    from star_lib.experiments.runner import grid_dir, submit_grid

    profile = load_profile(args.cluster)  # a bad profile is refused before anything is written or submitted
    grid = _load_grid(args)
    if args.rehearse is not None:
        from star_lib.experiments.grids import rehearsal

        grid = rehearsal(grid, args.rehearse)
    _refuse_grid_overlap(args, grid, {"--cluster": args.cluster})
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
