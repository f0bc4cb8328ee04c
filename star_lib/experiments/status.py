"""``star status GRID``: pending / running / done / failed for every run of a grid, with the last error line.

A run's own ``run.json`` says what the run knows about itself (running, done, failed with its error). A job
that dies without a word — cancelled, killed, out of memory, out of time — cannot write it, so for runs that
are not finished the status asks Slurm's accounting (``sacct``) about the job recorded in ``job.json`` and
reads the last line of the job's stderr log.
"""

from __future__ import annotations

import os
import socket
import subprocess
from collections.abc import Callable, Iterable
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from star_lib.experiments.runner import JOB_FILE, read_run_record
from star_lib.io import read_json

if TYPE_CHECKING:
    import polars as pl

STATES: tuple[str, ...] = ("pending", "running", "done", "failed")
_SLURM_PENDING = {"PENDING", "REQUEUED", "REQUEUE_HOLD", "REQUEUE_FED", "RESIZING", "SUSPENDED", "REVOKED"}
_SLURM_RUNNING = {"RUNNING", "COMPLETING", "CONFIGURING", "STAGE_OUT", "SIGNALING"}

Sacct = Callable[[list[str]], dict[str, str]]
"""Job ids → Slurm state (``CANCELLED by 0`` …); ids it does not know are absent."""


@dataclass(frozen=True)
class RunStatus:
    """One row of ``star status``."""

    run: str
    """Run name."""
    state: str
    """``pending`` | ``running`` | ``done`` | ``failed``."""
    stage: str | None
    """The stage running now (``running``) or it failed in (``failed``), else the last one finished."""
    job_id: str | None
    """Slurm/submitit job id, when submitted."""
    slurm_state: str | None
    """Slurm's own state word, when asked."""
    wall_s: float | None
    """Wall time of a finished run."""
    gpu_hours: float | None
    """GPU-hours of a finished run."""
    error: str | None
    """Last line of the error of a failed run."""
    step: int | None = None
    """Optimizer step the running training stage (SFT, RL) has reached."""
    steps: int | None = None
    """Steps the running training stage will take."""
    reward: float | None = None
    """Last mean training reward of the running RL stage (SFT: None)."""
    eta_s: float | None = None
    """Seconds the running stage still needs at its pace so far."""


def sacct_states(job_ids: list[str]) -> dict[str, str]:
    """Ask Slurm accounting for the state of some jobs (array tasks included); {} when sacct is missing."""
    if not job_ids:
        return {}
    parents = sorted({j.split("_")[0] for j in job_ids})
    cmd = ["sacct", "-X", "-n", "--parsable2", "-o", "JobID,State"]
    for parent in parents:
        cmd += ["-j", parent]
    try:
        out = subprocess.run(cmd, capture_output=True, text=True, timeout=30, check=False).stdout
    except (FileNotFoundError, subprocess.TimeoutExpired):
        return {}
    states: dict[str, str] = {}
    for line in out.splitlines():
        if "|" not in line:
            continue
        job, state = line.split("|", 1)
        states[job.strip()] = state.strip()
    for job in job_ids:  # a pending array shows as 12_[3-5]; give its tasks that state
        if job not in states and "_" in job:
            parent, task = job.split("_", 1)
            for key, state in states.items():
                if key.startswith(parent + "_[") and _in_range(int(task), key[len(parent) + 2 : -1]):
                    states[job] = state
    return states


def _in_range(task: int, spec: str) -> bool:
    """Whether array task ``task`` lies in a Slurm range list ``0-3,7%2``."""
    for part in spec.split("%")[0].split(","):
        lo, _, hi = part.partition("-")
        if lo.isdigit() and int(lo) <= task <= int(hi if hi.isdigit() else lo):
            return True
    return False


def _stderr_last_line(job: dict[str, Any]) -> str | None:
    """Last non-empty line of the job's submitit stderr log, if any."""
    from submitit.core.utils import JobPaths

    path = JobPaths(job["folder"], job_id=job["id"], task_id=0).stderr
    try:
        lines = [ln.strip() for ln in Path(path).read_text(errors="replace").splitlines() if ln.strip()]
    except OSError:
        return None
    return lines[-1] if lines else None


