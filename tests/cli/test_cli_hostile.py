"""Hostile command lines (issue 22): each is refused in one line naming the option, before any output."""

from __future__ import annotations

import importlib.util
import json
import os
import sys
from pathlib import Path

import pytest

from star_lib.cli import main

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "train"))
from conftest import ROUTES, conversation  # noqa: E402


def _refused(capsys: pytest.CaptureFixture[str], command: str, *words: str) -> None:
    """The captured run printed nothing on stdout and exactly one error line naming ``words``."""
    captured = capsys.readouterr()
    lines = captured.err.strip().splitlines()
    assert len(lines) == 1 and "Traceback" not in captured.err, captured.err
    assert lines[0].startswith(f"star {command}: error: "), lines[0]
    for word in words:
        assert word in lines[0], lines[0]
    assert captured.out == "", captured.out


@pytest.fixture
def sft_data(tmp_path: Path) -> Path:
    data = tmp_path / "sft.jsonl"
    data.write_text("".join(json.dumps(conversation(o, d, f, 16)) + "\n" for o, d, f in ROUTES))
    return data


def _sft(data: Path, out: Path, *extra: str) -> list[str]:
    # bounded, so that a value the command wrongly accepts trains for a step, not for minutes
    return ["sft", "--data", str(data), "--out", str(out), "--max-steps", "1", "--vocab-size", "400", *extra]


@pytest.mark.parametrize(
    ("flag", "value"),
    [("--jobs", "0"), ("--jobs", "-1"), ("--eval-processes", "0")],
)
def test_study_refuses_a_count_below_one(capsys: pytest.CaptureFixture[str], flag: str, value: str) -> None:
    assert main(["study", "--dry-run", flag, value]) == 2
    _refused(capsys, "study", flag, ">= 1")


def _qa_inputs(tmp_path: Path) -> list[str]:
    (tmp_path / "qa").mkdir()
    (tmp_path / "qa" / "nq.jsonl").write_text('{"question": "q?", "golden_answers": ["a"]}\n')
    (tmp_path / "corpus.jsonl").write_text('{"id": "0", "contents": "t\\na passage"}\n')
    return ["--data-dir", str(tmp_path / "qa"), "--corpus", str(tmp_path / "corpus.jsonl")]


def test_qa_eval_refuses_a_missing_model_folder_before_any_output(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "out" / "qa.parquet"
    argv = ["qa-eval", "--model", str(tmp_path / "none"), *_qa_inputs(tmp_path), "--out", str(out)]
    assert main(argv) == 2
    _refused(capsys, "qa-eval", "--model", "does not exist")
    assert not out.parent.exists()


@pytest.mark.skipif(
    importlib.util.find_spec("sentence_transformers") is not None, reason="sentence-transformers is installed"
)
@pytest.mark.parametrize("dense_model", [None, "some-model"])
def test_qa_eval_dense_retriever_names_the_package_to_install_before_any_output(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], dense_model: str | None
) -> None:
    out = tmp_path / "out" / "qa.parquet"
    argv = [
        "qa-eval",
        "--model",
        "baseline",
        *_qa_inputs(tmp_path),
        "--out",
        str(out),
        "--retriever",
        "dense",
    ]
    assert main(argv + (["--dense-model", dense_model] if dense_model else [])) == 2
    _refused(capsys, "qa-eval", "--retriever dense", "pip install sentence-transformers")
    assert not out.parent.exists()


@pytest.mark.parametrize(
    ("flag", "value"),
    [("--epochs", "inf"), ("--lr", "inf"), ("--lr", "nan"), ("--time-budget", "-5"), ("--epochs", "0")],
)
def test_sft_refuses_a_non_finite_or_non_positive_number_before_any_output(
    tmp_path: Path, sft_data: Path, capsys: pytest.CaptureFixture[str], flag: str, value: str
) -> None:
    out = tmp_path / "run"
    argv = _sft(sft_data, out, flag, value)
    if flag == "--epochs":
        argv.remove("--max-steps")
        argv.remove("1")  # epochs count only without --max-steps
    assert main(argv) == 2
    _refused(capsys, "sft", flag, repr(value))
    assert not out.exists()


