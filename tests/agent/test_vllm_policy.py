"""VLLMPolicy's request/response handling against a fake engine (CI has no GPU and no vLLM).

The engine is replaced by an object with vLLM's ``generate`` shape; what is tested is our code around it:
the sampling options sent, stop handling, logprob extraction and ARPO's top-k entropy estimate.
"""

import math
import types

import pytest

from star_lib.agent.policies import SamplingParams, VLLMPolicy
from star_lib.train.arpo import EntropyVLLMPolicy


class _Logprob:
    def __init__(self, value: float) -> None:
        self.logprob = value


class _Engine:
    def __init__(self) -> None:
        self.params: dict = {}

    def generate(self, prompts, params, use_tqdm=False):
        self.params = params
        completion = types.SimpleNamespace(
            token_ids=[5, 6, 9],
            logprobs=[{5: _Logprob(-0.1), 7: _Logprob(-2.0)}, {6: _Logprob(-0.2)}, {9: _Logprob(-0.01)}],
        )
        return [types.SimpleNamespace(outputs=[completion]) for _ in prompts]


class _Tokenizer:
    def decode(self, ids, skip_special_tokens=False):
        return " ".join(str(i) for i in ids)


def _policy(cls, **attrs):
    policy = object.__new__(cls)  # skip __init__, which imports vLLM
    engine = _Engine()
    policy.__dict__.update(
        _vllm=types.SimpleNamespace(SamplingParams=lambda **kw: kw), llm=engine, tokenizer=_Tokenizer(),
        sampling=SamplingParams(temperature=0.7, seed=3), stop_ids=[9], _calls=0, **attrs,
    )
    return policy, engine


def test_vllm_policy_sends_sampled_logprobs_only_and_strips_the_stop_token():
    policy, engine = _policy(VLLMPolicy)
    gen = policy.generate([types.SimpleNamespace(prompt_ids=[1, 2])], max_new_tokens=8)[0]
    assert engine.params["logprobs"] == 0 and engine.params["max_tokens"] == 8
    assert engine.params["temperature"] == 0.7 and engine.params["seed"] == 3
    assert gen.text == "5 6" and gen.token_ids == [5, 6, 9] and gen.finish_reason == "stop"
    assert gen.logprobs == [-0.1, -0.2, -0.01]


def test_vllm_entropy_policy_asks_top_k_and_estimates_entropy_per_step():
    policy, engine = _policy(EntropyVLLMPolicy, top_logprobs=20)
    gen = policy.generate([types.SimpleNamespace(prompt_ids=[1])], max_new_tokens=4)[0]
    assert engine.params["logprobs"] == 20
    assert gen.entropies[0] > gen.entropies[2] and gen.entropies[2] == pytest.approx(0.0, abs=1e-6)
    assert gen.logprobs[0] == pytest.approx(-0.1) and not math.isnan(gen.logprobs[1])