def _pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def run_status(run_dir: Path, slurm: dict[str, str]) -> RunStatus:
    """Return the status of one run folder, given Slurm's states of the grid's jobs."""
    record = read_run_record(run_dir) or {}
    job = _read_job(run_dir)
    stages = record.get("stages") or []
    last_stage = stages[-1]["stage"] if stages else None
    state = record.get("status") or "pending"
    error = record.get("error")
    job_id = job.get("id") if job else None
    slurm_state = slurm.get(job_id) if job_id else None
    if state in ("pending", "running") and job and job.get("cluster") == "slurm" and slurm_state:
        word = slurm_state.split()[0]
        if word in _SLURM_PENDING:
            state = "pending"
        elif word in _SLURM_RUNNING:
            state = "running"
        else:  # ended: COMPLETED without a done record, CANCELLED, FAILED, TIMEOUT, OUT_OF_MEMORY…
            record = read_run_record(run_dir) or record  # it may have finished while we asked
            if record.get("status") in ("done", "failed"):
                state, error = record["status"], record.get("error")
            else:
                state = "failed"
                last = _stderr_last_line(job)
                error = f"Slurm {slurm_state}: {last}" if last else f"Slurm job {job_id} ended {slurm_state}"
    elif state in ("pending", "running") and (not job or job.get("cluster") in ("local", "debug")):
        state, error = _local_liveness(state, error, record, job)
    current = record.get("current_stage")
    running = state == "running"
    return RunStatus(
        run=run_dir.name,
        state=state,
        stage=current if current and state in ("running", "failed") else last_stage,
        job_id=job_id,
        slurm_state=slurm_state,
        wall_s=record.get("wall_s") if state == "done" else None,
        gpu_hours=record.get("gpu_hours") if state == "done" else None,
        error=error if state == "failed" else None,
        step=record.get("stage_step") if running and current else None,
        steps=record.get("stage_steps") if running and current else None,
        reward=record.get("stage_reward") if running and current else None,
        eta_s=_eta(record) if running and current else None,
    )


def _eta(record: dict[str, Any]) -> float | None:
    """Return the running stage's remaining seconds as of now (the trainer wrote them at its last step)."""
    import time

    eta, updated = record.get("stage_eta_s"), record.get("stage_updated")
    if not isinstance(eta, int | float):
        return None
    return max(0.0, float(eta) - (time.time() - updated if isinstance(updated, int | float) else 0.0))


def _local_liveness(
    state: str, error: str | None, record: dict[str, Any], job: dict[str, Any] | None
) -> tuple[str, str | None]:
    """Return (state, error) of a run on this machine: ``failed`` once its process is gone.

    A running run records its pid and host in ``run.json``; a submitted local job's id (``job.json``) is
    the pid of submitit's job process. Either one gone without a ``done``/``failed`` record means the run was
    killed (SIGKILL, out of memory, reboot) and never will finish.
    """
    pid, host = record.get("pid"), record.get("host")
    if state == "running" and pid and host == socket.gethostname() and not _pid_alive(int(pid)):
        return "failed", f"process {pid} ended before the run finished (killed?)"
    job_id = str(job.get("id", "")) if job else ""
    job_host = job.get("host") if job else None
    if (
        job_id.isdigit()
        and (job_host is None or job_host == socket.gethostname())
        and not _pid_alive(int(job_id))
    ):
        where = "started" if state == "pending" else "finished"
        return "failed", f"local job {job_id} ended before the run {where} (killed?)"
    return state, error


def _read_job(run_dir: Path) -> dict[str, Any] | None:
    try:
        return read_json(run_dir / JOB_FILE)
    except (FileNotFoundError, ValueError):
        return None


