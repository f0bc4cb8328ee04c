"""STAR stage 1: task synthesis — element sampling, feasibility by construction, back-translation, datasets.

>>> from star_lib.synth import SynthConfig, synthesize, write_dataset   # doctest: +SKIP
>>> result = synthesize(World.synthetic(scale="small"), SynthConfig(n=100))  # doctest: +SKIP
>>> write_dataset(result, "data/queries")  # doctest: +SKIP
"""

from star_lib.synth.config import SynthConfig, level_counts, parse_mix
from star_lib.synth.dataset import (
    PAPER_MIXTURES,
    SynthResult,
    load_world,
    mixture,
    mixture_config,
    read_dataset,
    record_key,
    split_records,
    synthesize,
    synthesize_mixtures,
    write_dataset,
)
from star_lib.synth.realise import LLMConfig, LLMRealiser, build_messages, missing_mentions, realise_query
from star_lib.synth.sample import (
    CostEstimate,
    NoCandidateError,
    estimate_cost,
    level_budget,
    preferred_mode,
    sample_constraint,
    sample_record,
)
from star_lib.synth.solver import Rejection, layout, night_splits, solve, verify_plan

__all__ = [
    "PAPER_MIXTURES",
    "CostEstimate",
    "LLMConfig",
    "LLMRealiser",
    "NoCandidateError",
    "Rejection",
    "SynthConfig",
    "SynthResult",
    "build_messages",
    "estimate_cost",
    "layout",
    "level_budget",
    "level_counts",
    "load_world",
    "missing_mentions",
    "mixture",
    "mixture_config",
    "night_splits",
    "parse_mix",
    "preferred_mode",
    "read_dataset",
    "realise_query",
    "record_key",
    "sample_constraint",
    "sample_record",
    "solve",
    "split_records",
    "synthesize",
    "synthesize_mixtures",
    "verify_plan",
    "write_dataset",
]
