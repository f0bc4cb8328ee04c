"""``star synth``: synthesise feasible TravelPlanner tasks (STAR stage 1) into train/val/test files.

``--realiser llm`` back-translates through the OpenAI-compatible endpoint named by ``$STAR_LLM_BASE_URL``
(model ``$STAR_LLM_MODEL``, key ``$STAR_LLM_API_KEY``, never printed). One request probes it first: an
endpoint that cannot be reached (or refuses the key, or has no such model) is refused in one line naming
it, exit 2, before any work. A query whose LLM answers fail or are refused by the checker gets the
template text; how many did is printed on stderr, and when every query did, nothing is written (exit 2).
"""

from __future__ import annotations

import argparse
import sys
from typing import Any

from star_lib.cli import cores


def register(sub: Any) -> None:
    """Add the ``synth`` subcommand."""
    p = sub.add_parser(
        "synth",
        help="synthesise feasible tasks with reference plans (STAR stage 1)",
        description=(
            "Sample easy/medium/hard TravelPlanner records, prove each feasible with a constructive plan "
            "that passes the strict evaluator, back-translate to a natural query, and write "
            "train/val/test JSONL + parquet and stats.json."
        ),
    )
    p.add_argument("--world", required=True, help="database folder, or synthetic:<tiny|small|full>:<seed>")
    p.add_argument("--n", type=int, default=1000, help="records in all splits together (default 1000)")
    p.add_argument("--mix", default="4:3:3", help="easy:medium:hard weights, or easy|medium|hard|mixed")
    p.add_argument(
        "--mixture",
        default=None,
        help="named mixture <composition>-<size>, e.g. mixed-2000 (overrides --n/--mix)",
    )
    p.add_argument("--seed", type=int, default=0, help="base seed (default 0)")
    p.add_argument("--out", default="data/queries", help="output folder (default data/queries)")
    p.add_argument(
        "--workers",
        type=cores,
        default=1,
        help="processes, at most the cores; output is identical for any value",
    )
    p.add_argument(
        "--realiser",
        choices=("template", "llm"),
        default="template",
        help="back-translation; llm: the endpoint $STAR_LLM_BASE_URL serving $STAR_LLM_MODEL (key "
        "$STAR_LLM_API_KEY), probed first; exit 2 when it cannot serve or every query fell back",
    )
    p.add_argument("--tie-break", choices=("cheapest", "best-rated", "random"), default="cheapest")
    p.add_argument("--no-parquet", action="store_true", help="write JSONL only")
    p.add_argument("--no-progress", action="store_true", help="hide the progress bar")
    p.set_defaults(func=run_synth)


def run_synth(args: argparse.Namespace) -> int:
    """Synthesise, write the dataset, print a summary table; return the exit code."""
    from star_lib.io import check_output_dir, lock_output
    from star_lib.paths import refuse_overlap
    from star_lib.synth import SynthConfig, load_world, mixture, synthesize, write_dataset
    from star_lib.synth.config import MAX_RECORDS

    refuse_overlap({"--world": args.world}, {"--out": args.out})
    n, mix = mixture(args.mixture) if args.mixture else (args.n, args.mix)
    if not 1 <= n <= MAX_RECORDS:
        raise ValueError(f"--n must be from 1 to {MAX_RECORDS:,} records, got {n:,}")
    cfg = SynthConfig(
        n=n, mix=mix, seed=args.seed, workers=args.workers, realiser=args.realiser, tie_break=args.tie_break
    )
    llm = _checked_llm() if args.realiser == "llm" else None
    out = check_output_dir(args.out)
    with lock_output(out):  # a second run into the same folder is refused now, not after its work
        world = load_world(args.world)
        result = synthesize(world, cfg, llm=llm, progress=not args.no_progress, world_spec=args.world)
        if llm is not None:
            _report_fallback(result.stats.get("realiser") or {}, llm)
        paths = write_dataset(result, out, parquet=not args.no_parquet)
    _print_summary(result.stats, paths)
    return 0


def _checked_llm() -> Any:
    """Read the LLM realiser's endpoint from the environment, probe it once, refuse it if it cannot serve."""
    from star_lib.synth.realise import EndpointError, LLMConfig, probe_endpoint

    llm = LLMConfig()
    error = probe_endpoint(llm.base_url, str(llm.model), llm.api_key, timeout_s=llm.timeout_s)
    if error is not None:
        raise EndpointError(
            f"--realiser llm: the LLM endpoint {llm.base_url} cannot serve {llm.model!r}: {error} "
            "(set STAR_LLM_BASE_URL / STAR_LLM_MODEL, or use --realiser template); nothing written"
        )
    return llm


def _report_fallback(counts: dict[str, int], llm: Any) -> None:
    """Print how many queries fell back to the template realiser; refuse the run when every one did."""
    from star_lib.synth.realise import EndpointError, probe_endpoint

    fallback, total = counts.get("fallback", 0), sum(counts.values())
    if not fallback:
        return
    error = probe_endpoint(llm.base_url, str(llm.model), llm.api_key, timeout_s=llm.timeout_s)
    why = error or (
        f"the request failed or the checker refused the answer, {llm.max_attempts} times per query"
    )
    line = f"{fallback} of {total} queries fell back to the template realiser: {llm.base_url}: {why}"
    if fallback == total:
        raise EndpointError(f"--realiser llm: {line}; nothing written (or use --realiser template)")
    print(f"star synth: warning: {line}", file=sys.stderr)


def _print_summary(stats: dict[str, Any], paths: dict[str, Any]) -> None:
    from rich.console import Console
    from rich.table import Table

    table = Table(
        title=f"star synth: {stats['n_records']} records, acceptance {stats['acceptance_rate']:.1%}"
    )
    table.add_column("what")
    table.add_column("counts")
    for key in (
        "splits",
        "levels",
        "days",
        "constraint_types",
        "transport",
        "rejections",
        "relaxations",
        "realiser",
    ):
        value = stats.get(key) or {}
        table.add_row(key, ", ".join(f"{k}: {v}" for k, v in value.items()) or "-")
    console = Console()
    console.print(table)
    folders = sorted({str(p.parent) for p in paths.values()})
    console.print(
        f"wrote {', '.join(p.name for p in paths.values())} to {', '.join(folders)}", soft_wrap=True
    )
