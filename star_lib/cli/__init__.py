"""The ``star`` command: one subcommand module per stage, behind one error boundary.

Each module in :data:`COMMAND_MODULES` defines ``register(subparsers)``, adding its subcommands with a
``func`` default that takes the parsed ``argparse.Namespace`` and returns an exit code. Heavy imports
(torch, transformers) happen inside those functions, so ``star --help`` and ``star tool`` stay fast.

Error boundary (:func:`main`): a user mistake — a bad option value (argparse), a ``ValueError`` (config,
record, option; its message names the file/line/option), a missing file, or an operating-system refusal
to read or write a named path (permission, disk full, read-only, a file where a folder is wanted) — ends
as one line ``star <cmd>: error: <sentence>`` on stderr and exit code 2. Anything else is a bug and
keeps its traceback. ``star --traceback …`` (or ``STAR_TRACEBACK=1``) shows the traceback of user errors
too.
"""

from __future__ import annotations

import argparse
import errno
import importlib
import importlib.util
import os
import sys
from typing import NoReturn

COMMAND_MODULES: tuple[str, ...] = (
    "world",  # star world synth | info, star tool
    "evaluate",  # star eval
    "synth",  # star synth
    "agent",  # star teacher | rollout
    "train",  # star sft | rl
    "pipeline",  # star pipeline (the tiny-scale learning signal, end to end)
    "qa",  # star qa-eval
    "experiments",  # star run | submit | status
    "plan",  # star plan (per-GPU memory of a config on a cluster profile)
    "report",  # star report
    "study",  # star study (the tiny study: every finding grid, then star report)
    "demo",  # star demo
)

TRACEBACK_ENV = "STAR_TRACEBACK"
"""Set to 1 to show the traceback of user errors too (same as ``star --traceback``)."""

EXIT_USAGE = 2
"""Exit code of a user error (argparse's convention)."""

_USER_ERRNOS = frozenset(
    {
        errno.EACCES,
        errno.EPERM,
        errno.ENOSPC,
        errno.EDQUOT,
        errno.EROFS,
        errno.EISDIR,
        errno.ENOTDIR,
        errno.EEXIST,
        errno.ENOENT,
        errno.ENAMETOOLONG,
        errno.ELOOP,
        errno.EFBIG,
        errno.ENXIO,
        errno.ETXTBSY,
        errno.EBUSY,
    }
)
"""Operating-system refusals about a path the user named: reported in one line, not as a crash."""


class UsageError(Exception):
    """A command-line mistake argparse found (bad option value, missing argument)."""


class StarParser(argparse.ArgumentParser):
    """An argument parser that raises :class:`UsageError` (one line, exit 2) instead of exiting."""

    def error(self, message: str) -> NoReturn:
        """Raise :class:`UsageError` with argparse's message and where to look for help."""
        raise UsageError(f"{message} (see {self.prog} --help)")


def positive_int(text: str) -> int:
    """Argparse type: an integer >= 1 (``--limit -1`` is refused, not read as "all but the last")."""
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not an integer") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"{text!r} must be an integer >= 1")
    return value