def run_dirs(grid_folder: str | os.PathLike[str]) -> list[Path]:
    """Run folders of a grid: the runs its ``grid.yaml`` lists, else every sub-folder with a config."""
    folder = Path(grid_folder)
    manifest = folder / "grid.yaml"
    if manifest.is_file():
        from star_lib.io import read_yaml

        return [folder / r["name"] for r in (read_yaml(manifest) or {}).get("runs", [])]
    return sorted(p for p in folder.iterdir() if p.is_dir() and (p / "config.yaml").is_file())


def grid_status(grid_folder: str | os.PathLike[str], sacct: Sacct = sacct_states) -> list[RunStatus]:
    """Status of every run of the grid in ``grid_folder``.

    Raises:
        FileNotFoundError: when the folder does not exist.
        ValueError: when it is no grid folder (no ``grid.yaml`` and no run folder with a ``config.yaml``).

    """
    folder = Path(grid_folder)
    if not folder.is_dir():
        raise FileNotFoundError(f"no grid folder {folder}; run or submit the grid first")
    dirs = run_dirs(folder)
    if not dirs:
        raise ValueError(
            f"{folder} is no grid folder (no grid.yaml and no run folder with a config.yaml); pass the "
            "folder `star run-grid` or `star submit` wrote, e.g. runs/<grid>"
        )
    jobs = [j for d in dirs if (j := _read_job(d)) and j.get("cluster") == "slurm"]
    states = sacct([j["id"] for j in jobs]) if jobs else {}
    return [run_status(d, states) for d in dirs]


def status_frame(statuses: Iterable[RunStatus]) -> pl.DataFrame:
    """Return the statuses as a polars frame (one row per run)."""
    import polars as pl

    rows = [asdict(s) for s in statuses]
    schema = {
        "run": pl.String,
        "state": pl.String,
        "stage": pl.String,
        "job_id": pl.String,
        "slurm_state": pl.String,
        "wall_s": pl.Float64,
        "gpu_hours": pl.Float64,
        "error": pl.String,
        "step": pl.Int64,
        "steps": pl.Int64,
        "reward": pl.Float64,
        "eta_s": pl.Float64,
    }
    return pl.DataFrame(rows, schema=schema)


def format_eta(seconds: float | None) -> str:
    """``1h02m``, ``4m05s``, ``12s``; empty when unknown."""
    if seconds is None:
        return ""
    seconds = int(round(seconds))
    if seconds >= 3600:
        return f"{seconds // 3600}h{seconds % 3600 // 60:02d}m"
    return f"{seconds // 60}m{seconds % 60:02d}s" if seconds >= 60 else f"{seconds}s"


def format_step(status: RunStatus) -> str:
    """``12/40`` (step / total) of a running training stage; empty otherwise."""
    if status.step is None:
        return ""
    return f"{status.step}/{status.steps}" if status.steps else str(status.step)


def render_status(statuses: list[RunStatus], title: str) -> Any:
    """Return a rich table of the statuses, with a count per state in the caption.

    A running run shows the stage it is in and, in a training stage, its step / total, the last mean
    training reward and the time the stage still needs at its pace so far (ETA).
    """
    from rich.table import Table

    colours = {"pending": "yellow", "running": "cyan", "done": "green", "failed": "red"}
    table = Table(title=title)
    for column in ("run", "state", "stage", "step", "reward", "ETA", "job", "wall s", "GPU-h", "error"):
        table.add_column(column, overflow="fold")
    for s in statuses:
        table.add_row(
            s.run,
            f"[{colours[s.state]}]{s.state}[/]",
            s.stage or "",
            format_step(s),
            f"{s.reward:.3f}" if s.reward is not None else "",
            format_eta(s.eta_s),
            s.job_id or "",
            f"{s.wall_s:.1f}" if s.wall_s is not None else "",
            f"{s.gpu_hours:.2f}" if s.gpu_hours is not None else "",
            s.error or "",
        )
    counts = {state: sum(1 for s in statuses if s.state == state) for state in STATES}
    table.caption = "  ".join(f"{state}: {n}" for state, n in counts.items())
    return table
