"""``star study --scale tiny``: every finding grid of the tiny study, then ``star report``.

Example::

    star study --scale tiny --dry-run          # the runs, and minutes per grid on 2 cores
    star study --scale tiny --commit           # run (resumably), committing each run's summary as it ends
    star study --scale tiny --only reward,noise --seeds 0,1,2
    star study --scale tiny --commit --jobs 4  # 8 cores: four of the study's 2-thread runs at once
    star study --config-of reward__sum_tiny__s0 > run.yaml && star run run.yaml --grid reward
    star study --only reward --rerun --runs /tmp/again   # rerun published runs from scratch, then:
    star study --only reward --runs /tmp/again --verify  # do they match the published ones exactly?
    star study --only algorithm --match '*_tiny_*' --dry-run          # one model size's block only

The grids are ``configs/study/<grid>.yaml`` in the order ``configs/study/study.yaml`` gives; runs go to
``<runs>/<grid>/<run>/`` with the stage cache in ``<runs>/_stages`` (a killed study continues where it
stopped: finished runs are skipped, finished stages reused). Each finished run's summary is written to
``reports/tiny-study/<finding>/<run>.parquet`` (no weights); ``--commit`` commits that one file. A run
already published is not run again, even with no runs folder or cache left (``published``), and a run of
the same config as a published one is published as its copy (``shared``); ``--rerun`` runs them all, e.g.
into an empty ``--runs`` folder to check the published study with ``--verify`` (it never overwrites a
published summary of the same config: to republish runs, e.g. one block rerun on one machine, ``git rm``
their summaries first, then ``--match`` them with ``--rerun --commit``).
"""

from __future__ import annotations

import argparse
import sys
from typing import Any

from star_lib.cli import positive_int


