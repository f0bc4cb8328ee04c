"""The eval stage with ``policy: vllm`` (the paper grids' evaluation, issue 20 defect 6) against a stand-in
engine: CI has no GPU and no vLLM, so what is tested is our side of it — the engine each model gets, the
paper's decoding sent with every request, and each engine shut down before the next one starts."""

from __future__ import annotations

import sys
import types

import polars as pl
import pytest

from star_lib.experiments.config import ExperimentConfig
from star_lib.experiments.runner import run_experiment


class _Engine:
    """A ``vllm.LLM`` stand-in: every turn answers one line of text (no tool call, so episodes end early)."""

    live: list[_Engine] = []
    events: list[tuple[str, str, dict]] = []

    def __init__(self, model: str, **kwargs) -> None:
        from transformers import AutoTokenizer

        assert not _Engine.live, "a second engine started while the first still held the GPU"
        _Engine.live.append(self)
        _Engine.events.append(("start", model, kwargs))
        self.model = model
        self.tokenizer = AutoTokenizer.from_pretrained(model)
        self.sampling: list[dict] = []

    def get_tokenizer(self):
        return self.tokenizer

    def generate(self, prompts, params, use_tqdm=False):
        params = params if isinstance(params, list) else [params] * len(prompts)
        self.sampling += params
        ids = self.tokenizer.encode("I have no plan.", add_special_tokens=False)
        ids.append(self.tokenizer.eos_token_id)
        completion = types.SimpleNamespace(token_ids=ids, logprobs=None)
        return [types.SimpleNamespace(outputs=[completion]) for _ in prompts]

    def shutdown(self) -> None:
        _Engine.live.remove(self)
        last = self.sampling[-1] if self.sampling else {}
        _Engine.events.append(("shutdown", self.model, {"requests": len(self.sampling), **last}))


@pytest.fixture
def fake_vllm(monkeypatch):
    from trl import SFTTrainer  # noqa: F401  (TRL probes for vLLM when imported: before the stand-in)

    module = types.SimpleNamespace(LLM=_Engine, SamplingParams=lambda **kw: kw)
    monkeypatch.setitem(sys.modules, "vllm", module)
    _Engine.live.clear()
    _Engine.events.clear()
    return module


def test_a_vllm_evaluation_starts_one_engine_per_model_with_the_papers_decoding_and_frees_each(
    tmp_path, fake_vllm
):
    config = ExperimentConfig.from_dict(
        {
            "model": "tiny-s",
            "stages": ["world", "synth", "teacher", "sft", "eval"],
            "rl_data_size": 10,
            "synth": {"n_base": 30},
            "sft": {"max_steps": 1},
            "eval": {
                "models": ["base", "sft"],
                "policy": "vllm",
                "vllm": {"dtype": "bfloat16", "gpu_memory_utilization": 0.85},
                "temperature": 0.6,
                "top_p": 0.95,
                "max_queries": 3,
                "max_turns": 8,
                "max_context_tokens": 3000,
            },
        }
    )
    result = run_experiment(config, tmp_path / "g" / "run")
    assert result.status == "done", result.error
    starts = [e for e in _Engine.events if e[0] == "start"]
    assert [e[0] for e in _Engine.events] == ["start", "shutdown"] * 2 and not _Engine.live
    assert [m.rsplit("/", 1)[-1] for _, m, _ in starts] == ["base", "model"]  # the base, then the SFT model
    for _, _, kwargs in starts:
        assert kwargs["max_model_len"] == 3000 and kwargs["seed"] == config.seed
        assert kwargs["dtype"] == "bfloat16" and kwargs["gpu_memory_utilization"] == 0.85
    for _, _, last in (e for e in _Engine.events if e[0] == "shutdown"):
        assert last["requests"] >= 3 and last["temperature"] == 0.6 and last["top_p"] == 0.95
        assert last["max_tokens"] <= 3000
    metrics = pl.read_parquet(tmp_path / "g" / "run" / "metrics.parquet")
    names = set(metrics["metric"])
    assert {"eval/final_pass", "eval/base/final_pass", "eval/sft/final_pass"} <= names
