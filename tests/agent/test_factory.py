"""make_policy: one factory for every backend, and checkpoints refused in the other protocol."""

from __future__ import annotations

import pytest

from star_lib.agent.compact import CompactExpert
from star_lib.agent.expert import ExpertPolicy
from star_lib.agent.factory import POLICY_KINDS, PolicyOptionError, make_policy
from star_lib.agent.fastgen import FastPolicy
from star_lib.agent.openai_policy import OpenAIPolicy
from star_lib.agent.policies import Conversation, SamplingParams, TransformersPolicy
from star_lib.agent.protocol import ProtocolMismatchError, write_protocol

GREEDY = SamplingParams(temperature=0.0)


def test_make_policy_builds_each_backend(tiny_model, qwen_tokenizer) -> None:
    loaded = {"model": tiny_model, "tokenizer": qwen_tokenizer, "sampling": GREEDY}
    hf = make_policy("transformers", batch_size=3, **loaded)
    assert isinstance(hf, TransformersPolicy) and hf.batch_size == 3 and hf.sampling is GREEDY
    fast = make_policy("fast", reuse_cache=False, entropy_tokens=2, **loaded)
    assert isinstance(fast, FastPolicy) and not fast.reuse_cache and fast.entropy_tokens == 2
    assert isinstance(make_policy("expert"), ExpertPolicy)
    assert isinstance(make_policy("expert", protocol="compact", max_retries=1), CompactExpert)
    remote = make_policy("openai", model="served", base_url="http://localhost:9/v1", concurrency=2)
    assert isinstance(remote, OpenAIPolicy) and remote.config.concurrency == 2
    assert POLICY_KINDS == ("transformers", "fast", "vllm", "openai", "expert")


@pytest.mark.parametrize(
    ("kind", "kwargs", "message"),
    [
        ("telepathy", {}, "policy kind must be one of"),
        ("fast", {"beam_width": 4}, r"the fast policy takes no option\(s\) \['beam_width'\]"),
        ("openai", {"model": "m", "entropy_tokens": 3}, "entropy_tokens is for the transformers and fast"),
        ("transformers", {}, "needs a model"),
        ("transformers", {"model": object()}, "needs the tokenizer of the loaded model"),
    ],
)
def test_make_policy_refuses_bad_requests_in_one_sentence(kind, kwargs, message) -> None:
    with pytest.raises(PolicyOptionError, match=message):
        make_policy(kind, **kwargs)


def test_a_checkpoint_loads_only_in_the_protocol_it_was_trained_on(tmp_path, tiny_model, qwen_tokenizer):
    folder = tmp_path / "sft" / "model"
    tiny_model.save_pretrained(folder)
    qwen_tokenizer.save_pretrained(folder)
    write_protocol(folder, "compact")
    for kind in ("transformers", "fast"):
        with pytest.raises(ProtocolMismatchError, match="trained on the compact protocol .* speaks react"):
            make_policy(kind, model=folder, protocol="react")
    policy = make_policy("fast", model=folder, protocol="compact", sampling=GREEDY)
    conversation = Conversation(
        messages=[{"role": "system", "content": "plan"}, {"role": "user", "content": "A>B"}]
    )
    (turn,) = policy.generate([conversation], max_new_tokens=3)
    assert turn.token_ids and len(turn.token_ids) <= 3
