from __future__ import annotations

import math
import sys
from collections import Counter
from pathlib import Path

import numpy as np
import pytest

from star_lib.train.arpo import (
    ARPOConfig,
    ARPOStats,
    branch_probability,
    entropy_from_top_logprobs,
    initial_chains,
    run_arpo_episodes,
    token_entropies,
)

sys.path.insert(0, str(Path(__file__).resolve().parent))
from rl_support import ScriptedPolicy, alternating, queries, rl_config  # noqa: E402


def flat(conv, turn):
    """The same entropy on every turn: ΔH = 0."""
    return 0.2


def rising(conv, turn):
    """Low on the first turn, high after every tool response: ΔH = 0.7."""
    return 0.2 if turn == 0 else 0.9


@pytest.fixture(scope="module")
def tokenizer(rl_dir):
    from transformers import AutoTokenizer

    return AutoTokenizer.from_pretrained(rl_dir / "model")


def run(world, records, entropy, arpo, group_size=4, seed=0, stats=None, faults=None, tokenizer=None):
    from star_lib.agent.config import RolloutConfig

    policy = ScriptedPolicy(lambda q, m: "expert", group_size=group_size, entropy=entropy)
    return run_arpo_episodes(
        policy,
        records,
        world,
        RolloutConfig(max_turns=30, reward="sum"),
        arpo,
        group_size,
        np.random.default_rng(seed),
        faults=faults,
        stats=stats,
        tokenizer=tokenizer,
    )


# ───────────────────────────── pure parts ─────────────────────────────


def test_arpo_branch_probability_and_initial_chains():
    assert branch_probability(0.0, 0.5, 0.2) == 0.5
    assert branch_probability(1.0, 0.5, 0.2) == pytest.approx(0.7)
    assert branch_probability(-1.0, 0.5, 0.2) == pytest.approx(0.3)
    assert branch_probability(10.0, 0.5, 0.2) == 1.0 and branch_probability(-10.0, 0.5, 0.2) == 0.0
    assert [initial_chains(g, 0.5) for g in (2, 3, 4, 8)] == [1, 2, 2, 4]
    assert initial_chains(4, 1.0) == 4 and initial_chains(4, 0.01) == 1
    for bad in ({"initial_share": 0.0}, {"alpha": 1.5}, {"entropy_tokens": 0}):
        with pytest.raises(ValueError):
            ARPOConfig(**bad)


def test_arpo_entropy_from_controlled_logits():
    import torch

    vocab = 50
    uniform = torch.zeros(vocab)
    peaked = torch.full((vocab,), -30.0)
    peaked[3] = 30.0
    half = torch.full((vocab,), -math.inf)  # two equally likely tokens, the rest masked out
    half[:2] = 0.0
    values = token_entropies(torch.stack([uniform, peaked, half]))  # (T=3, V)
    assert values[0] == pytest.approx(1.0, abs=1e-5)
    assert values[1] == pytest.approx(0.0, abs=1e-5)
    assert values[2] == pytest.approx(math.log(2) / math.log(vocab), abs=1e-5)
    assert entropy_from_top_logprobs([math.log(0.5), math.log(0.5)]) == pytest.approx(1.0)
    assert entropy_from_top_logprobs([0.0, -math.inf, -math.inf]) == 0.0
    assert 0 < entropy_from_top_logprobs([-0.1, -3.0, -4.0, -5.0]) < 0.5


# ───────────────────────────── the adaptive runner ─────────────────────────────


@pytest.mark.parametrize("entropy", [flat, rising, None])
def test_arpo_returns_exactly_g_rows_per_prompt(world, rl_dir, tokenizer, entropy):
    records = queries(rl_dir)[:3]
    stats = ARPOStats()
    arpo = ARPOConfig(alpha=0.0, beta=1.0)  # flat: never branches (top-ups fill); rising: branches
    episodes = run(world, records, entropy, arpo, group_size=4, stats=stats, tokenizer=tokenizer)
    assert len(episodes) == 12
    assert [ep.group_id for ep in episodes] == [g for g in range(3) for _ in range(4)]
    for g, record in enumerate(records):
        assert {ep.query.idx for ep in episodes[4 * g : 4 * g + 4]} == {record.idx}
    assert all(ep.reward == 1.0 and ep.prompt_ids and ep.completion_ids for ep in episodes)
    assert len({ep.index for ep in episodes}) == 12  # every member has its own slot
    assert sum(stats.branches) + stats.topups + 3 * initial_chains(4, 0.5) == 12
    if entropy is rising:
        assert sum(stats.branches) == 6 and stats.topups == 0
    else:
        assert sum(stats.branches) == 0 and stats.topups == 6
    assert stats.missing_entropy == (0 if entropy else len([1 for ep in episodes for _ in range(ep.turns)]))


