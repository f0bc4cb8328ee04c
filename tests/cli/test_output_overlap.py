"""Every ``star`` command that writes refuses an output that is, lies inside or holds one of its inputs.

One table: for each writing command, an output equal to an input, an output inside an input folder and an
input inside the output folder. Each must end before any work as one line on stderr naming both options,
exit code 2, with every file under ``tmp_path`` byte-identical and nothing new written. ``star world synth``
reads nothing, so it has no row.
"""

from __future__ import annotations

import hashlib
import shutil
from collections.abc import Callable
from pathlib import Path

import pytest

from star_lib.cli import main

ROOT = Path(__file__).resolve().parents[2]
TRAIN = Path("/work/shared/data/travelplanner/train.jsonl")
QUERY = '{"idx": 0, "query": "a 3-day trip", "org": "A", "dest": "B", "days": 3, "level": "easy"}\n'

Case = Callable[[Path], tuple[list[str], str, str]]
"""Given an empty folder: lay out the inputs, return (argv, the input option, the output option)."""


def put(path: Path, text: str = "x\n") -> Path:
    """Write ``text`` to ``path`` (its folders made); return it."""
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    return path


def folder(path: Path) -> Path:
    """A folder holding one small file (a database, a model, a notebook folder)."""
    put(path / "clean_Flights_2022.csv", "Flight Number,Price\nF1,100\n")
    return path


def queries(path: Path) -> Path:
    """A query file: the first official train record when the shared data is here, else a small one."""
    text = TRAIN.open().readline() if TRAIN.is_file() else QUERY
    return put(path, text)


def experiment(path: Path) -> Path:
    """An experiment YAML that loads (two cheap stages)."""
    return put(path, "name: t\nstages: [world, synth]\n")


def grid_yaml(path: Path) -> Path:
    """A grid YAML of one run (grid name ``g``)."""
    return put(path, "name: g\nbase: learning-signal\naxes:\n  reward: [sum]\nseeds: [0]\nfinding: reward\n")


def rl_yaml(path: Path, data: Path, model: Path) -> Path:
    """An RL config whose required fields are set (the output comes from ``--out``)."""
    return put(path, f"data: {data}\nmodel_path: {model}\nmax_steps: 1\n")


def _eval(t: Path, per_plan: Path, option: str = "--per-plan") -> list[str]:
    q, plans, db = queries(t / "q.jsonl"), put(t / "plans.jsonl", '{"plan": []}\n'), folder(t / "db")
    return ["eval", "--queries", str(q), "--plans", str(plans), "--db", str(db), option, str(per_plan)]


def _teacher(t: Path, q: Path, world: Path, out: Path) -> list[str]:
    return ["teacher", "--queries", str(q), "--world", str(world), "--out", str(out), "--no-progress"]


def _rollout(t: Path, q: Path, world: Path, out: Path) -> list[str]:
    return ["rollout", "--queries", str(q), "--world", str(world), "--model", "tiny", "--out", str(out)]


def _sft(data: Path, out: Path, model: Path | None = None) -> list[str]:
    return ["sft", "--data", str(data), "--out", str(out), *(["--model", str(model)] if model else [])]


def _qa(t: Path, out: Path, corpus: Path | None = None) -> list[str]:
    data, corpus = put(t / "qa" / "nq.jsonl"), corpus or put(t / "corpus.jsonl")
    return [
        "qa-eval",
        "--model",
        "baseline",
        "--data-dir",
        str(data.parent),
        "--corpus",
        str(corpus),
        "--out",
        str(out),
    ]


def _report(notebooks: Path, out: Path) -> list[str]:
    return [
        "report",
        "--notebooks",
        str(notebooks),
        "--results-dir",
        str(notebooks.parent / "r"),
        "--out",
        str(out),
    ]


def _study(t: Path, study_dir: Path, runs: Path) -> list[str]:
    shutil.copytree(ROOT / "configs" / "study", study_dir)
    return [
        "study",
        "--study",
        str(study_dir / "study.yaml"),
        "--only",
        "reward",
        "--runs",
        str(runs),
        "--no-report",
    ]


