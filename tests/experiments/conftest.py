"""A real single-node Slurm cluster for the ``slurm`` tests (../shared/STACK.md, "A real Slurm cluster").

Started once per session, only when a test asks for ``slurm_cluster``: munged (as user ``munge``, socket in
``/run/munge``), MariaDB (``--bind-address=127.0.0.1``) + slurmdbd for accounting (submitit learns job
states from ``sacct``; without accounting a cancelled job stays UNKNOWN forever), slurmctld and slurmd, all
state in a temporary folder. Partitions ``a100`` (default) and ``debug``. Every daemon is stopped by PID at
the end, also when a test or the start-up fails. The Debian packages come from
``scripts/install_debian_packages.sh slurm``.
"""

from __future__ import annotations

import os
import shutil
import signal
import socket
import subprocess
import tempfile
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import pytest

DAEMONS = ("munged", "mariadbd", "mariadb-install-db", "slurmdbd", "slurmctld", "slurmd", "sbatch", "sacct")
MUNGE_DIR = Path("/run/munge")


@pytest.fixture(autouse=True)
def _one_eval_process(monkeypatch):
    """Each test starts with one eval process; what `star study`/`star run` set for their runs is undone."""
    monkeypatch.setenv("STAR_EVAL_PROCESSES", "1")


@dataclass
class SlurmCluster:
    """Handles of the running cluster."""

    root: Path
    conf: Path
    host: str
    procs: dict[str, subprocess.Popen] = field(default_factory=dict)

    @property
    def env(self) -> dict[str, str]:
        return {**os.environ, "SLURM_CONF": str(self.conf)}

    def run(self, *cmd: str, check: bool = True) -> str:
        """Run a Slurm client command against this cluster; returns stdout."""
        return subprocess.run(
            cmd, env=self.env, capture_output=True, text=True, check=check, timeout=60
        ).stdout

    def logs(self) -> str:
        """Tail of every daemon log (for failure messages)."""
        out = []
        for log in sorted(self.root.glob("*.log")) + sorted(self.root.glob("*.out")):
            lines = log.read_text(errors="replace").splitlines()[-15:]
            out.append(f"--- {log.name}\n" + "\n".join(lines))
        return "\n".join(out)


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _wait(predicate, timeout: float, what: str, cluster: SlurmCluster) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():
            return
        for name, proc in cluster.procs.items():
            if proc.poll() is not None:
                raise RuntimeError(
                    f"{name} exited with {proc.returncode} while waiting for {what}\n{cluster.logs()}"
                )
        time.sleep(0.1)
    raise RuntimeError(f"timed out waiting for {what}\n{cluster.logs()}")


def _port_open(port: int) -> bool:
    try:
        socket.create_connection(("127.0.0.1", port), timeout=0.2).close()
        return True
    except OSError:
        return False


def _munge_works() -> bool:
    try:
        cred = subprocess.run(["munge", "-n"], capture_output=True, timeout=5, check=True).stdout
        return subprocess.run(["unmunge"], input=cred, capture_output=True, timeout=5).returncode == 0
    except (OSError, subprocess.SubprocessError):
        return False


def _spawn(cluster: SlurmCluster, name: str, cmd: list[str], **kwargs) -> None:
    log = open(cluster.root / f"{name}.out", "w")
    cluster.procs[name] = subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT, **kwargs)


