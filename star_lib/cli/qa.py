r"""``star qa-eval``: run an agent as a search agent on the seven OOD QA sets (the paper's Table 2).

Example::

    star qa-eval --model baseline --datasets nq,hotpotqa --data-dir ../shared/data/qa/deepresearcher_test \
        --corpus ../shared/data/qa/corpus/flashrag_wiki_sample_1000.jsonl --limit 50 --seed 0 \
        --out runs/qa/baseline/qa.parquet

``--model`` is ``baseline`` (the programmatic search-and-extract agent) or a checkpoint folder run with
``--backend transformers`` (default) or ``vllm``, or a served model name with ``--backend openai
--base-url …``. The BM25 index of ``--corpus`` is built on first use (in ``$STAR_CACHE_DIR`` when it is
set, else beside the corpus, or in ``~/.cache/star_lib`` when that folder is read-only). Writes the
per-question table to ``--out`` and the long summary (``dataset, metric, value``) beside it as
``<stem>_summary.parquet``.

With ``--backend openai`` the key comes from ``$OPENAI_API_KEY`` (never printed; a local endpoint needs
none). One request probes the endpoint first: one that cannot be reached, refuses the key or has no such
model is refused in one line naming it (exit 2); and when every episode's request failed, nothing is
written (exit 2), so a dead endpoint never reads as a 0 % score.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any

from star_lib.cli import device, non_negative_float, positive_int


def register(subparsers: Any) -> None:
    """Add ``star qa-eval``."""
    parser = subparsers.add_parser(
        "qa-eval",
        help="evaluate an agent as a search agent on the seven OOD QA sets (NQ … Bamboogle)",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument(
        "--model", required=True, help="'baseline' or a checkpoint folder / served model name"
    )
    parser.add_argument("--backend", choices=("transformers", "vllm", "openai"), default="transformers")
    parser.add_argument(
        "--base-url",
        default=None,
        help="OpenAI-compatible endpoint root (--backend openai; default $OPENAI_BASE_URL), probed first",
    )
    parser.add_argument("--device", type=device, default=None, help="torch device for --backend transformers")
    parser.add_argument(
        "--temperature", type=non_negative_float, default=0.0, help="sampling temperature (0 = greedy)"
    )
    parser.add_argument("--datasets", default="all", help="comma-separated sets, or 'all' (default)")
    parser.add_argument(
        "--data-dir", required=True, type=Path, help="folder with <set>.jsonl files (or one file)"
    )
    parser.add_argument("--corpus", required=True, type=Path, help="passage corpus (wiki-18 JSONL or TSV)")
    parser.add_argument("--limit", type=positive_int, default=None, help="questions per set (seeded sample)")
    parser.add_argument("--seed", type=int, default=0, help="seed of the --limit sample")
    parser.add_argument(
        "--out", type=Path, default=None, help="results parquet (default runs/qa/<model>/qa.parquet)"
    )
    parser.add_argument("--top-k", type=positive_int, default=3, help="passages per Search call")
    parser.add_argument("--max-turns", type=positive_int, default=6, help="assistant turns per episode")
    parser.add_argument("--max-new-tokens", type=positive_int, default=512, help="tokens per assistant turn")
    parser.add_argument(
        "--max-context-tokens", type=positive_int, default=8192, help="context budget per episode"
    )
    parser.add_argument("--batch-size", type=positive_int, default=64, help="episodes in lockstep")
    parser.add_argument("--retriever", choices=("bm25", "dense"), default="bm25")
    parser.add_argument(
        "--dense-model", default=None, help="local sentence-transformers model (--retriever dense)"
    )
    parser.add_argument(
        "--index-dir", type=Path, default=None, help="where the index lives (default: see above)"
    )
    parser.add_argument("--json", action="store_true", help="also print the summary as one JSON line")
    parser.add_argument("--quiet", action="store_true", help="no progress bar")
    parser.set_defaults(func=run_qa_eval)


def _default_out(model: str) -> Path:
    name = "baseline" if model == "baseline" else Path(model.rstrip("/")).name or "model"
    return Path("runs") / "qa" / name / "qa.parquet"


def run_qa_eval(args: argparse.Namespace) -> int:
    """Run ``star qa-eval``; return the exit code."""
    from star_lib.qa.datasets import parse_dataset_list
    from star_lib.qa.evaluate import QAEvalConfig, summary_path

    cfg = QAEvalConfig(
        datasets=parse_dataset_list(args.datasets),
        limit=args.limit,
        seed=args.seed,
        top_k=args.top_k,
        max_turns=args.max_turns,
        max_new_tokens=args.max_new_tokens,
        max_context_tokens=args.max_context_tokens,
        batch_size=args.batch_size,
    )
    from star_lib.io import check_output_file, lock_output
    from star_lib.paths import refuse_overlap

    out = args.out or _default_out(args.model)
    if out.suffix != ".parquet":
        raise ValueError(f"--out must name a .parquet file, got {out}")
    for option, path, kind in (
        ("--corpus", args.corpus, "corpus file"),
        ("--data-dir", args.data_dir, "QA data"),
    ):
        if not path.exists():
            raise FileNotFoundError(f"{option} {path}: {kind} not found")
    check_output_file(out)  # before any work: a bad --out must not cost the whole evaluation
    check_output_file(summary_path(out), "--out (its summary file)")
    inputs = {"--data-dir": args.data_dir, "--corpus": args.corpus, "--model": args.model}
    inputs["--dense-model"] = args.dense_model
    refuse_overlap(inputs, {"--out": out, "--out (its summary file)": summary_path(out)})
    _check_runs_here(args)
    with lock_output(out):
        return _run(args, cfg, out)


def _check_runs_here(args: argparse.Namespace) -> None:
    """Refuse, before any output, what cannot run here: a package not installed, a model or device not here.

    Sets ``args.device`` (``--backend transformers``) to the checked device.
    """
    import importlib.util

    from star_lib.cli import check_device, check_model

    if args.backend == "vllm" and importlib.util.find_spec("vllm") is None:
        raise ValueError(
            "--backend vllm needs vLLM, which is not installed here: pip install 'star-lab[gpu]' on a "
            "CUDA machine, or use --backend transformers"
        )
    if args.model != "baseline" and args.backend != "openai":  # openai: a served name, not a folder
        check_model(args.model)
    if args.backend == "transformers" and args.model != "baseline":
        args.device = check_device(args.device)
    if args.retriever == "dense" and importlib.util.find_spec("sentence_transformers") is None:
        raise ValueError(
            "--retriever dense needs sentence-transformers, which is not installed here: "
            "pip install sentence-transformers, or use --retriever bm25"
        )
    if args.retriever == "dense" and not args.dense_model:
        raise ValueError("--retriever dense needs --dense-model PATH (a local sentence-transformers model)")


def _run(args: argparse.Namespace, cfg: Any, out: Path) -> int:
    from star_lib.qa.evaluate import check_endpoint, evaluate_qa, make_policy, summary_path, summary_table

    policy = make_policy(
        args.model,
        backend=args.backend,
        temperature=args.temperature,
        device=args.device,
        base_url=args.base_url,
    )
    check_endpoint(policy)  # --backend openai: a dead endpoint is refused now, not scored as 0 %
    _, summary = evaluate_qa(
        policy,
        args.data_dir,
        args.corpus,
        cfg,
        out=out,
        retriever=args.retriever,
        dense_model=args.dense_model,
        index_dir=args.index_dir,
        model=args.model,
        progress=not args.quiet,
    )
    _print_table(summary_table(summary), args.model)
    print(f"wrote {out} and {summary_path(out)}")
    if args.json:
        print(json.dumps({f"{d}/{m}": v for d, m, v in summary.iter_rows()}, sort_keys=True))
    return 0


def _print_table(wide: Any, model: str) -> None:
    """Print the per-set summary with rich (scores in %)."""
    from rich.console import Console
    from rich.table import Table

    table = Table(title=f"OOD QA — {model}")
    for column in ("dataset", "n", "EM", "F1", "cover-EM", "answered", "turns", "searches"):
        table.add_column(column, justify="left" if column == "dataset" else "right")
    for row in wide.iter_rows(named=True):
        table.add_row(
            row["dataset"],
            f"{int(row['n'])}",
            *(f"{100 * row[m]:.1f}" for m in ("em", "f1", "cover_em", "answered")),
            f"{row['turns']:.2f}",
            f"{row['search_calls']:.2f}",
            end_section=row["dataset"] == wide["dataset"][-2] if wide.height > 1 else False,
        )
    Console().print(table)