def test_arpo_branches_more_when_entropy_rises(world, rl_dir):
    records = queries(rl_dir)
    counts = {}
    for name, entropy in (("flat", flat), ("rising", rising)):
        stats = ARPOStats()
        run(world, records, entropy, ARPOConfig(alpha=0.1, beta=1.0), group_size=6, stats=stats)
        counts[name] = stats
    assert sum(counts["rising"].branches) > sum(counts["flat"].branches)
    assert counts["rising"].topups < counts["flat"].topups
    assert counts["rising"].metrics()["arpo/entropy_delta_mean"] == pytest.approx(0.7)
    assert counts["flat"].metrics()["arpo/entropy_delta_mean"] == pytest.approx(0.0)
    # with the paper's defaults the probability follows α + β·ΔH: 0.5 flat, 0.64 rising
    for entropy, p in ((flat, 0.5), (rising, 0.64)):
        stats = ARPOStats()
        run(world, records[:1], entropy, ARPOConfig(), group_size=4, stats=stats)
        assert stats.probabilities and all(q == pytest.approx(p) for q in stats.probabilities)


def test_arpo_branch_copies_the_chain_state_and_is_seeded(world, rl_dir, tokenizer):
    from star_lib.travel.faults import FaultConfig

    records = queries(rl_dir)[:2]
    faults = FaultConfig(failure_rate=0.3, sleep=False, seed=5)
    arpo = ARPOConfig(alpha=0.5, beta=0.5)
    first = run(world, records, rising, arpo, faults=faults, seed=3, tokenizer=tokenizer)
    again = run(world, records, rising, arpo, faults=faults, seed=3, tokenizer=tokenizer)
    assert [ep.completion_ids for ep in first] == [ep.completion_ids for ep in again]  # deterministic
    assert [ep.faults for ep in first] == [ep.faults for ep in again]
    # a branch starts from its parent's state: with the deterministic expert and the parent's fault
    # sequence it reproduces its parent's episode exactly, token for token
    for g in range(2):
        group = first[4 * g : 4 * g + 4]
        assert Counter(tuple(ep.completion_ids) for ep in group).most_common(1)[0][1] >= 2
        assert all(ep.prompt_ids == group[0].prompt_ids for ep in group)


def test_arpo_entropy_transformers_policy_reports_entropies(rl_dir):
    from star_lib.agent.policies import Conversation, SamplingParams
    from star_lib.train.arpo import EntropyGeneration, EntropyTransformersPolicy
    from star_lib.train.models import load_model_and_tokenizer

    model, tokenizer = load_model_and_tokenizer("tiny", path=rl_dir / "model")
    policy = EntropyTransformersPolicy(
        model, tokenizer, SamplingParams(temperature=1.0, seed=0), entropy_tokens=4
    )
    conv = Conversation(messages=[{"role": "user", "content": "Plan a trip."}])
    (gen,) = policy.generate([conv], max_new_tokens=8)
    assert isinstance(gen, EntropyGeneration) and gen.token_ids
    assert 1 <= len(gen.entropies) <= 4 and all(0.0 <= h <= 1.0 for h in gen.entropies)
    assert min(gen.entropies) > 0.5  # an untrained model is close to uniform


def test_arpo_one_step_runs_and_changes_the_weights(rl_dir, tmp_path):
    import polars as pl
    import torch

    from star_lib.train.models import load_model_and_tokenizer
    from star_lib.train.rl import run_rl

    cfg = rl_config(rl_dir, tmp_path, algorithm="arpo", num_generations=4, learning_rate=1e-2)
    result = run_rl(
        cfg, policy_factory=lambda t, c: ScriptedPolicy(alternating, group_size=4, entropy=rising)
    )
    before, _ = load_model_and_tokenizer("tiny", path=rl_dir / "model")
    after, _ = load_model_and_tokenizer("tiny", path=result.model_dir)
    assert any(not torch.equal(p, q) for p, q in zip(before.parameters(), after.parameters(), strict=True))
    row = pl.read_parquet(result.metrics_path).filter(pl.col("stage") == "rl").row(0, named=True)
    for key in (
        "arpo/branches_per_group",
        "arpo/topup_chains",
        "arpo/entropy_delta_mean",
        "arpo/branch_prob_mean",
    ):
        assert row[key] is not None, key
    assert row["arpo/branches_per_group"] + row["arpo/topup_chains"] == 2  # G=4, two initial chains
    assert row["arpo/entropy_delta_mean"] == pytest.approx(0.7)


