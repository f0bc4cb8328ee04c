"""Cluster profiles: where and with what resources a grid's jobs run (``slurm/*.yaml``).

A profile maps one-to-one onto submitit's executor parameters (GPUs, CPUs, memory, time, partition,
account, QoS, array parallelism) plus how training is launched inside a job on several GPUs or nodes
(``launcher``: ``none`` | ``torchrun`` | ``accelerate``).
"""

from __future__ import annotations

import os
import shlex
import sys
from dataclasses import asdict, dataclass, field, fields
from pathlib import Path
from typing import Any

from star_lib.experiments.config import ConfigError
from star_lib.io import read_yaml

CLUSTERS: tuple[str, ...] = ("slurm", "local", "debug")
"""submitit back-ends: Slurm, local subprocesses, or in-process (debugging)."""
LAUNCHERS: tuple[str, ...] = ("none", "torchrun", "accelerate")
"""How a distributed stage starts its processes inside a job."""
REQUIRED_KEYS: tuple[str, ...] = (
    "cluster",
    "nodes",
    "gpus_per_node",
    "cpus_per_task",
    "mem_gb",
    "timeout_min",
)
"""Keys a profile file must set: an empty or partial file must not quietly launch jobs on defaults."""


@dataclass(frozen=True)
class ClusterProfile:
    """Resources and placement of every job of a grid."""

    name: str = "local"
    """Profile name (for logs)."""
    cluster: str = "local"
    """submitit back-end, one of :data:`CLUSTERS`."""
    partition: str | None = None
    """Slurm partition (``--partition``)."""
    account: str | None = None
    """Slurm account (``--account``)."""
    qos: str | None = None
    """Slurm QoS (``--qos``)."""
    nodes: int = 1
    """Nodes per job (the paper's 7B runs use 2 nodes × 8 A100)."""
    gpus_per_node: int = 0
    """GPUs per node (paper: 8)."""
    processes_per_node: int | None = None
    """Training processes per node (None: one per GPU). A profile without GPUs sets it to rehearse
    data-parallel training on CPU: its processes talk over gloo (``ACCELERATE_USE_CPU=1``)."""
    tasks_per_node: int = 1
    """Slurm tasks per node; keep 1 — torchrun/accelerate start the per-GPU processes."""
    cpus_per_task: int = 1
    """CPUs per task."""
    mem_gb: float = 4.0
    """Memory per node in GB (``--mem``); 0 asks Slurm for the whole node's memory (``--mem=0``), what an
    exclusive GPU node is for and the only value that fits every site's nodes."""
    timeout_min: int = 60
    """Time limit of one job (a preempted or timed-out checkpointable job is requeued)."""
    array_parallelism: int = 64
    """At most this many array tasks run at once."""
    max_num_timeout: int = 3
    """How many times a job may be requeued after timeouts/preemptions."""
    launcher: str = "none"
    """How distributed stages launch inside the job, one of :data:`LAUNCHERS`."""
    accelerate_config: str | None = None
    """``launcher: accelerate`` only: the accelerate config every node launches with (``slurm/accelerate/``:
    DDP for 1.5B, DeepSpeed ZeRO-3 on one node or two for 3B and 7B); None launches plain multi-GPU DDP."""
    gpu_memory_gb: float | None = None
    """Memory of one GPU in GB, for ``star plan`` (None: guessed from the profile's name, e.g. a100 → 80)."""
    setup: tuple[str, ...] = ()
    """Shell lines run before the job (``module load cuda``, ``source .venv/bin/activate``)."""
    additional: dict[str, Any] = field(default_factory=dict)
    """Extra sbatch options without the dashes, e.g. ``{constraint: a100, exclusive: true}``."""

    def __post_init__(self) -> None:
        for key in ("name", "cluster", "launcher"):
            if not isinstance(getattr(self, key), str):
                raise ConfigError(f"{key}: {getattr(self, key)!r} is not allowed; give a string")
        for key in ("partition", "account", "qos"):
            value = getattr(self, key)
            if value is not None and not isinstance(value, str):
                raise ConfigError(f"{key}: {value!r} is not allowed; give a string (or null)")
        if self.cluster not in CLUSTERS:
            raise ConfigError(f"cluster: {self.cluster!r} is not allowed; choose one of {list(CLUSTERS)}")
        if self.launcher not in LAUNCHERS:
            raise ConfigError(f"launcher: {self.launcher!r} is not allowed; choose one of {list(LAUNCHERS)}")
        for key in ("nodes", "tasks_per_node", "cpus_per_task", "timeout_min", "array_parallelism"):
            value = getattr(self, key)
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise ConfigError(f"{key}: {value!r} is not allowed; give an integer >= 1")
        if (
            isinstance(self.gpus_per_node, bool)
            or not isinstance(self.gpus_per_node, int)
            or self.gpus_per_node < 0
        ):
            raise ConfigError(f"gpus_per_node: {self.gpus_per_node!r} is not allowed; give an integer >= 0")
        value = self.processes_per_node
        if value is not None and (isinstance(value, bool) or not isinstance(value, int) or value < 1):
            raise ConfigError(f"processes_per_node: {value!r} is not allowed; give an integer >= 1 (or null)")
        if self.accelerate_config is not None and (
            not isinstance(self.accelerate_config, str) or self.launcher != "accelerate"
        ):
            raise ConfigError(
                f"accelerate_config: {self.accelerate_config!r} needs launcher: accelerate and a file path"
            )
        memory = self.gpu_memory_gb
        bad_memory = isinstance(memory, bool) or not isinstance(memory, (int, float)) or memory <= 0
        if memory is not None and bad_memory:
            raise ConfigError(f"gpu_memory_gb: {memory!r} is not allowed; give a positive number (or null)")
        if self.nodes > 1 and self.launcher == "none":
            raise ConfigError("launcher: a multi-node profile needs launcher torchrun or accelerate")
        if (
            isinstance(self.mem_gb, bool)
            or not isinstance(self.mem_gb, (int, float))
            or not 0 <= self.mem_gb < float("inf")
        ):
            raise ConfigError(
                f"mem_gb: {self.mem_gb!r} is not allowed; give a number >= 0 (0: the whole node)"
            )
        value = self.max_num_timeout
        if isinstance(value, bool) or not isinstance(value, int) or value < 0:
            raise ConfigError(f"max_num_timeout: {value!r} is not allowed; give an integer >= 0")
        if isinstance(self.setup, str) or not all(isinstance(line, str) for line in self.setup or ()):
            raise ConfigError(f"setup: {self.setup!r} is not allowed; give a list of shell lines (strings)")
        if not isinstance(self.additional, dict) or not all(isinstance(k, str) for k in self.additional):
            raise ConfigError(
                f"additional: {self.additional!r} is not allowed; give a mapping of sbatch option names"
            )
        object.__setattr__(self, "setup", tuple(self.setup or ()))

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> ClusterProfile:
        """Build from a mapping; unknown keys raise :class:`ConfigError` naming the allowed ones."""
        if not isinstance(data, dict):
            raise ConfigError(f"a cluster profile is a mapping of keys, got {type(data).__name__}")
        allowed = [f.name for f in fields(cls)]
        unknown = sorted(set(data) - set(allowed))
        if unknown:
            raise ConfigError(f"unknown cluster profile key(s) {unknown}; allowed keys are {allowed}")
        return cls(**data)

    def to_dict(self) -> dict[str, Any]:
        """Plain form (YAML-able)."""
        out = asdict(self)
        out["setup"] = list(self.setup)
        return out

    def executor_parameters(self, job_name: str) -> dict[str, Any]:
        """Return the parameters given to ``submitit.AutoExecutor.update_parameters``."""
        params: dict[str, Any] = {
            "name": job_name,
            "timeout_min": self.timeout_min,
            "mem_gb": self.mem_gb,
            "nodes": self.nodes,
            "tasks_per_node": self.tasks_per_node,
            "cpus_per_task": self.cpus_per_task,
        }
        if self.gpus_per_node:
            params["gpus_per_node"] = self.gpus_per_node
        if self.cluster == "slurm":
            params["slurm_array_parallelism"] = self.array_parallelism
            for key, value in (
                ("slurm_partition", self.partition),
                ("slurm_account", self.account),
                ("slurm_qos", self.qos),
            ):
                if value:
                    params[key] = value
            # without it, srun on Slurm 22.05–23.02 gives the task one CPU: every rank pinned to one core
            params["slurm_srun_args"] = [f"--cpus-per-task={self.cpus_per_task}"]
            if self.setup:
                params["slurm_setup"] = list(self.setup)
            if self.additional:
                params["slurm_additional_parameters"] = dict(self.additional)
        return params

    def executor(self, folder: str | os.PathLike[str], job_name: str = "star") -> Any:
        """Return a configured ``submitit.AutoExecutor`` writing its logs under ``folder``."""
        import submitit

        extra = {"slurm_max_num_timeout": self.max_num_timeout} if self.cluster == "slurm" else {}
        executor = submitit.AutoExecutor(folder=str(folder), cluster=self.cluster, **extra)
        executor.update_parameters(**self.executor_parameters(job_name))
        return executor

    def launch_command(self, module: str, args: list[str], env: dict[str, str] | None = None) -> list[str]:
        """Return the command a distributed stage runs on each node of the job: ``module`` under the launcher.

        The launcher runs as a module of this interpreter (``python -m accelerate.commands.launch``,
        ``python -m torch.distributed.run``), never a ``PATH`` lookup that may find another environment's.
        Node rank, node count and the rendezvous host come from Slurm's variables (``SLURM_NODEID``,
        ``SLURM_JOB_NUM_NODES``, the first host of ``SLURM_JOB_NODELIST`` via ``MASTER_ADDR`` when set).
        """
        env = dict(os.environ if env is None else env)
        gpus = self.processes_per_node_or_gpus
        if self.launcher == "none":
            return [sys.executable, "-m", module, *args]
        nodes = int(env.get("SLURM_JOB_NUM_NODES", self.nodes))
        rank = int(env.get("SLURM_NODEID", "0"))
        master = env.get("MASTER_ADDR", "127.0.0.1")
        port = env.get("MASTER_PORT", "29500")
        if self.launcher == "torchrun":
            return [
                sys.executable,
                "-m",
                "torch.distributed.run",
                f"--nnodes={nodes}",
                f"--nproc_per_node={gpus}",
                f"--node_rank={rank}",
                f"--master_addr={master}",
                f"--master_port={port}",
                "-m",
                module,
                *args,
            ]
        # with a config file, the file says how (DDP or DeepSpeed ZeRO-3); the flags place this node
        how = ["--config_file", self.accelerate_config] if self.accelerate_config else ["--multi_gpu"]
        return [
            sys.executable,
            "-m",
            "accelerate.commands.launch",
            *how,
            f"--num_machines={nodes}",
            f"--num_processes={nodes * gpus}",
            f"--machine_rank={rank}",
            f"--main_process_ip={master}",
            f"--main_process_port={port}",
            "-m",
            module,
            *args,
        ]

    @property
    def processes_per_node_or_gpus(self) -> int:
        """Training processes per node of a distributed stage: ``processes_per_node``, else one per GPU."""
        return self.processes_per_node or max(self.gpus_per_node, 1)

    def launch_env(self) -> dict[str, str]:
        """Environment a job gives its training stages (read back by :meth:`from_launch_env`).

        The accelerate config travels as an absolute path: the job's working directory need not be the
        submitter's. Processes without GPUs and without an accelerate config get ``ACCELERATE_USE_CPU=1``:
        with ``--multi_gpu`` that makes accelerate start one CPU process per slot joined over gloo (``--cpu``
        would start only one). A config says it itself (``use_cpu``): the variable would turn its DeepSpeed
        into plain DDP while TRL still gathers ZeRO-3 parameters, which fails at the first forward.
        """
        env = {
            "STAR_LAUNCHER": self.launcher,
            "STAR_GPUS_PER_NODE": str(self.gpus_per_node),
            "STAR_PROCESSES_PER_NODE": str(self.processes_per_node_or_gpus),
            "STAR_NODES": str(self.nodes),
        }
        if self.accelerate_config:
            env["STAR_ACCELERATE_CONFIG"] = str(Path(self.accelerate_config).resolve())
        if not self.gpus_per_node and self.processes_per_node_or_gpus > 1 and not self.accelerate_config:
            env["ACCELERATE_USE_CPU"] = "1"
        return env

    @classmethod
    def from_launch_env(cls, env: dict[str, str] | None = None) -> ClusterProfile:
        """Return the profile of the job this process runs in, from :meth:`launch_env`'s variables."""
        env = dict(os.environ if env is None else env)
        return cls(
            name="job",
            cluster="slurm",
            nodes=int(env.get("STAR_NODES", "1") or 1),
            gpus_per_node=int(env.get("STAR_GPUS_PER_NODE", "0") or 0),
            processes_per_node=int(env.get("STAR_PROCESSES_PER_NODE", "0") or 0) or None,
            launcher=env.get("STAR_LAUNCHER", "none"),
            accelerate_config=env.get("STAR_ACCELERATE_CONFIG") or None,
        )

    def describe(self) -> str:
        """One line for logs, e.g. ``a100-8gpu: slurm a100, 1×8 GPU, 64 CPU, whole-node memory, …``."""
        where = f"{self.cluster} {self.partition or ''}".strip()
        return (
            f"{self.name}: {where}, {self.nodes}×{self.gpus_per_node} GPU, {self.cpus_per_task} CPU, "
            f"{f'{self.mem_gb:g} GB' if self.mem_gb else 'whole-node memory'}, {self.timeout_min} min, "
            f"launcher {self.launcher}"
        )