CASES: dict[str, Case] = {
    # star eval: the verdicts over the queries, the submission over the plans, a verdict file in the database
    "eval-same-queries": lambda t: (_eval(t, t / "q.jsonl"), "--queries", "--per-plan"),
    "eval-same-plans": lambda t: (
        _eval(t, t / "plans.jsonl", "--write-submission"),
        "--plans",
        "--write-submission",
    ),
    "eval-inside-db": lambda t: (_eval(t, t / "db" / "clean_Flights_2022.csv"), "--db", "--per-plan"),
    "eval-inside-db-new": lambda t: (_eval(t, t / "db" / "verdicts.jsonl"), "--db", "--per-plan"),
    # star synth
    "synth-same": lambda t: (
        ["synth", "--world", str(folder(t / "w")), "--out", str(t / "w")],
        "--world",
        "--out",
    ),
    "synth-inside": lambda t: (
        ["synth", "--world", str(folder(t / "w")), "--out", str(t / "w" / "q")],
        "--world",
        "--out",
    ),
    "synth-holds": lambda t: (
        ["synth", "--world", str(folder(t / "o" / "w")), "--out", str(t / "o")],
        "--world",
        "--out",
    ),
    # star teacher: --out D around its own --queries D/train.jsonl
    "teacher-same": lambda t: (
        _teacher(t, queries(t / "q.jsonl"), folder(t / "w"), t / "w"),
        "--world",
        "--out",
    ),
    "teacher-inside": lambda t: (
        _teacher(t, queries(t / "q.jsonl"), folder(t / "w"), t / "w" / "sft"),
        "--world",
        "--out",
    ),
    "teacher-holds": lambda t: (
        _teacher(t, queries(t / "d" / "train.jsonl"), folder(t / "w"), t / "d"),
        "--queries",
        "--out",
    ),
    # star rollout: parquet over the queries
    "rollout-same": lambda t: (
        _rollout(t, queries(t / "q.jsonl"), folder(t / "w"), t / "q.jsonl"),
        "--queries",
        "--out",
    ),
    "rollout-inside": lambda t: (
        _rollout(t, queries(t / "q.jsonl"), folder(t / "w"), t / "w" / "r.parquet"),
        "--world",
        "--out",
    ),
    # star sft
    "sft-same": lambda t: (_sft(folder(t / "d"), t / "d"), "--data", "--out"),
    "sft-inside": lambda t: (
        _sft(queries(t / "q.jsonl"), t / "m" / "run", folder(t / "m")),
        "--model",
        "--out",
    ),
    "sft-holds": lambda t: (_sft(queries(t / "o" / "train.jsonl"), t / "o"), "--data", "--out"),
    # star rl
    "rl-same": lambda t: (
        [
            "rl",
            "--config",
            str(rl_yaml(t / "rl.yaml", queries(t / "q.jsonl"), folder(t / "m"))),
            "--out",
            str(t / "m"),
        ],
        "--model (model_path)",
        "--out (output_dir)",
    ),
    "rl-inside": lambda t: (
        [
            "rl",
            "--config",
            str(rl_yaml(t / "rl.yaml", folder(t / "d"), folder(t / "m"))),
            "--out",
            str(t / "d" / "r"),
        ],
        "--data (data)",
        "--out (output_dir)",
    ),
    "rl-holds": lambda t: (
        [
            "rl",
            "--config",
            str(rl_yaml(t / "o" / "rl.yaml", queries(t / "q.jsonl"), folder(t / "m"))),
            "--out",
            str(t / "o"),
        ],
        "--config",
        "--out (output_dir)",
    ),
    # star qa-eval
    "qa-same": lambda t: (_qa(t, t / "c.parquet", put(t / "c.parquet")), "--corpus", "--out"),
    "qa-inside": lambda t: (_qa(t, t / "qa" / "qa.parquet"), "--data-dir", "--out"),
    # star report
    "report-same": lambda t: (_report(folder(t / "nb"), t / "nb"), "--notebooks", "--out"),
    "report-inside": lambda t: (_report(folder(t / "nb"), t / "nb" / "rep"), "--notebooks", "--out"),
    "report-holds": lambda t: (_report(folder(t / "o" / "nb"), t / "o"), "--notebooks", "--out"),
    # star run / run-grid / submit / pipeline: the run (or grid) folder around its own config
    "run-same-cache": lambda t: (
        ["run", str(experiment(t / "e.yaml")), "--runs", str(t / "r"), "--cache", str(t / "e.yaml")],
        "CONFIG",
        "--cache",
    ),
    "run-holds": lambda t: (
        ["run", str(experiment(t / "r" / "adhoc" / "t" / "config.yaml")), "--runs", str(t / "r")],
        "CONFIG",
        "--runs (the run folder)",
    ),
    "run-publish-holds": lambda t: (
        [
            "run",
            str(experiment(t / "p" / "adhoc" / "t" / "e.yaml")),
            "--runs",
            str(t / "r"),
            "--publish",
            str(t / "p"),
        ],
        "CONFIG",
        "--publish",
    ),
    "run-grid-same-cache": lambda t: (
        ["run-grid", str(grid_yaml(t / "g.yaml")), "--runs", str(t / "r"), "--cache", str(t / "g.yaml")],
        "GRID",
        "--cache",
    ),
    "run-grid-holds": lambda t: (
        ["run-grid", str(grid_yaml(t / "r" / "g" / "grid.yaml")), "--runs", str(t / "r")],
        "GRID",
        "--runs (the grid folder)",
    ),
    "submit-holds": lambda t: (
        [
            "submit",
            str(grid_yaml(t / "r" / "g" / "grid.yaml")),
            "--runs",
            str(t / "r"),
            "--cluster",
            str(ROOT / "slurm" / "local.yaml"),
        ],
        "GRID",
        "--runs (the grid folder)",
    ),
    "submit-cluster-inside": lambda t: (
        [
            "submit",
            str(grid_yaml(t / "g.yaml")),
            "--runs",
            str(t / "c"),
            "--cluster",
            str(put(t / "c" / "g" / "p.yaml", (ROOT / "slurm" / "local.yaml").read_text())),
        ],
        "--cluster",
        "--runs (the grid folder)",
    ),
    "pipeline-holds": lambda t: (
        [
            "pipeline",
            "--config",
            str(experiment(t / "r" / "learning-signal" / "t__s0" / "e.yaml")),
            "--runs",
            str(t / "r"),
        ],
        "--config",
        "--runs (the run folder)",
    ),
    # star study: the runs folder around the study file
    "study-holds": lambda t: (_study(t, t / "r" / "study", t / "r"), "--study", "--runs"),
    "study-out-holds": lambda t: (
        [*_study(t, t / "o" / "study", t / "r"), "--out", str(t / "o")],
        "--study",
        "--out",
    ),
    # star demo: the reports read the runs
    "demo-same": lambda t: (
        ["demo", "--runs", str(folder(t / "r")), "--reports", str(t / "r")],
        "--runs",
        "--reports",
    ),
    "demo-inside": lambda t: (
        ["demo", "--runs", str(folder(t / "r")), "--reports", str(t / "r" / "rep")],
        "--runs",
        "--reports",
    ),
}