def _finite(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a number") from None
    if value != value or value in (float("inf"), float("-inf")):
        raise argparse.ArgumentTypeError(f"{text!r} must be a finite number")
    return value


def positive_float(text: str) -> float:
    """Argparse type: a finite number > 0 (a learning rate, epochs, seconds; ``inf`` is refused here)."""
    value = _finite(text)
    if not value > 0:
        raise argparse.ArgumentTypeError(f"{text!r} must be > 0")
    return value


def cores(text: str) -> int:
    """Argparse type: a process count from 1 to this machine's cores (``--workers 48`` on 2 is refused)."""
    value = positive_int(text)
    available = os.cpu_count() or 1
    if value > available:
        raise argparse.ArgumentTypeError(
            f"{text!r}: this machine has {available} core(s); use at most {available}"
        )
    return value


def non_negative_float(text: str) -> float:
    """Argparse type: a finite number >= 0 (a temperature)."""
    value = _finite(text)
    if value < 0:
        raise argparse.ArgumentTypeError(f"{text!r} must be >= 0")
    return value


def rate(text: str) -> float:
    """Argparse type: a rate in [0, 1] (fault and corruption rates)."""
    value = _finite(text)
    if not 0.0 <= value <= 1.0:
        raise argparse.ArgumentTypeError(f"{text!r} must be a rate between 0 and 1")
    return value


def probability(text: str) -> float:
    """Argparse type: a probability mass in (0, 1] (``--top-p``)."""
    value = _finite(text)
    if not 0.0 < value <= 1.0:
        raise argparse.ArgumentTypeError(f"{text!r} must be in (0, 1]")
    return value


DEVICES = ("cpu", "cuda", "cuda:<n>", "mps")
"""Torch devices the commands accept for ``--device``."""


def device(text: str) -> str:
    """Argparse type: a torch device name, one of :data:`DEVICES` (``--device tpu`` is refused here)."""
    name = text.strip().lower()
    if name in ("cpu", "cuda", "mps") or (name.startswith("cuda:") and name[5:].isdigit()):
        return name
    raise argparse.ArgumentTypeError(f"{text!r} is not a device; choose one of {', '.join(DEVICES)}")


def check_device(name: str | None, option: str = "--device") -> str:
    """Return ``name`` (default: ``cuda`` when available, else ``cpu``) after checking this machine has it.

    Raises:
        ValueError: naming ``option`` when the device is not available here (no CUDA build or GPU, no MPS).

    """
    import torch

    if name is None:
        return "cuda" if torch.cuda.is_available() else "cpu"
    if name.startswith("cuda"):
        if not torch.cuda.is_available():
            raise ValueError(f"{option} {name}: no CUDA device on this machine; use {option} cpu")
        index = int(name.split(":", 1)[1]) if ":" in name else 0
        if index >= torch.cuda.device_count():
            raise ValueError(f"{option} {name}: this machine has {torch.cuda.device_count()} CUDA device(s)")
    if name == "mps" and not (getattr(torch.backends, "mps", None) and torch.backends.mps.is_available()):
        raise ValueError(f"{option} mps: no Apple MPS device on this machine; use {option} cpu")
    return name


def check_model(name: str, option: str = "--model", *, preset: str | None = None) -> str:
    """Return where the weights of ``name`` come from (a local folder or hub id), before any work.

    ``name`` is a checkpoint folder, preset or hub id; with ``preset`` it is a folder overriding that
    preset's weights. Touches no network.

    Raises:
        FileNotFoundError: naming ``option`` when the folder does not exist or holds no ``config.json``.
        ValueError: naming ``option`` when ``name`` is neither a preset, a folder nor a hub id.

    """
    from star_lib.train.models import resolve_model_source

    try:
        return resolve_model_source(preset, name) if preset is not None else resolve_model_source(name)
    except FileNotFoundError as exc:
        raise FileNotFoundError(f"{option} {name}: {exc}") from None
    except ValueError as exc:
        raise ValueError(f"{option} {name}: {exc}") from None


def build_parser() -> argparse.ArgumentParser:
    """Build the argument parser with every stage's subcommands that exist in this checkout."""
    parser = StarParser(prog="star", description="STAR lab kit: the TravelPlanner RL pipeline.")
    parser.add_argument(
        "--traceback",
        action="store_true",
        help=f"show the full traceback of every error, user mistakes included (or set {TRACEBACK_ENV}=1)",
    )
    sub = parser.add_subparsers(dest="command", required=True, parser_class=StarParser)
    for name in COMMAND_MODULES:
        module_name = f"{__name__}.{name}"
        if importlib.util.find_spec(module_name) is None:
            continue  # stage not in this checkout yet
        importlib.import_module(module_name).register(sub)
    for action in sub._choices_actions:  # `star X --help` opens with the line `star --help` lists for X
        command = sub.choices[action.dest]
        if not command.description and action.help:
            command.description = action.help[0].upper() + action.help[1:] + "."
    return parser


def user_error_message(exc: BaseException) -> str | None:
    """Return the one-sentence message of a user error, or None when ``exc`` is a bug (keep its traceback)."""
    if isinstance(exc, UsageError):
        return str(exc)
    if isinstance(exc, UnicodeDecodeError):  # a decode that did not say which file: say what it is at least
        return f"input is not UTF-8 text ({exc.reason} at byte {exc.start})"
    if (
        isinstance(exc, OSError)
        and exc.errno in _USER_ERRNOS
        and (exc.filename or isinstance(exc, FileNotFoundError))
    ):
        if exc.filename is None:
            return str(exc)
        where = f"{exc.filename}" + (f" -> {exc.filename2}" if exc.filename2 else "")
        return f"{exc.strerror or exc}: {where}"
    if isinstance(exc, (ValueError, FileNotFoundError)):
        text = " ".join(str(exc).split()) or type(exc).__name__
        return text
    return None


def _wants_traceback(argv: list[str]) -> bool:
    if os.environ.get(TRACEBACK_ENV, "").strip().lower() not in ("", "0", "false", "no"):
        return True
    return "--traceback" in argv[: argv.index("--")] if "--" in argv else "--traceback" in argv


def main(argv: list[str] | None = None) -> int:
    """Entry point of the ``star`` console script; returns the exit code (2 for a user error)."""
    argv = list(sys.argv[1:] if argv is None else argv)
    show = _wants_traceback(argv)
    command = argv[0] if argv and not argv[0].startswith("-") else None
    try:
        args = build_parser().parse_args(argv)
        command = " ".join(w for w in (args.command, getattr(args, "world_command", None)) if w)
        return int(args.func(args) or 0)
    except SystemExit as exc:  # --help, --version
        return exc.code if isinstance(exc.code, int) else (0 if exc.code is None else EXIT_USAGE)
    except KeyboardInterrupt:
        print(f"star {command or ''}: interrupted".replace("  ", " "), file=sys.stderr)
        return 130
    except Exception as exc:
        message = user_error_message(exc)
        if message is None or show:
            raise
        prefix = f"star {command}" if command else "star"
        print(f"{prefix}: error: {message}", file=sys.stderr)
        return EXIT_USAGE


if __name__ == "__main__":
    sys.exit(main())
