"""Cluster profiles: the shipped YAML files, submitit parameters, and the launch commands of training."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from star_lib.experiments.config import ConfigError
from star_lib.experiments.launch import wants_launcher
from star_lib.experiments.profiles import ClusterProfile, load_profile

SLURM_DIR = Path(__file__).resolve().parents[2] / "slurm"


def test_profiles_shipped_files_load_with_the_papers_resources():
    small = load_profile(SLURM_DIR / "a100-8gpu.yaml")
    big = load_profile(SLURM_DIR / "a100-16gpu-2node.yaml")
    local = load_profile(SLURM_DIR / "local.yaml")
    assert (small.cluster, small.partition, small.nodes, small.gpus_per_node) == ("slurm", "a100", 1, 8)
    assert (big.nodes * big.gpus_per_node, big.launcher) == (16, "accelerate")
    assert (local.cluster, local.gpus_per_node) == ("local", 0)


def test_profiles_executor_parameters_map_onto_submitit():
    profile = ClusterProfile(
        name="p",
        cluster="slurm",
        partition="a100",
        account="lab",
        qos="high",
        nodes=2,
        gpus_per_node=8,
        cpus_per_task=64,
        mem_gb=900,
        timeout_min=60,
        launcher="torchrun",
        additional={"constraint": "a100-80gb"},
    )
    params = profile.executor_parameters("grid")
    assert (
        params["slurm_partition"] == "a100"
        and params["slurm_account"] == "lab"
        and params["slurm_qos"] == "high"
    )
    assert (params["nodes"], params["gpus_per_node"], params["tasks_per_node"]) == (2, 8, 1)
    assert params["slurm_additional_parameters"] == {"constraint": "a100-80gb"}
    local = ClusterProfile().executor_parameters("grid")
    assert not any(k.startswith("slurm_") for k in local) and "gpus_per_node" not in local


def test_profiles_local_executor_accepts_the_parameters(tmp_path):
    executor = ClusterProfile(cluster="local").executor(tmp_path, job_name="t")
    assert type(executor).__name__ == "AutoExecutor"


def test_profiles_reject_unknown_keys_and_bad_values(tmp_path):
    path = tmp_path / "bad.yaml"
    path.write_text("cluster: slurm\npartitoin: a100\n")
    with pytest.raises(ConfigError, match="partitoin"):
        load_profile(path)
    with pytest.raises(ConfigError, match="cluster: 'pbs'"):
        ClusterProfile(cluster="pbs")
    with pytest.raises(ConfigError, match="multi-node profile needs launcher"):
        ClusterProfile(cluster="slurm", nodes=2)
    with pytest.raises(FileNotFoundError, match="slurm/"):
        load_profile(tmp_path / "missing.yaml")


def test_profiles_launch_commands_carry_node_rank_and_rendezvous():
    big = load_profile(SLURM_DIR / "a100-16gpu-2node.yaml")
    env = {"SLURM_JOB_NUM_NODES": "2", "SLURM_NODEID": "1", "MASTER_ADDR": "gpu-017", "MASTER_PORT": "29400"}
    command = big.launch_command("star_lib.experiments.launch", ["rl", "cfg.json"], env)
    launcher = [sys.executable, "-m", "accelerate.commands.launch"]  # this interpreter's, not PATH's
    assert command[:5] == [*launcher, "--config_file", "slurm/accelerate/zero3-2node.yaml"]
    assert "--multi_gpu" not in command  # the ZeRO-3 config file says how to distribute
    for flag in ("--num_machines=2", "--num_processes=16", "--machine_rank=1", "--main_process_ip=gpu-017"):
        assert flag in command
    assert command[-4:] == ["-m", "star_lib.experiments.launch", "rl", "cfg.json"]
    assert (SLURM_DIR.parent / big.accelerate_config).is_file()
    torchrun = ClusterProfile(cluster="slurm", nodes=2, gpus_per_node=8, launcher="torchrun")
    assert torchrun.launch_command("m", [], env)[:6] == [
        sys.executable,
        "-m",
        "torch.distributed.run",
        "--nnodes=2",
        "--nproc_per_node=8",
        "--node_rank=1",
    ]
    small = load_profile(SLURM_DIR / "a100-8gpu.yaml")
    accelerate = small.launch_command("m", [], {"SLURM_NODEID": "0"})
    assert accelerate[:5] == [*launcher, "--config_file", "slurm/accelerate/ddp.yaml"]
    assert "--num_processes=8" in accelerate
    plain = ClusterProfile(cluster="slurm", gpus_per_node=8, launcher="accelerate")
    assert "--multi_gpu" in plain.launch_command("m", [], {})
    with pytest.raises(ConfigError, match="accelerate_config"):
        ClusterProfile(launcher="torchrun", accelerate_config="x.yaml")


def test_profiles_launch_env_switches_training_to_the_launcher():
    env = load_profile(SLURM_DIR / "a100-16gpu-2node.yaml").launch_env()
    job = ClusterProfile.from_launch_env(env)
    assert (job.launcher, job.processes_per_node_or_gpus, job.nodes) == ("accelerate", 8, 2)
    assert wants_launcher(env) and "ACCELERATE_USE_CPU" not in env
    assert not wants_launcher(ClusterProfile().launch_env())
    assert not wants_launcher({})


def test_profiles_a_cpu_profile_with_two_processes_launches_two_gloo_ranks():
    cpu = ClusterProfile(cluster="slurm", processes_per_node=2, launcher="accelerate")
    env = cpu.launch_env()
    assert wants_launcher(env) and env["ACCELERATE_USE_CPU"] == "1"  # --cpu would start one process
    command = ClusterProfile.from_launch_env(env).launch_command("m", [], {})
    assert "--multi_gpu" in command and "--num_processes=2" in command
    assert not wants_launcher(ClusterProfile(cluster="slurm", launcher="accelerate").launch_env())
    with pytest.raises(ConfigError, match="processes_per_node"):
        ClusterProfile(processes_per_node=0)


FULL = "cluster: local\nnodes: 1\ngpus_per_node: 0\ncpus_per_task: 1\nmem_gb: 1\ntimeout_min: 5\n"


@pytest.mark.parametrize(
    ("text", "match"),
    [
        ("", "is empty"),
        ("- cluster: local\n", "holds a list"),
        ("cluster: local\n", r"lacks required key\(s\) \['nodes', 'gpus_per_node'"),
        (FULL.replace("nodes: 1", "nodes: two"), "nodes: 'two'"),
        (FULL + "setup: module load cuda\n", "setup: 'module load cuda'"),
        (FULL + "setup: [1, 2]\n", "setup"),
        (FULL + "partition: 5\n", "partition: 5"),
        (FULL.replace("mem_gb: 1", "mem_gb: true"), "mem_gb: True"),
        (FULL.replace("mem_gb: 1", "mem_gb: .inf"), "mem_gb: inf"),
        (FULL + "additional: [a]\n", "additional"),
        (FULL + "max_num_timeout: -1\n", "max_num_timeout: -1"),
        (FULL + "name: [x]\n", "name: \\['x'\\]"),
    ],
)
def test_profiles_must_set_required_keys_with_the_right_types(tmp_path, text, match):
    """Issue 12 item 4: an empty or partial profile is refused instead of launching jobs on defaults."""
    path = tmp_path / "p.yaml"
    path.write_text(text)
    with pytest.raises(ConfigError, match=match) as info:
        load_profile(path)
    assert str(path) in str(info.value)


def test_profiles_the_shipped_ones_are_complete():
    for path in sorted(SLURM_DIR.glob("*.yaml")):
        assert load_profile(path).name == path.stem


def test_submit_with_an_empty_profile_submits_nothing(tmp_path, capsys):
    from star_lib.cli import main

    (tmp_path / "empty.yaml").write_text("")
    runs = tmp_path / "runs"
    assert (
        main(["submit", "reward-tiny", "--cluster", str(tmp_path / "empty.yaml"), "--runs", str(runs)]) == 2
    )
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "empty.yaml" in err and "is empty" in err
    assert not runs.exists()  # no grid folder, no run folder, no job
