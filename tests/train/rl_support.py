"""Shared pieces of the RL algorithm tests: a micro run folder, scripted policies, config builder.

Imported by ``test_dapo.py``, ``test_arpo.py``, ``test_curriculum.py``, ``test_noise.py`` and
``test_resume.py`` (this folder is put on ``sys.path`` by each of them, as ``tests/cli/test_train.py`` does).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

WORLD = "synthetic:small:0"

GARBAGE = "Sure! Here is my plan, no tags needed."
"""A turn that breaks the protocol (three of them end the episode as malformed: reward 0)."""


def build_rl_dir(root: Path, world: Any, n: int = 4) -> Path:
    """Write ``n`` easy queries with reference plans and a micro model whose tokenizer knows the episodes."""
    from star_lib.agent.config import RolloutConfig
    from star_lib.agent.expert import ExpertPolicy
    from star_lib.agent.rollout import run_episodes
    from star_lib.synth.config import SynthConfig
    from star_lib.synth.dataset import synthesize, write_dataset
    from star_lib.train.models import TinyArchitecture, build_tiny_model
    from star_lib.train.sft import normalise_rows, tokenizer_corpus
    from star_lib.train.tokenizer import TokenizerConfig, train_tokenizer

    result = synthesize(
        world, SynthConfig(n=n, mix="1:0:0", seed=0, splits=(1.0, 0.0, 0.0), days_choices=(3,))
    )
    write_dataset(result, root / "data", parquet=False)
    episodes = run_episodes(ExpertPolicy(), result.splits["train"], world, RolloutConfig())
    rows = normalise_rows({"messages": ep.messages, "tools": ep.tool_schemas} for ep in episodes)
    tokenizer = train_tokenizer(tokenizer_corpus(rows), TokenizerConfig(vocab_size=1500))
    arch = TinyArchitecture(
        hidden_size=32,
        num_hidden_layers=1,
        num_attention_heads=2,
        num_key_value_heads=1,
        intermediate_size=64,
    )
    model = build_tiny_model(tokenizer, arch)
    model.save_pretrained(root / "model")
    tokenizer.save_pretrained(root / "model")
    return root


def queries(rl_dir: Path) -> list[Any]:
    """The run folder's training queries."""
    from star_lib.synth.dataset import read_dataset

    return read_dataset(rl_dir / "data" / "train.jsonl")


def rl_config(rl_dir: Path, tmp_path: Path, **kwargs: Any) -> Any:
    """A one-step, one-prompt, G=2 run over the micro model (``kwargs`` override)."""
    from star_lib.train.rl import RLRunConfig

    base: dict[str, Any] = dict(
        data=str(rl_dir / "data" / "train.jsonl"),
        output_dir=str(tmp_path / "run"),
        model_path=str(rl_dir / "model"),
        world=WORLD,
        num_generations=2,
        prompts_per_step=1,
        max_steps=1,
        max_turns=12,
        max_new_tokens=64,
        max_context_tokens=16000,
    )
    base.update(kwargs)
    return RLRunConfig(**base)


class ScriptedPolicy:
    """Each episode acts as ``kind(query, member)``: ``expert`` (acts out the reference plan) or ``garbage``.

    ``member`` is the episode's position in its group (``Conversation.key % group_size``); the kind is fixed
    at the episode's first turn. ``entropy(conversation, turn)`` (optional) makes it return
    :class:`~star_lib.train.arpo.EntropyGeneration` with that entropy on every token.
    """

    tokenizer = None

    def __init__(self, kind: Any, group_size: int = 2, entropy: Any = None) -> None:
        from star_lib.agent.expert import ExpertPolicy

        self.kind, self.group_size, self.entropy = kind, group_size, entropy
        self.expert = ExpertPolicy()
        self.kinds: dict[int, str] = {}

    def generate(self, conversations, *, max_new_tokens):
        """Write one turn per conversation."""
        from star_lib.agent.policies import Generation
        from star_lib.train.arpo import EntropyGeneration

        out = []
        for conv in conversations:
            turn = sum(m["role"] == "assistant" for m in conv.messages)
            if conv.key not in self.kinds or turn == 0:
                self.kinds[conv.key] = self.kind(conv.query, conv.key % self.group_size)
            if self.kinds[conv.key] == "garbage":
                text = GARBAGE
            else:
                text = self.expert.next_turn(
                    conv.query, [m for m in conv.messages if GARBAGE not in m["content"]]
                )
            if self.entropy is None:
                out.append(Generation(text=text))
            else:
                out.append(EntropyGeneration(text=text, entropies=[float(self.entropy(conv, turn))] * 12))
        return out


def alternating(query: Any, member: int) -> str:
    """Member 0 plays the expert, member 1 garbage: every group has rewards (1, 0)."""
    return "expert" if member % 2 == 0 else "garbage"
