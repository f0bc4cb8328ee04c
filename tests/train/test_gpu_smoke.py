from __future__ import annotations

import importlib.util
import json
from pathlib import Path

import pytest

SCRIPT = Path(__file__).resolve().parents[2] / "benchmarks" / "gpu_smoke.py"


def load_smoke():
    spec = importlib.util.spec_from_file_location("gpu_smoke", SCRIPT)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_gpu_smoke_says_what_is_missing_and_exits_2(capsys, monkeypatch):
    import torch

    smoke = load_smoke()
    if torch.cuda.is_available():
        monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    assert smoke.main([]) == 2
    captured = capsys.readouterr()
    assert json.loads(captured.out.strip().splitlines()[-1]) == {
        "skipped": captured.err.split("— ", 1)[1].strip()
    }
    assert "no CUDA GPU" in captured.err


def test_gpu_smoke_subprocesses_get_the_callers_flags():
    smoke = load_smoke()
    argv = ["--steps", "3", "--out", "/x", "--algorithms=grpo", "--group", "2"]
    assert smoke._forwarded(argv) == ["--steps", "3", "--group", "2"]


@pytest.mark.gpu
def test_gpu_smoke_runs_every_algorithm_on_a_gpu(tmp_path):
    torch = pytest.importorskip("torch")
    pytest.importorskip("vllm")
    if not torch.cuda.is_available():
        pytest.skip("needs a CUDA GPU")
    smoke = load_smoke()
    try:
        smoke.local_model(None)
    except smoke.SmokeUnavailable as exc:
        pytest.skip(str(exc))
    assert smoke.main(["--out", str(tmp_path), "--steps", "2"]) == 0
