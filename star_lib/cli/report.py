"""``star report`` (execute the notebooks into ``reports/``) and ``star lab`` (JupyterLab, project kernel)."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

KERNEL_NAME = "star-lab"
"""Name of the Jupyter kernel ``star lab`` registers (in this environment's prefix)."""


def register(sub: argparse._SubParsersAction) -> None:
    """Add ``star report`` and ``star lab`` to the ``star`` parser."""
    report = sub.add_parser(
        "report",
        help="execute the notebooks with papermill into reports/ (ipynb, offline HTML, figures, index)",
    )
    report.add_argument(
        "--scale", default="tiny", choices=["tiny", "paper"], help="grid scale (default: tiny)"
    )
    report.add_argument("--only", default="", help="comma-separated notebook numbers or names, e.g. 01,04")
    report.add_argument(
        "--results-dir", default="runs", help="runs folder the notebooks read (default: runs)"
    )
    report.add_argument("--out", default="reports", help="output folder (default: reports)")
    report.add_argument("--notebooks", default="notebooks", help="notebook folder (default: notebooks)")
    report.add_argument(
        "--launch",
        default="none",
        choices=["none", "local", "slurm"],
        help="what notebooks do about missing runs (default: none = report what exists)",
    )
    report.add_argument("--kernel", default="python3", help="Jupyter kernel (default: python3 = this Python)")
    report.add_argument("--no-progress", action="store_true", help="no progress bar")
    report.add_argument(
        "--no-notebooks",
        action="store_true",
        help="write HTML pages, figures and the index only, not the executed .ipynb (pages kept in git)",
    )
    report.set_defaults(func=_report)

    lab = sub.add_parser(
        "lab", help="register the star-lab Jupyter kernel and start JupyterLab in notebooks/"
    )
    lab.add_argument("--register-only", action="store_true", help="only register the kernel")
    lab.add_argument("--no-browser", action="store_true", help="do not open a browser")
    lab.add_argument("--port", type=int, default=None, help="port (default: JupyterLab's)")
    lab.add_argument("--notebooks", default="notebooks", help="folder to open (default: notebooks)")
    lab.set_defaults(func=_lab)


def _report(args: argparse.Namespace) -> int:
    from rich.console import Console

    from star_lib.cli.report_pages import ReportConfig, build_reports, describe_failure, failure_table
    from star_lib.io import check_output_dir
    from star_lib.paths import refuse_overlap
    from star_lib.viz.params import resolve_path

    check_output_dir(args.out)
    inputs = {"--notebooks": args.notebooks, "--results-dir": resolve_path(args.results_dir)}
    refuse_overlap(inputs, {"--out": args.out})
    if not Path(args.notebooks).is_dir():
        raise FileNotFoundError(f"--notebooks {args.notebooks}: no such notebook folder")
    cfg = ReportConfig(
        notebooks_dir=args.notebooks,
        out_dir=args.out,
        results_dir=args.results_dir,
        scale=args.scale,
        launch=args.launch,
        only=tuple(args.only.split(",")) if args.only else (),
        kernel_name=args.kernel,
        progress=not args.no_progress,
        keep_notebooks=not args.no_notebooks,
    )
    console = Console(width=160)

    def done(report) -> None:
        mark = "[green]ok[/]" if report.ok else f"[red]failed in {describe_failure(report)}[/]"
        console.print(
            f"{report.name:22s} {mark} {report.seconds:6.1f} s  {report.summary or ''}", soft_wrap=True
        )

    reports, index = build_reports(cfg, on_done=done)
    console.print(f"index: {index}")
    if all(r.ok for r in reports):
        return 0
    console.print(failure_table(reports))
    return 1


def register_kernel(
    name: str = KERNEL_NAME, display_name: str = "STAR lab (Python)", prefix: str | None = None
) -> str:
    """Install this interpreter as a Jupyter kernel under ``prefix`` (default ``sys.prefix``: the venv).

    Returns:
        The kernelspec folder.

    """
    from ipykernel.kernelspec import install

    return install(kernel_name=name, display_name=display_name, prefix=prefix or sys.prefix)


def _lab(args: argparse.Namespace) -> int:
    import os

    path = register_kernel()
    print(f"kernel {KERNEL_NAME!r} registered in {path}")
    if args.register_only:
        return 0
    cmd = [sys.executable, "-m", "jupyterlab", f"--notebook-dir={args.notebooks}"]
    if args.no_browser:
        cmd.append("--no-browser")
    if args.port:
        cmd.append(f"--port={args.port}")
    os.execv(sys.executable, cmd)
    return 0  # pragma: no cover - execv does not return
