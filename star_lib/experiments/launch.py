"""Multi-GPU / multi-node training inside a Slurm job: torchrun or accelerate around one training stage.

The job (one task per node) runs the experiment; a training stage that sees a launcher in the environment
(``STAR_LAUNCHER``, set by :class:`star_lib.experiments.runner.RunJob` from the cluster profile) writes its
run config to JSON and starts ``python -m star_lib.experiments.launch <stage> <config.json>`` under
torchrun/accelerate on every node, one process per GPU. Node rank and rendezvous address come from Slurm.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from dataclasses import asdict, is_dataclass
from pathlib import Path
from typing import Any

from star_lib.experiments.profiles import ClusterProfile
from star_lib.io import read_json, write_text_atomic

LAUNCH_ENV = (
    "STAR_LAUNCHER",
    "STAR_GPUS_PER_NODE",
    "STAR_PROCESSES_PER_NODE",
    "STAR_NODES",
    "STAR_ACCELERATE_CONFIG",
    "ACCELERATE_USE_CPU",
)
"""Environment variables a job sets for its training stages."""


def wants_launcher(env: dict[str, str] | None = None) -> bool:
    """Return True when training should run under torchrun/accelerate (a launcher and > 1 process in all)."""
    profile = ClusterProfile.from_launch_env(env)
    return profile.launcher != "none" and profile.processes_per_node_or_gpus * profile.nodes > 1


def master_address(env: dict[str, str] | None = None) -> str:
    """Return the first host of the job (rendezvous for torchrun/accelerate)."""
    env = dict(os.environ if env is None else env)
    if env.get("MASTER_ADDR"):
        return env["MASTER_ADDR"]
    nodelist = env.get("SLURM_JOB_NODELIST")
    if not nodelist:
        return "127.0.0.1"
    try:
        out = subprocess.run(
            ["scontrol", "show", "hostnames", nodelist],
            capture_output=True,
            text=True,
            timeout=30,
            check=True,
        ).stdout.split()
    except (OSError, subprocess.SubprocessError):
        return nodelist.split(",")[0]
    return out[0] if out else "127.0.0.1"


def run_launched(stage: str, config: Any, out: Path) -> None:
    """Run ``stage`` (``sft`` | ``rl``) with ``config`` under the job's launcher; raises when it fails."""
    payload = asdict(config) if is_dataclass(config) else dict(config)
    path = out / f"{stage}_launch.json"
    out.mkdir(parents=True, exist_ok=True)
    write_text_atomic(path, json.dumps(payload, default=_jsonable))  # the other nodes wait for this file
    _launch(stage, path)


def follow_launched(stage: str, work: Path, poll_s: float = 5.0) -> None:
    """On nodes > 0: wait for node 0 to write the stage's launch config, then join the same launch."""
    path = work / f"{stage}_launch.json"
    while not path.is_file():
        time.sleep(poll_s)
    _launch(stage, path)


def launched_command(stage: str, path: Path, env: dict[str, str]) -> list[str]:
    """Return the command this node runs for ``stage``: the job's profile (launcher, accelerate config)."""
    return ClusterProfile.from_launch_env(env).launch_command(
        "star_lib.experiments.launch", [stage, str(path)], env
    )


def _launch(stage: str, path: Path) -> None:
    env = {**os.environ, "MASTER_ADDR": master_address(), "MASTER_PORT": _master_port()}
    subprocess.run(launched_command(stage, path, env), env=env, check=True)


def _master_port() -> str:
    """Rendezvous port, the same on every node of a job."""
    return os.environ.get("MASTER_PORT") or str(20000 + int(os.environ.get("SLURM_JOB_ID", "0") or 0) % 20000)


def _jsonable(value: Any) -> Any:
    if is_dataclass(value):
        return asdict(value)
    if isinstance(value, Path):
        return str(value)
    return str(value)


def main(argv: list[str] | None = None) -> int:
    """Run one training stage: ``python -m star_lib.experiments.launch <sft|rl> <config.json>``."""
    args = sys.argv[1:] if argv is None else argv
    if len(args) != 2 or args[0] not in ("sft", "rl"):
        print("usage: python -m star_lib.experiments.launch <sft|rl> <config.json>", file=sys.stderr)
        return 2
    stage, path = args
    try:
        _train(stage, read_json(path))
    except BaseException:
        _close_process_group(wait=False)  # a failed rank must not wait for ranks that may never arrive
        raise
    _close_process_group(wait=True)
    return 0


def _train(stage: str, values: dict[str, Any]) -> None:
    if stage == "sft":
        from star_lib.train.sft import SFTRunConfig, run_sft

        run_sft(SFTRunConfig(**values))
    else:
        from star_lib.train.resume import resume_point
        from star_lib.train.rl import RLRunConfig, run_rl

        values["curriculum_boundaries"] = tuple(values.get("curriculum_boundaries") or (1 / 3, 2 / 3))
        run_rl(RLRunConfig(**values), resume=resume_point(values["output_dir"]) or False)


def _close_process_group(wait: bool) -> None:
    """Wait for every rank (``wait``), then tear the process group down before the interpreter exits.

    A rank that exits while its process group's threads still run aborts ("terminate called without an
    active exception", SIGABRT): the rehearsal's rank 1 did, while rank 0 was still saving the model.
    """
    import torch.distributed as dist

    if dist.is_available() and dist.is_initialized():
        if wait:
            dist.barrier()
        dist.destroy_process_group()


if __name__ == "__main__":
    sys.exit(main())