def test_sft_refuses_a_missing_model_folder_before_writing_config(
    tmp_path: Path, sft_data: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "run"
    assert main(_sft(sft_data, out, "--model", str(tmp_path / "none"))) == 2
    _refused(capsys, "sft", "--model", "does not exist")
    assert not out.exists()


def test_sft_refuses_a_hub_preset_this_machine_cannot_load_before_writing_config(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], sft_data: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("HF_HOME", str(tmp_path / "empty-hf-home"))  # nothing cached
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")  # and no hub: as on a cluster node without internet
    monkeypatch.delenv("STAR_MODELS_DIR", raising=False)
    out = tmp_path / "run"
    assert main(_sft(sft_data, out, "--preset", "qwen2.5-1.5b", "--no-bf16")) == 2
    _refused(
        capsys, "sft", "--preset qwen2.5-1.5b", "Qwen/Qwen2.5-1.5B-Instruct", "STAR_MODELS_DIR", "--model"
    )
    assert not out.exists()


def test_sft_refuses_bf16_on_a_cpu_without_it_before_writing_the_base_model(
    tmp_path: Path, sft_data: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    import torch

    import star_lib.train.models as models

    if torch.cuda.is_available():
        pytest.skip("bf16 is refused only on a CPU")
    monkeypatch.setattr(models, "cpu_has_native_bf16", lambda: False)  # this CPU, like an AVX2 laptop's
    out = tmp_path / "run"
    assert main(_sft(sft_data, out, "--bf16")) == 2
    _refused(capsys, "sft", "--bf16", "--no-bf16")
    assert not out.exists()


@pytest.fixture
def loop(tmp_path: Path) -> Path:
    """``a -> b -> a``: a symbolic link loop."""
    (tmp_path / "a").symlink_to(tmp_path / "b")
    (tmp_path / "b").symlink_to(tmp_path / "a")
    return tmp_path / "a"


@pytest.mark.parametrize(
    ("command", "below"),
    [
        ("sft", ""),
        ("sft", "run"),
        ("synth", ""),
        ("world synth", "w"),
        ("qa-eval", "q.parquet"),
        ("report", ""),
    ],
)
def test_an_out_on_a_symlink_loop_is_refused_naming_it(
    tmp_path: Path,
    sft_data: Path,
    loop: Path,
    capsys: pytest.CaptureFixture[str],
    command: str,
    below: str,
) -> None:
    out = str(loop / below) if below else str(loop)
    argv = {
        "sft": ["sft", "--data", str(sft_data)],
        "synth": ["synth", "--world", "synthetic:tiny:0", "--n", "2"],
        "world synth": ["world", "synth", "--scale", "tiny"],
        "qa-eval": ["qa-eval", "--model", "baseline", *_qa_inputs(tmp_path)] if command == "qa-eval" else [],
        "report": ["report"],
    }[command]
    assert main([*argv, "--out", out]) == 2
    _refused(capsys, command, f"--out {out}", "symbolic link loop")


def test_demo_refuses_an_unknown_stage_before_it_starts(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    runs, reports = tmp_path / "runs", tmp_path / "reports"
    argv = ["demo", "--stages", "world,bogus", "--no-pipeline", "--no-report"]
    assert main([*argv, "--runs", str(runs), "--reports", str(reports)]) == 2
    _refused(capsys, "demo", "--stages", "bogus")  # and nothing printed: the testbed tour did not start
    assert not runs.exists() and not reports.exists()


@pytest.mark.timeout(60)  # today's main synthesises for days
def test_synth_refuses_an_unbounded_record_count(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "syn"
    argv = [
        "synth",
        "--world",
        "synthetic:tiny:0",
        "--n",
        "99999999999999",
        "--out",
        str(out),
        "--no-progress",
    ]
    assert main(argv) == 2
    _refused(capsys, "synth", "--n", "1,000,000")
    assert not out.exists()


def test_synth_refuses_more_workers_than_cores(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    cores = os.cpu_count() or 1
    out = tmp_path / "syn"
    argv = ["synth", "--world", "synthetic:tiny:0", "--n", "2", "--out", str(out), "--no-progress"]
    assert main([*argv, "--workers", str(cores + 1)]) == 2
    _refused(capsys, "synth", "--workers", f"this machine has {cores} core(s); use at most {cores}")
    assert not out.exists()
