"""Greedy CPU evaluation split over one-thread processes (``STAR_EVAL_PROCESSES``, ``--eval-processes``).

On a few CPU cores a small model's decoding gains little from a second torch thread, while two one-thread
processes decode more episodes between them (``benchmarks/bench_threads.py``). The eval stage's chunks are
independent and checkpointed, so with ``STAR_EVAL_PROCESSES=N`` it computes them (each one's turn-budget
check included) in ``N`` processes of ``threads // N`` torch threads — its own and ``N - 1`` spawned
workers — where ``threads`` is what the run was given (``ExperimentConfig.threads``). Chunks are saved in the
same files one process saves, so a resumed evaluation does not care how its chunks were computed.

It applies only where it cannot change a result: greedy decoding (``temperature: 0``) with the fast CPU
sampler. Elsewhere the stage runs in its own process, as without the setting. That a split evaluation
reproduces a one-process evaluation exactly is tested (``tests/experiments/test_evalpool.py``) and was
checked on trained tiny study models (``benchmarks/bench_eval_processes.py``).

The setting is an environment variable, not a config field, because it changes how a run computes, not what:
it is not part of any run's or stage's key. ``star run`` and ``star study`` set it from
``--eval-processes`` (``eval_processes:`` in ``configs/study/study.yaml``), and child processes inherit it.
"""

from __future__ import annotations

import os
import queue
import threading
from collections import deque
from collections.abc import Callable, Iterable, Iterator
from concurrent.futures import Future, ProcessPoolExecutor
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


def splittable(policy: str | None, temperature: float) -> bool:
    """Whether an evaluation with this policy backend and temperature may be split (greedy, fast sampler)."""
    return policy == "fast" and temperature == 0


def pool_size(requested: int, threads: int, chunks: int) -> int:
    """How many processes to use: at most one per torch thread the run has, and one per chunk to compute."""
    return max(1, min(requested, threads, chunks))


def _set_threads(threads: int) -> int:
    """Set this process's torch threads; return the number it had."""
    import torch

    before = torch.get_num_threads()
    torch.set_num_threads(threads)
    return before


class ChunkPool:
    """Jobs shared by this process and ``processes - 1`` spawned workers (no torch thread pool is forked).

    This process computes jobs too, from the first moment, while the workers start (importing torch and
    loading a model takes them seconds): each process takes the next job when it is free, so they finish
    together. Jobs run module-level functions (they are pickled to the workers).

    Args:
        processes: Processes computing jobs, this one included (>= 2).
        threads: torch threads of each of them while jobs run (this process's are restored afterwards).

    Use it as a context manager: leaving the block stops the workers, and pending work is cancelled.

    """

    def __init__(self, processes: int, threads: int) -> None:
        import multiprocessing

        if processes < 2:
            raise ValueError(f"a ChunkPool needs 2 or more processes, got {processes}")
        self.processes = processes
        self.threads = threads
        self._executor = ProcessPoolExecutor(
            processes - 1,
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
        """Run ``fn(*args)`` for each ``(tag, args)``; yield ``(tag, result)`` as each ends, in any order.

        An exception of a job (here or in a worker) is raised here; the jobs not started are dropped.
        """
        todo = deque(jobs)
        total = len(todo)
        lock = threading.Lock()
        finished: queue.Queue[tuple[Any, Future]] = queue.Queue()

        def next_job() -> tuple[Any, tuple[Any, ...]] | None:
            with lock:
                return todo.popleft() if todo else None

        def send_next() -> None:  # a worker is free: hand it the next job
            job = next_job()
            if job is None:
                return
            try:
                future = self._executor.submit(fn, *job[1])
            except RuntimeError:  # a broken pool (a worker was killed): leave the job to this process
                with lock:
                    todo.appendleft(job)
                return
            future.add_done_callback(lambda f, tag=job[0]: (finished.put((tag, f)), send_next()))

        for _ in range(self.processes - 1):
            send_next()
        before = _set_threads(self.threads)
        done = 0
        try:
            while done < total:
                while not finished.empty():
                    tag, future = finished.get()
                    done += 1
                    yield tag, future.result()
                job = next_job()
                if job is not None:
                    done += 1
                    yield job[0], fn(*job[1])
                elif done < total:
                    tag, future = finished.get()  # nothing left to start: wait for a worker
                    done += 1
                    yield tag, future.result()
        finally:
            with lock:
                todo.clear()
            _set_threads(before)
