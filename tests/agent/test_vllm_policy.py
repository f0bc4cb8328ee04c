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


# ───────────────────────────── TRL's colocated engine: sleep mode and TP groups ─────────────────────────────


class _SleepyEngine(_Engine):
    """An engine that records wake/sleep calls and fails when asked to generate while its KV cache sleeps."""

    def __init__(self) -> None:
        super().__init__()
        self.events: list[str] = []
        self.kv_awake = False

    def wake_up(self, tags=None):
        self.events.append(f"wake:{','.join(tags)}")
        self.kv_awake = self.kv_awake or "kv_cache" in tags

    def sleep(self, level=1):
        self.events.append(f"sleep:{level}")
        self.kv_awake = False

    def generate(self, prompts, params, use_tqdm=False):
        assert self.kv_awake, "generate with the KV cache asleep"
        self.events.append(f"generate:{len(prompts)}")
        return super().generate(prompts, params, use_tqdm)

    def get_tokenizer(self):
        return _Tokenizer()


class _Generation:
    """TRL's VLLMGeneration as VLLMPolicy sees it (its engine, sleep flag, weight sync, TP settings)."""

    def __init__(self, engine, tp=1, tp_group=None):
        self.llm, self.enable_sleep_mode = engine, True
        self.tensor_parallel_size, self.tp_group = tp, tp_group
        self._llm_weights_sleeping = False  # TRL woke the weights before calling the rollout function
        self.syncs = 0

    def sync_weights(self):
        self.syncs += 1
        self.llm.events.append("sync")
        self._llm_weights_sleeping = False


class _StopTokenizer(_Tokenizer):
    eos_token = "<|im_end|>"

    def get_vocab(self):
        return {"<|im_end|>": 9}


_FAKE_VLLM = types.SimpleNamespace(SamplingParams=lambda **kw: kw)


def test_vllm_policy_wakes_the_kv_cache_and_sleeps_the_engine_after_the_rollout():
    engine = _SleepyEngine()
    owner = _Generation(engine)
    policy = VLLMPolicy(owner, _StopTokenizer(), SamplingParams(temperature=1.0), vllm_module=_FAKE_VLLM)
    conv = types.SimpleNamespace(prompt_ids=[1, 2])
    for _ in range(2):  # two turns: the KV cache is woken once
        assert policy.generate([conv], max_new_tokens=4)[0].finish_reason == "stop"
    policy.release()
    assert engine.events == ["wake:kv_cache", "generate:1", "generate:1", "sleep:2"]
    assert owner._llm_weights_sleeping  # level 2 dropped the weights: they must be pushed again
    policy.generate([conv], max_new_tokens=4)  # a second rollout in the same step (DAPO refill)
    assert engine.events[-3:] == ["sync", "wake:kv_cache", "generate:1"] and owner.syncs == 1


def test_vllm_policy_without_sleep_mode_never_sleeps_the_engine():
    engine = _SleepyEngine()
    engine.kv_awake = True
    owner = _Generation(engine)
    owner.enable_sleep_mode = False
    policy = VLLMPolicy(owner, _StopTokenizer(), vllm_module=_FAKE_VLLM)
    policy.generate([types.SimpleNamespace(prompt_ids=[1])], max_new_tokens=4)
    policy.release()
    assert engine.events == ["generate:1"]


def test_vllm_policy_tp_group_gathers_prompts_keeps_its_slice_and_drains_for_ranks_still_running():
    """Two ranks share one engine; rank 1's episodes end a turn earlier and it must keep joining calls."""
    import threading

    class Group:  # all_gather_object over two threads
        def __init__(self, size):
            self.size, self.slots, self.barrier = size, [None] * size, threading.Barrier(size)

        def gather(self, rank):
            def call(obj):
                self.slots[rank] = obj
                self.barrier.wait()
                out = list(self.slots)
                self.barrier.wait()
                return out

            return call

    class Engine:  # a TP engine replica: echoes each prompt's first id so slices can be checked
        def __init__(self):
            self.calls: list[int] = []

        def generate(self, prompts, params, use_tqdm=False):
            assert isinstance(params, list) and len(params) == len(prompts)  # one SamplingParams per prompt
            self.calls.append(len(prompts))
            return [
                types.SimpleNamespace(
                    outputs=[types.SimpleNamespace(token_ids=[p["prompt_token_ids"][0], 9], logprobs=None)]
                )
                for p in prompts
            ]

    group = Group(2)
    engines = [Engine(), Engine()]
    results: dict[int, list] = {0: [], 1: []}
    turns = {0: [[10, 11], [12]], 1: [[20]]}  # rank 0 runs two turns, rank 1 one

    def run(rank):
        owner = _Generation(engines[rank], tp=2, tp_group="group")
        owner.enable_sleep_mode = False
        policy = VLLMPolicy(owner, _StopTokenizer(), vllm_module=_FAKE_VLLM)
        policy.tp_rank, policy.gather = rank, group.gather(rank)
        for firsts in turns[rank]:
            convs = [types.SimpleNamespace(prompt_ids=[f]) for f in firsts]
            results[rank].append([g.token_ids[0] for g in policy.generate(convs, max_new_tokens=4)])
        policy.release()

    threads = [threading.Thread(target=run, args=(r,)) for r in (0, 1)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=10)
    assert not any(t.is_alive() for t in threads), "the TP group deadlocked"
    assert results == {0: [[10, 11], [12]], 1: [[20]]}
    assert engines[0].calls == engines[1].calls == [3, 1]  # every rank joined both engine calls


def test_vllm_policy_needs_vllm_unless_given_a_stand_in(monkeypatch):
    import builtins

    real_import = builtins.__import__

    def no_vllm(name, *args, **kwargs):
        if name == "vllm":
            raise ImportError("no vllm here")
        return real_import(name, *args, **kwargs)

    monkeypatch.setattr(builtins, "__import__", no_vllm)
    with pytest.raises(ImportError, match="star-lab\\[gpu\\]"):
        VLLMPolicy(_SleepyEngine(), _StopTokenizer())
