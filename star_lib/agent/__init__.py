"""The agent runtime: episode protocols, travel environment, lockstep episode runner, policies, teachers.

>>> from star_lib.agent import ExpertPolicy, RolloutConfig, run_episodes  # doctest: +SKIP
>>> episodes = run_episodes(ExpertPolicy(), queries, world, RolloutConfig())  # doctest: +SKIP

Heavy libraries (torch, transformers, openai, vllm) load only when a backend is built.
"""

from star_lib.agent.chat import ChatRenderer, TokenTrace
from star_lib.agent.config import RolloutConfig
from star_lib.agent.env import Episode, TravelEnv
from star_lib.agent.expert import ExpertPolicy, plan_steps
from star_lib.agent.factory import POLICY_KINDS, make_policy
from star_lib.agent.fastgen import FastPolicy
from star_lib.agent.openai_policy import OpenAIConfig, OpenAIPolicy
from star_lib.agent.policies import (
    Conversation,
    EntropyGeneration,
    Generation,
    Policy,
    SamplingParams,
    TransformersPolicy,
    VLLMPolicy,
)
from star_lib.agent.protocol import (
    CONTEXT_LIMIT_PROMPT,
    CompactProtocol,
    FinalAnswer,
    FormatError,
    Protocol,
    ReactProtocol,
    check_protocol,
    format_answer,
    format_tool_call,
    get_protocol,
    parse_turn,
    system_prompt,
    user_prompt,
    write_protocol,
)
from star_lib.agent.rollout import RolloutStats, episode_row, episodes_frame, run_episodes, trl_rollout_output
from star_lib.agent.serve import ChatServer
from star_lib.agent.teacher import TeacherStats, build_sft_dataset, keep_episode, sft_record
from star_lib.agent.tokenizer import load_tokenizer

__all__ = [
    "CONTEXT_LIMIT_PROMPT",
    "POLICY_KINDS",
    "ChatRenderer",
    "ChatServer",
    "CompactProtocol",
    "Conversation",
    "EntropyGeneration",
    "Episode",
    "ExpertPolicy",
    "FastPolicy",
    "FinalAnswer",
    "FormatError",
    "Generation",
    "OpenAIConfig",
    "OpenAIPolicy",
    "Policy",
    "Protocol",
    "ReactProtocol",
    "RolloutConfig",
    "RolloutStats",
    "SamplingParams",
    "TeacherStats",
    "TokenTrace",
    "TransformersPolicy",
    "TravelEnv",
    "VLLMPolicy",
    "build_sft_dataset",
    "check_protocol",
    "episode_row",
    "episodes_frame",
    "format_answer",
    "format_tool_call",
    "get_protocol",
    "keep_episode",
    "load_tokenizer",
    "make_policy",
    "parse_turn",
    "plan_steps",
    "run_episodes",
    "sft_record",
    "system_prompt",
    "trl_rollout_output",
    "user_prompt",
    "write_protocol",
]