def snapshot(root: Path) -> dict[str, str]:
    """Every file under ``root`` → the SHA-256 of its bytes (lock and temporary files included)."""
    return {
        str(p.relative_to(root)): hashlib.sha256(p.read_bytes()).hexdigest()
        for p in root.rglob("*")
        if p.is_file()
    }


@pytest.mark.parametrize("name", sorted(CASES))
def test_output_overlapping_an_input_is_refused_before_any_work(name, tmp_path, monkeypatch, capsys):
    cwd = tmp_path / "cwd"
    cwd.mkdir()
    monkeypatch.chdir(cwd)
    argv, source, target = CASES[name](tmp_path / "t")
    before = snapshot(tmp_path)
    assert main(argv) == 2
    err = capsys.readouterr().err
    lines = err.splitlines()
    assert len(lines) == 1, err
    command = argv[0]
    assert lines[0].startswith(f"star {command}: error: {target} "), err
    assert f"the {source} input" in lines[0], err
    assert snapshot(tmp_path) == before  # inputs byte-identical, nothing new written


def test_run_grid_name_that_leaves_the_runs_folder_is_refused(tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    config = experiment(tmp_path / "e.yaml")
    for grid in ("../../x", "..", "a/b"):
        assert main(["run", str(config), "--runs", str(tmp_path / "runs"), "--grid", grid]) == 2
        err = capsys.readouterr().err
        assert err.startswith(f"star run: error: --grid {grid!r} is not a grid name"), err
        assert len(err.splitlines()) == 1
    assert sorted(p.name for p in tmp_path.iterdir()) == ["e.yaml"]


def test_run_name_of_only_dots_is_refused(tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    config = put(tmp_path / "e.yaml", "name: '..'\nstages: [world, synth]\n")
    assert main(["run", str(config), "--runs", str(tmp_path / "runs")]) == 2
    err = capsys.readouterr().err
    assert "name: '..' is not allowed" in err and len(err.splitlines()) == 1, err
    assert not (tmp_path / "runs").exists()