def _write_configs(cluster: SlurmCluster, ports: dict[str, int]) -> None:
    root, host = cluster.root, cluster.host
    dbd = root / "slurmdbd.conf"
    dbd.write_text(
        "\n".join(
            [
                "AuthType=auth/munge",
                f"DbdHost={host}",
                f"DbdPort={ports['dbd']}",
                "SlurmUser=root",
                "StorageType=accounting_storage/mysql",
                "StorageHost=127.0.0.1",
                f"StoragePort={ports['db']}",
                "StorageUser=root",
                "StorageLoc=slurm_acct_db",
                f"PidFile={root}/slurmdbd.pid",
                f"LogFile={root}/slurmdbd.log",
                "",
            ]
        )
    )
    dbd.chmod(0o600)
    for sub in ("state", "spool"):
        (root / sub).mkdir()
    cluster.conf.write_text(
        "\n".join(
            [
                "ClusterName=starlab",
                f"SlurmctldHost={host}",
                f"SlurmctldPort={ports['ctld']}",
                f"SlurmdPort={ports['d']}",
                "SlurmUser=root",
                "AuthType=auth/munge",
                "AuthInfo=cred_expire=30",
                "ProctrackType=proctrack/linuxproc",
                "TaskPlugin=task/none",
                "SelectType=select/cons_tres",
                "SelectTypeParameters=CR_Core_Memory",
                "JobAcctGatherType=jobacct_gather/none",
                "AccountingStorageType=accounting_storage/slurmdbd",
                f"AccountingStorageHost={host}",
                f"AccountingStoragePort={ports['dbd']}",
                "MpiDefault=none",
                "MailProg=/bin/true",
                "ReturnToService=2",
                "KillWait=5",
                "SchedulerParameters=batch_sched_delay=0,sched_interval=2,bf_interval=1",
                f"StateSaveLocation={root}/state",
                f"SlurmdSpoolDir={root}/spool",
                f"SlurmctldPidFile={root}/slurmctld.pid",
                f"SlurmdPidFile={root}/slurmd.pid",
                f"SlurmctldLogFile={root}/slurmctld.log",
                f"SlurmdLogFile={root}/slurmd.log",
                f"NodeName={host} CPUs=2 RealMemory=20000 State=UNKNOWN",
                f"PartitionName=a100 Nodes={host} Default=YES MaxTime=INFINITE State=UP",
                f"PartitionName=debug Nodes={host} MaxTime=INFINITE State=UP",
                "",
            ]
        )
    )


def _start(cluster: SlurmCluster) -> None:
    root = cluster.root
    if not _munge_works():
        MUNGE_DIR.mkdir(exist_ok=True)
        shutil.chown(MUNGE_DIR, "munge", "munge")
        MUNGE_DIR.chmod(0o755)
        _spawn(cluster, "munged", ["munged", "--foreground", "--force"], user="munge", group="munge")
        _wait(_munge_works, 15, "munged", cluster)
    db = root / "mysql"
    subprocess.run(
        [
            "mariadb-install-db",
            "--no-defaults",
            f"--datadir={db}",
            "--user=root",
            "--auth-root-authentication-method=normal",
            "--skip-test-db",
        ],
        check=True,
        capture_output=True,
        timeout=120,
    )
    ports = {"db": _free_port(), "dbd": _free_port(), "ctld": _free_port(), "d": _free_port()}
    _spawn(
        cluster,
        "mariadbd",
        [
            "mariadbd",
            "--no-defaults",
            f"--datadir={db}",
            f"--socket={root}/mysqld.sock",
            f"--port={ports['db']}",
            "--bind-address=127.0.0.1",
            "--user=root",
            f"--pid-file={root}/mysqld.pid",
            "--skip-log-bin",
            "--innodb-buffer-pool-size=32M",
        ],
    )
    _write_configs(cluster, ports)
    _wait(lambda: _port_open(ports["db"]), 60, "mariadbd", cluster)
    _spawn(cluster, "slurmdbd", ["slurmdbd", "-D"], env=cluster.env)
    _wait(lambda: _port_open(ports["dbd"]), 30, "slurmdbd", cluster)
    _spawn(cluster, "slurmctld", ["slurmctld", "-D", "-i"], env=cluster.env)
    _spawn(cluster, "slurmd", ["slurmd", "-D"], env=cluster.env)
    _wait(
        lambda: cluster.run("sinfo", "-h", "-o", "%T", check=False).strip() == "idle",
        60,
        "node idle",
        cluster,
    )


def _our_stepds(cluster: SlurmCluster) -> list[int]:
    """PIDs of slurmstepd processes of this cluster (their environment names our slurm.conf)."""
    pids = []
    marker = f"SLURM_CONF={cluster.conf}".encode()
    for proc in Path("/proc").iterdir():
        if not proc.name.isdigit():
            continue
        try:
            if (proc / "comm").read_text().strip() == "slurmstepd" and marker in (
                proc / "environ"
            ).read_bytes():
                pids.append(int(proc.name))
        except OSError:
            continue
    return pids


def _drain(cluster: SlurmCluster) -> None:
    """Cancel the jobs tests left behind, wait for their step daemons to end (kill stragglers by PID)."""
    if cluster.procs.get("slurmctld") is None or cluster.procs["slurmctld"].poll() is not None:
        return
    jobs = cluster.run("squeue", "-h", "-o", "%i", check=False).split()
    if jobs:
        cluster.run("scancel", *jobs, check=False)
    deadline = time.monotonic() + 20
    while time.monotonic() < deadline and (
        cluster.run("squeue", "-h", "-o", "%i", check=False).strip() or _our_stepds(cluster)
    ):
        time.sleep(0.2)
    for pid in _our_stepds(cluster):
        os.kill(pid, signal.SIGKILL)