def test_arpo_on_the_fast_sampler_measures_real_entropies_and_trains(rl_dir, tmp_path):
    """ARPO on FastPolicy (the tiny study's path): entropies from the live model on every turn.

    (The untrained micro model earns no reward, so the step has no gradient: the scripted test above shows
    an ARPO step moving the weights.)
    """
    import polars as pl

    from star_lib.agent.fastgen import FastPolicy
    from star_lib.train.arpo import entropy_policy
    from star_lib.train.rl import run_rl

    built = []

    def factory(trainer, cfg):
        built.append(entropy_policy(trainer, cfg))
        return built[-1]

    cfg = rl_config(rl_dir, tmp_path, algorithm="arpo", fast_generation=True, num_generations=4,
                    learning_rate=1e-2, max_new_tokens=16, arpo={"entropy_tokens": 3})  # fmt: skip
    result = run_rl(cfg, policy_factory=factory)
    assert built and all(isinstance(p, FastPolicy) and p.entropy_tokens == 3 for p in built)
    row = pl.read_parquet(result.metrics_path).filter(pl.col("stage") == "rl").row(0, named=True)
    assert row["arpo/missing_entropy_turns"] == 0  # every turn carried its entropies
    assert 0.9 < row["arpo/initial_entropy"] <= 1.0  # the untrained micro model is near uniform
    assert row["env/n"] == 4  # G episodes for the one prompt (its chains topped up: nothing to branch on)


@pytest.mark.gpu
def test_arpo_vllm_policy_reports_entropies_on_gpu():
    torch = pytest.importorskip("torch")
    pytest.importorskip("vllm")
    if not torch.cuda.is_available():
        pytest.skip("needs a CUDA GPU")
    import os

    from star_lib.agent.policies import Conversation
    from star_lib.train.arpo import EntropyVLLMPolicy

    model = os.environ.get("STAR_GPU_TEST_MODEL")
    if not model:
        pytest.skip("set STAR_GPU_TEST_MODEL to a local model folder")
    policy = EntropyVLLMPolicy(model, top_logprobs=20, gpu_memory_utilization=0.3)
    (gen,) = policy.generate([Conversation(messages=[{"role": "user", "content": "Hi"}])], max_new_tokens=8)
    assert gen.entropies and all(0.0 <= h <= 1.0 for h in gen.entropies)


def test_arpo_fork_shares_the_database_and_copies_the_episode(world, rl_dir):
    from star_lib.agent import rollout
    from star_lib.agent.config import RolloutConfig
    from star_lib.train.arpo import _Chain, _fork
    from star_lib.travel.faults import FaultConfig

    live = rollout.LiveEpisode.start(
        0, queries(rl_dir)[0], world, RolloutConfig(), FaultConfig(failure_rate=0.5)
    )
    parent = _Chain(live=live, group=1, h0=0.3, after_tool=True)
    child = _fork(parent, group_size=4, member=2, world=world)
    assert child.live.env.world is world and child.live.env.base_tools is live.env.base_tools  # not copied
    assert child.live.env.tools is not live.env.tools  # the fault injector's state is the branch's own
    assert child.live.env.episode.index == 6 and (child.group, child.h0, child.after_tool) == (1, 0.3, True)
    child.live.env.episode.messages.append({"role": "assistant", "content": "x"})
    assert len(live.env.episode.messages) == 2  # the parent's episode is untouched
    calls = [live.env.tools.call("SearchCity", {"state": "Ohio"}).fault for _ in range(8)]
    assert "failure" in calls and None in calls
    assert [child.live.env.tools.call("SearchCity", {"state": "Ohio"}).fault for _ in range(8)] == calls


def test_arpo_vllm_entropy_policy_drives_trls_engine_object(monkeypatch):
    """With TRL's colocated engine, ARPO's policy gets the generation object (sleep mode, TP group)."""
    import sys
    import types

    from star_lib.train.arpo import EntropyVLLMPolicy, entropy_policy
    from star_lib.train.rl import RLRunConfig

    monkeypatch.setitem(sys.modules, "vllm", types.SimpleNamespace(SamplingParams=lambda **kw: kw))
    tokenizer = types.SimpleNamespace(eos_token="<|im_end|>", get_vocab=lambda: {"<|im_end|>": 2})
    generation = types.SimpleNamespace(
        llm=object(), sync_weights=lambda: None, enable_sleep_mode=True, tensor_parallel_size=2, tp_group="g"
    )
    trainer = types.SimpleNamespace(use_vllm=True, vllm_generation=generation, processing_class=tokenizer)
    cfg = RLRunConfig(
        data="q",
        output_dir="o",
        model_path="m",
        algorithm="arpo",
        use_vllm=True,
        prompts_per_step=2,
        world_size=2,
        vllm_tensor_parallel_size=2,
        arpo={"top_logprobs": 20},
    )
    policy = entropy_policy(trainer, cfg)
    assert isinstance(policy, EntropyVLLMPolicy) and policy.owner is generation
    assert policy.top_logprobs == 20 and policy.tp_size == 2 and policy.enable_sleep_mode
