"""A finished run's evaluation in one process against split over one-thread processes (``--processes``).

Workload: the eval stage of a finished run (its held-out split, its OOD split when it has one, the
expert's turn-budget check), recomputed from the run's cached inputs into temporary folders — first in one
process with the run's ``threads`` torch threads, then split over ``--processes`` one-thread processes,
alternating for ``--repeats`` rounds. Each line gives the wall time; the last line the median seconds of each
way and their ratio (``speedup`` > 1: the split is faster), and whether every recomputed ``eval.parquet``,
``ood.parquet`` and ``metrics.parquet`` equals the run's own, column for column (``identical``).

Usage: ``python benchmarks/bench_eval_processes.py RUN_DIR [--processes 2] [--repeats 2]``, where
``RUN_DIR`` is a run folder (``runs/<grid>/<run>``) whose stage cache still holds its stages, e.g. after
``star study --config-of algorithm__grpo_tiny__s1 > r.yaml && star run r.yaml --grid algorithm``.
Last line: ``{"one_process_s": …, "split_s": …, "speedup": …, "identical": true}``.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from star_lib.experiments.evalpool import ENV_VAR  # noqa: E402
from star_lib.experiments.runner import input_paths, read_run_record, torch_threads  # noqa: E402
from star_lib.experiments.stages import build_registry, load_config  # noqa: E402
from star_lib.experiments.stages.eval import run_eval  # noqa: E402

OUTPUTS = ("eval.parquet", "ood.parquet", "metrics.parquet")


def eval_stage(run_dir: Path) -> tuple[object, dict[str, Path], Path, int]:
    """Return the run's eval config, its inputs in the cache, the cached eval folder and the run's threads."""
    record = read_run_record(run_dir)
    if not record or record.get("status") != "done":
        raise SystemExit(f"{run_dir}: not a finished run (no run.json with status done)")
    config = load_config(run_dir / "config.yaml")
    cache = Path(record["cache"])
    keys = {s["stage"]: s["key"] for s in record["stages"]}
    folders = {stage: cache / stage / key for stage, key in keys.items()}
    missing = [str(f) for f in folders.values() if not f.is_dir()]
    if missing:
        raise SystemExit(f"{run_dir}: its stage cache no longer holds {missing}")
    stage = build_registry().get("eval")
    resolved = stage.resolve_config(config)
    inputs = input_paths(stage, config.stages, folders, resolved)
    return resolved, inputs, folders["eval"], config.threads or (os.cpu_count() or 1)


def same_outputs(a: Path, b: Path) -> bool:
    """Whether two eval folders hold equal tables (those of :data:`OUTPUTS` that the first one has)."""
    import polars as pl

    names = [n for n in OUTPUTS if (a / n).is_file()]
    return all((b / n).is_file() and pl.read_parquet(a / n).equals(pl.read_parquet(b / n)) for n in names)


def timed_eval(cfg: object, inputs: dict[str, Path], threads: int, processes: int, reference: Path) -> tuple:
    """Run the eval stage once into a temporary folder: (seconds, processes used, equal to reference)."""
    os.environ[ENV_VAR] = str(processes)
    with tempfile.TemporaryDirectory() as tmp, torch_threads(threads):
        start = time.perf_counter()
        info = run_eval(cfg, inputs, Path(tmp))
        seconds = time.perf_counter() - start
        return seconds, info.get("processes", 1), same_outputs(reference, Path(tmp))


def main() -> None:
    """Run the benchmark and print the JSON line."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("run_dir", type=Path, help="a finished run folder, runs/<grid>/<run>")
    parser.add_argument("--processes", type=int, default=2, help="processes of the split evaluation")
    parser.add_argument("--repeats", type=int, default=2, help="rounds of (one process, split)")
    args = parser.parse_args()
    if args.processes < 2 or args.repeats < 1:
        parser.error("--processes must be >= 2 and --repeats >= 1")
    cfg, inputs, reference, threads = eval_stage(args.run_dir)
    times: dict[str, list[float]] = {"one": [], "split": []}
    identical = True
    for round_ in range(args.repeats):
        for way, processes in (("one", 1), ("split", args.processes)):
            seconds, used, same = timed_eval(cfg, inputs, threads, processes, reference)
            identical &= same
            times[way].append(seconds)
            print(f"round {round_ + 1}  {way:5s} {used} process(es), {threads} threads: {seconds:6.1f} s  "
                  f"{'identical' if same else 'DIFFERS from the run'}", flush=True)  # fmt: skip
    one, split = statistics.median(times["one"]), statistics.median(times["split"])
    print(json.dumps({"one_process_s": round(one, 1), "split_s": round(split, 1),
                      "speedup": round(one / split, 2), "identical": identical}))  # fmt: skip


if __name__ == "__main__":
    main()