def register(subparsers: Any) -> None:
    """Add ``star study``."""
    parser = subparsers.add_parser(
        "study",
        help="the tiny study: every finding grid (resumable), one summary per run in reports/tiny-study",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--scale", default="tiny", choices=["tiny"], help="study scale (tiny only)")
    parser.add_argument(
        "--study", default=None, help="study file (default: configs/study/study.yaml of this checkout)"
    )
    parser.add_argument("--only", default="", help="comma-separated grids of the study, e.g. reward,noise")
    parser.add_argument(
        "--seeds", default=None, help="comma-separated seeds of every arm (default: the study's)"
    )
    parser.add_argument(
        "--match",
        default="",
        help="comma-separated glob patterns of run names: only those runs, e.g. '*_tiny_*' (default: all)",
    )
    parser.add_argument("--runs", default="runs", help="runs folder (default: runs)")
    parser.add_argument("--cache", default=None, help="stage cache (default: <runs>/_stages)")
    parser.add_argument(
        "--out", default=None, help="published summaries (default: reports/tiny-study of this checkout)"
    )
    parser.add_argument(
        "--dry-run", action="store_true", help="print the runs and minutes per grid; run nothing"
    )
    parser.add_argument(
        "--commit", action="store_true", help="git commit each finished run's summary file (that file only)"
    )
    parser.add_argument(
        "--rerun",
        action="store_true",
        help="run the runs already published too (into --runs; check them with --verify)",
    )
    parser.add_argument(
        "--in-process",
        action="store_true",
        help="run every run in this process (default: each run in its own process, so memory a run leaves "
        "behind, or an out-of-memory kill, stays with that run)",
    )
    parser.add_argument(
        "--jobs",
        type=positive_int,
        default=None,
        help="runs at once, each in its own process on its config's `threads` (default: the study's "
        "`jobs`, 1); refused when they would need more threads than cores",
    )
    parser.add_argument(
        "--eval-processes",
        type=positive_int,
        default=None,
        help="split each run's greedy evaluation over this many processes of threads/N torch threads "
        "(default: the study's `eval_processes`, 1); the episodes are the same, only faster on few cores",
    )
    parser.add_argument("--no-report", action="store_true", help="do not run `star report` at the end")
    parser.add_argument("--reports", default="reports", help="folder `star report` writes (default: reports)")
    parser.add_argument("--config-of", default=None, metavar="RUN", help="print one run's experiment YAML")
    parser.add_argument(
        "--verify",
        action="store_true",
        help="compare each finished run under --runs with its published summary (held-out and OOD metrics, "
        "per-query outcomes, RL curve; exactly); run nothing",
    )
    parser.set_defaults(func=run_study_command)


def run_study_command(args: argparse.Namespace) -> int:
    """Dry run, one run's config, or the study itself (then the report)."""
    from star_lib.cli.experiments import parse_seeds
    from star_lib.experiments.evalpool import check_processes
    from star_lib.experiments.study import (
        MIN_SEEDS,
        PROJECT_ROOT,
        PUBLISHED_DIR,
        STUDY_FILE,
        matching,
        read_study,
        verify_study,
    )

    study = read_study(args.study or STUDY_FILE)
    jobs = study.jobs if args.jobs is None else args.jobs
    asked = parse_seeds(args.seeds) if args.seeds is not None else None  # None: the study's, top-ups included
    seeds = asked if asked is not None else list(study.seeds)
    match = comma_list(args.match)
    grids = study.load_grids(comma_list(args.only), asked)
    chosen = matching(grids, match)  # refuses a pattern that matches no run, before anything runs
    if len(seeds) < MIN_SEEDS:
        print(
            f"note: {len(seeds)} seed(s) per arm; the study's intervals need >= {MIN_SEEDS}", file=sys.stderr
        )
    if args.config_of:
        return print_config_of(grids, args.config_of)
    out = args.out or str(PROJECT_ROOT / PUBLISHED_DIR)
    processes = check_processes(
        study.eval_processes if args.eval_processes is None else args.eval_processes, "--eval-processes"
    )
    if args.dry_run:
        return show_dry_run(study, chosen, out, jobs, processes, rerun=args.rerun)
    if args.verify:
        return show_reproductions(verify_study(chosen, args.runs, out), args.runs)
    from star_lib.paths import refuse_overlap

    outputs = {"--runs": args.runs, "--cache": args.cache, "--out": out, "--reports": args.reports}
    refuse_overlap({"--study": args.study or STUDY_FILE}, outputs)
    jobs = jobs_here(args, jobs, chosen)
    return run_and_report(args, grids, match, out, jobs, processes)


def comma_list(text: str) -> list[str]:
    """Return the non-empty, stripped items of a comma-separated option (``--only``, ``--match``)."""
    return [item.strip() for item in text.split(",") if item.strip()]


def print_config_of(grids: list[Any], run: str) -> int:
    """Print the experiment YAML of the run named ``run`` (``--config-of``).

    Raises:
        ValueError: no run of ``grids`` has that name.

    """
    import yaml

    for grid in grids:
        for config in grid.runs:
            if config.name == run:
                print(yaml.safe_dump(config.to_dict(), sort_keys=False), end="")
                return 0
    raise ValueError(f"--config-of {run}: no run of that name in {[g.name for g in grids]}")


def show_dry_run(study: Any, grids: list[Any], out: str, jobs: int, processes: int, *, rerun: bool) -> int:
    """Print each grid's runs and minutes (``--dry-run``) and, unless ``rerun``, what is left to run."""
    from star_lib.experiments.study import describe_estimates, estimate, publication_status

    estimates = estimate(grids, study.timing, eval_processes=processes)
    print(describe_estimates(estimates, study.grid_budget_minutes, jobs))
    if not rerun:
        status = publication_status(grids, out)
        print(describe_left(grids, study.timing, status, out, jobs, eval_processes=processes))
    return 0


def jobs_here(args: argparse.Namespace, jobs: int, grids: list[Any]) -> int:
    """Return how many runs run at once: the study's ``jobs`` falls back to 1 where it cannot run here.

    Raises:
        ValueError: ``--jobs`` > 1 with ``--in-process``.
        StudyError: ``--jobs`` would ask for more torch threads than this machine has cores.

    """
    from star_lib.experiments.study import check_jobs

    if args.jobs is None and jobs > 1 and (args.in_process or not fits(jobs, grids)):
        jobs = 1  # the study's default, where --in-process or this machine's cores rule it out
    if args.in_process and jobs > 1:
        raise ValueError(
            f"--jobs {jobs} runs each run in its own process; drop --in-process or pass --jobs 1"
        )
    check_jobs(jobs, grids)
    return jobs


def run_and_report(
    args: argparse.Namespace, grids: list[Any], match: list[str], out: str, jobs: int, processes: int
) -> int:
    """Run the study (printing each run as it ends), then ``star report``; 1 when a run failed."""
    from star_lib.experiments.evalpool import use_eval_processes
    from star_lib.experiments.study import run_study

    use_eval_processes(processes)
    results = run_study(
        grids,
        args.runs,
        out,
        cache=args.cache,
        commit=args.commit,
        rerun=args.rerun,
        isolate=not args.in_process,
        match=match,
        jobs=jobs,
        on_run=show_outcome,
    )
    failed = [r for r in results if r.status == "failed"]
    print(f"study: {len(results) - len(failed)} of {len(results)} runs finished; summaries in {out}")
    print(measured_minutes(out, [g.name for g in grids]))
    if not args.no_report:
        from star_lib.cli import main

        code = main(["report", "--scale", args.scale, "--results-dir", args.runs, "--out", args.reports])
        if code:
            return code
    return 1 if failed else 0


def show_outcome(outcome: Any) -> None:
    """Print one run of the study as it ends: its status, name, and error or ``committed``."""
    extra = f"  {outcome.error}" if outcome.error else ("  committed" if outcome.committed else "")
    print(f"{outcome.status:8s} {outcome.run}{extra}", flush=True)


def fits(jobs: int, grids: list[Any]) -> bool:
    """Whether ``jobs`` runs of ``grids`` fit this machine's cores side by side; if not, say so."""
    from star_lib.experiments.study import StudyError, check_jobs

    try:
        check_jobs(jobs, grids)
    except StudyError as exc:
        print(f"note: one run at a time: {exc}", file=sys.stderr)
        return False
    return True


def describe_left(
    grids: list[Any], timing: Any, status: dict[str, str], out: str, jobs: int = 1, *, eval_processes: int = 1
) -> str:
    """Return the dry run's last line: how many runs are published under ``out`` and what is left to run."""
    from star_lib.experiments.study import estimate

    total = sum(len(g.runs) for g in grids)
    if not status:
        return f"left to run: all {total} runs (none published in {out})"
    left = sum(e.seconds for e in estimate(grids, timing, skip=status, eval_processes=eval_processes))
    left = left / 3600 / jobs
    counts = {s: sum(v == s for v in status.values()) for s in ("published", "shared")}
    return (
        f"left to run: {total - len(status)} of {total} runs ({counts['published']} published in {out}, "
        f"{counts['shared']} copies of a published run of the same config); "
        f"{left:.1f} h estimated with an empty cache"
    )


def show_reproductions(checks: list[Any], runs: str) -> int:
    """Print each rerun's comparison with its published summary; 1 when any rerun differs."""
    rerun = [c for c in checks if c.status != "not rerun"]
    for check in rerun:
        print(f"{check.status:12s} {check.run}")
        if check.machines:
            published, rerun_on = check.machines
            print(f"    published on {published}, rerun on {rerun_on}: another CPU may round differently")
        for gap in check.gaps[:8]:
            print(f"    {gap}")
        if len(check.gaps) > 8:
            print(f"    ... and {len(check.gaps) - 8} more columns")
    counts = {s: sum(c.status == s for c in rerun) for s in ("reproduced", "differs", "other config")}
    said = ", ".join(f"{n} {s}" for s, n in counts.items() if n)
    head = f"verify: {len(rerun)} of {len(checks)} runs are finished under {runs} and published"
    print(head + (f": {said}" if said else ""))
    return 1 if counts["differs"] else 0


def measured_minutes(out: str, grids: list[str]) -> str:
    """Return the measured wall minutes per grid and in total, from the published summaries of ``grids``.

    A grid's wall time is the time at least one of its runs was running (the union of each run's
    ``[finished - wall_s, finished]``): the sum of its runs' ``wall_s`` when they ran one after another, less
    when ``--jobs`` ran them side by side. Copies (``wall_s`` 0) add nothing.
    """
    import polars as pl

    from star_lib.experiments.results import load_study

    table = load_study(out)
    if not table.height:
        return "measured: no published runs yet"
    table = table.filter(pl.col("grid").is_in(grids))
    order = {name: i for i, name in enumerate(grids)}
    parts, spans = [], []
    for (grid,), rows in sorted(table.group_by("grid"), key=lambda g: order.get(g[0][0], len(order))):
        grid_spans = [(f - w, f) for w, f in rows.select("wall_s", "finished").iter_rows() if w and f]
        parts.append(f"{grid} {busy_seconds(grid_spans) / 60:.1f} min ({rows.height} runs)")
        spans += grid_spans
    return f"measured wall time: {'; '.join(parts)}; total {busy_seconds(spans) / 3600:.2f} h"


def busy_seconds(spans: list[tuple[float, float]]) -> float:
    """Return the length of the union of the ``(start, end)`` intervals ``spans``."""
    total, reach = 0.0, float("-inf")
    for start, end in sorted(spans):
        if end > reach:
            total += end - max(start, reach)
            reach = end
    return total