def load_profile(path: str | os.PathLike[str]) -> ClusterProfile:
    """Load a cluster profile YAML (``slurm/<name>.yaml``); errors name the file and the key.

    The file must be a mapping that sets every key of :data:`REQUIRED_KEYS` (an empty or partial file is
    refused rather than launching jobs on defaults), with values of the right types.

    Raises:
        FileNotFoundError: when the file does not exist.
        ConfigError: naming the file and the key that is unknown, missing or malformed.

    """
    path = Path(path)
    if not path.is_file():
        raise FileNotFoundError(f"cluster profile {path} not found; profiles live in slurm/*.yaml")
    data = read_yaml(path)
    if not isinstance(data, dict):
        what = "is empty" if data is None else f"holds a {type(data).__name__}, not a mapping of keys"
        raise ConfigError(
            f"{path}: the cluster profile {what}; set {list(REQUIRED_KEYS)} (see slurm/local.yaml)"
        )
    data = {"name": path.stem, **data}
    if isinstance(data.get("accelerate_config"), str):
        data["accelerate_config"] = _beside_profile(data["accelerate_config"], path)
    try:
        profile = ClusterProfile.from_dict(data)
    except (ConfigError, TypeError) as exc:
        raise ConfigError(f"{path}: {exc}") from None
    missing = [key for key in REQUIRED_KEYS if key not in data]
    if missing:
        raise ConfigError(
            f"{path}: the cluster profile lacks required key(s) {missing} (see slurm/local.yaml)"
        )
    return profile


def _beside_profile(name: str, profile: Path) -> str:
    """Return a profile's relative file ``name`` as given if it exists here, else as found above the profile.

    Profiles name files from the project root (``slurm/accelerate/ddp.yaml``); run from elsewhere, the first
    folder above the profile that holds ``name`` is the root. A name found nowhere is returned unchanged
    (the command that opens it names it).
    """
    if Path(name).is_absolute() or Path(name).exists():
        return name
    for folder in profile.resolve().parents:
        if (folder / name).is_file():
            return str(folder / name)
    return name


def shell_join(command: list[str]) -> str:
    """Return a command list as one shell-quoted line."""
    return shlex.join(command)
