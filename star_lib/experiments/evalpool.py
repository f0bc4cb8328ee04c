"""Greedy CPU evaluation split over one-thread processes (``STAR_EVAL_PROCESSES``, ``--eval-processes``).

On a few CPU cores a small model's decoding is bound by per-operation overhead, not arithmetic: a second
torch thread barely speeds one process up, while two one-thread processes decode about twice as many
episodes (``benchmarks/bench_threads.py``). The eval stage's episodes are independent and checkpointed by
chunk, so with ``STAR_EVAL_PROCESSES=N`` it hands its chunks (and the expert's turn-budget check) to
``N`` worker processes of ``threads // N`` torch threads each, where ``threads`` is what the run was given
(``ExperimentConfig.threads``). Chunks are saved in the same files as one process saves them, so a resumed
evaluation does not care how its chunks were computed.

It applies only where it cannot change a result: greedy decoding (``temperature: 0``) with the fast CPU
sampler. Elsewhere the stage runs in its own process, as without the setting. Whether a split evaluation
reproduces a one-process evaluation exactly is checked by ``tests/test_evalpool.py`` on a tiny model and
was checked on the tiny study's trained models (``reports/tiny-study/README.md``).

The setting is an environment variable, not a config field, because it changes how a run computes, not what:
it is not part of any run's or stage's key. ``star run`` and ``star study`` set it from
``--eval-processes`` (``eval_processes:`` in ``configs/study/study.yaml``), and child processes inherit it.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterable, Iterator
from concurrent.futures import FIRST_COMPLETED, Future, ProcessPoolExecutor, wait
from typing import Any

ENV_VAR = "STAR_EVAL_PROCESSES"
"""The environment variable naming how many processes a greedy CPU evaluation may use (unset or 1: one)."""


def eval_processes(environ: dict[str, str] | None = None) -> int:
    """Return the processes ``STAR_EVAL_PROCESSES`` allows (1 when unset or empty).

    Raises:
        ValueError: A value that is not a whole number >= 1, naming the variable.

    """
    text = (os.environ if environ is None else environ).get(ENV_VAR, "").strip()
    if not text:
        return 1
    if not text.isdigit() or int(text) < 1:
        raise ValueError(f"{ENV_VAR}={text!r} is not allowed; give a whole number >= 1 (1: one process)")
    return int(text)


def check_processes(value: Any, option: str = "--eval-processes") -> int:
    """Validate a requested process count (an option or a YAML value); returns it.

    Raises:
        ValueError: Naming ``option``.

    """
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise ValueError(f"{option}: {value!r} is not allowed; give a whole number >= 1 (1: one process)")
    return value


def use_eval_processes(processes: int, option: str = "--eval-processes") -> None:
    """Set ``STAR_EVAL_PROCESSES`` for this process and the runs it starts (children inherit it).

    Raises:
        ValueError: ``processes`` is not a whole number >= 1, naming ``option``.

    """
    os.environ[ENV_VAR] = str(check_processes(processes, option))


def pool_size(requested: int, threads: int, chunks: int) -> int:
    """How many processes to use: at most one per torch thread the run has, and one per chunk to compute."""
    return max(1, min(requested, threads, chunks))


def _set_threads(threads: int) -> None:
    import torch

    torch.set_num_threads(threads)


class ChunkPool:
    """Worker processes (spawned, so no torch thread pool is forked) that run module-level functions.

    Args:
        processes: Worker processes.
        threads: torch threads of each worker.

    Use it as a context manager: leaving the block stops the workers, and pending work is cancelled.

    """

    def __init__(self, processes: int, threads: int) -> None:
        import multiprocessing

        self.processes = processes
        self.threads = threads
        self._executor = ProcessPoolExecutor(
            processes,
            mp_context=multiprocessing.get_context("spawn"),
            initializer=_set_threads,
            initargs=(threads,),
        )

    def __enter__(self) -> ChunkPool:
        return self

    def __exit__(self, *exc: object) -> None:
        self._executor.shutdown(wait=True, cancel_futures=True)

    def imap(
        self, fn: Callable[..., Any], jobs: Iterable[tuple[Any, tuple[Any, ...]]]
    ) -> Iterator[tuple[Any, Any]]:
        """Run ``fn(*args)`` for each ``(tag, args)`` in the workers; yield ``(tag, result)`` as each ends.

        A worker's exception is raised here (the rest of the work is cancelled).
        """
        pending: dict[Future, Any] = {self._executor.submit(fn, *args): tag for tag, args in jobs}
        try:
            while pending:
                done, _ = wait(pending, return_when=FIRST_COMPLETED)
                for future in done:
                    tag = pending.pop(future)
                    yield tag, future.result()
        finally:
            for future in pending:
                future.cancel()