def _stop(cluster: SlurmCluster) -> None:
    """Stop every daemon we started, by PID, newest first (after draining the jobs)."""
    _drain(cluster)
    for name in reversed(list(cluster.procs)):
        proc = cluster.procs[name]
        if proc.poll() is None:
            proc.send_signal(signal.SIGTERM)
    for name in reversed(list(cluster.procs)):
        proc = cluster.procs[name]
        try:
            proc.wait(timeout=15)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(timeout=5)


@pytest.fixture(scope="session")
def slurm_cluster() -> Iterator[SlurmCluster]:
    """A running single-node Slurm cluster with accounting; ``SLURM_CONF`` points at it for the session."""
    missing = [d for d in DAEMONS if shutil.which(d) is None]
    if missing:
        message = f"Slurm test cluster needs {missing}: run scripts/install_debian_packages.sh slurm as root"
        if os.environ.get("CI"):
            pytest.fail(message)
        pytest.skip(message)
    if os.geteuid() != 0:
        pytest.skip("the Slurm test cluster runs its daemons as root")
    root = Path(tempfile.mkdtemp(prefix="star-slurm-"))
    cluster = SlurmCluster(root=root, conf=root / "slurm.conf", host=socket.gethostname().split(".")[0])
    previous = os.environ.get("SLURM_CONF")
    try:
        _start(cluster)
        os.environ["SLURM_CONF"] = str(cluster.conf)
        yield cluster
    finally:
        _stop(cluster)
        if previous is None:
            os.environ.pop("SLURM_CONF", None)
        else:
            os.environ["SLURM_CONF"] = previous
        shutil.rmtree(root, ignore_errors=True)


@pytest.fixture
def training_experiment() -> dict:
    """An experiment through every training stage for a few steps (seconds on 2 cores).

    The SFT stage checkpoints every step so a stopped job has something to resume from.
    """
    return {
        "rl_data_size": 8,
        "world": {"scale": "small"},
        "synth": {"n_base": 30},
        "stages": ["world", "synth", "teacher", "sft", "rl", "eval"],
        "sft": {"max_steps": 6, "logging_steps": 1, "save_steps": 1, "save_total_limit": None},
        "rl": {
            "max_steps": 4,
            "save_steps": 1,
            "num_generations": 2,
            "prompts_per_step": 1,
            "max_turns": 2,
            "max_new_tokens": 32,
            "rollouts_per_step": 1,
        },
        "eval": {"max_queries": 2, "max_turns": 30, "max_new_tokens": 32},  # room for the expert
    }


@pytest.fixture
def wait_for():
    """``wait_for(predicate, timeout, what)``: poll until ``predicate()`` holds; fail naming ``what``."""
    return _wait_for


def _wait_for(predicate, timeout: float, what: str) -> None:
    deadline = time.monotonic() + timeout
    while not predicate():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout} s waiting for {what}")
        time.sleep(0.05)


@pytest.fixture
def stable_metrics():
    """``stable_metrics(run_dir)``: a run's metrics rows without clock readings and costs."""
    return _stable_metrics


@pytest.fixture
def same_metrics():
    """``same_metrics(got, expected)``: the same rows, values equal to 1e-5 relative.

    Two processes computing the same stage can differ in the seventh digit (the CPU kernels' vector paths
    depend on how buffers are aligned), so a stage reused from a killed child process is compared to one
    computed in this process to within that, not bit for bit.
    """
    return _assert_same_metrics


def _assert_same_metrics(got: list[dict], expected: list[dict]) -> None:
    def key(row: dict) -> tuple:
        return row["stage"], row["step"] if row["step"] is not None else -1, row["metric"]

    got, expected = sorted(got, key=key), sorted(expected, key=key)
    assert [key(r) for r in got] == [key(r) for r in expected]

    def values(rows: list[dict]) -> list[float]:
        return [float("nan") if r["value"] is None else r["value"] for r in rows]

    assert values(got) == pytest.approx(values(expected), rel=1e-5, abs=1e-9, nan_ok=True)


def _stable_metrics(run_dir: Path) -> list[dict]:
    """A run's metrics rows without clock readings and costs (what a resumed run must reproduce)."""
    import polars as pl

    clock = ("time", "runtime", "per_second", "seconds", "cost/")
    frame = pl.read_parquet(run_dir / "metrics.parquet")
    stable = frame.filter(~pl.any_horizontal(pl.col("metric").str.contains(c, literal=True) for c in clock))
    return stable.sort("stage", "step", "metric", "value", nulls_last=True).to_dicts()
