"""Synthesis never reproduces a held-out query (issue 14): ``SynthConfig.exclude_queries``."""

from __future__ import annotations

from dataclasses import replace

import polars as pl
import pytest

from star_lib.io import read_queries, write_jsonl_atomic
from star_lib.synth import SynthConfig, synthesize
from star_lib.synth.dataset import R_HELD_OUT, held_out_key
from star_lib.types import LocalConstraint

REAL_CFG = SynthConfig(n=120, mix="1:1:1", seed=0, days_choices=(3, 5, 7))
"""Easy, medium and hard, 3/5/7 days, from the real database; seed 0 reproduces a real train query
(the easy 3-day Las Vegas → Denver trip) when nothing is excluded."""


def test_synth_from_the_real_database_never_reproduces_a_real_train_query(real_world, tp_dir):
    train = tp_dir / "train.jsonl"
    held_out = {held_out_key(q) for q in read_queries(train)}
    assert len(held_out) == 45

    plain = synthesize(real_world, REAL_CFG)
    reproduced = [r for r in plain.records if held_out_key(r) in held_out]
    assert reproduced, "without the option this seed reproduces a real train query (the test would not bite)"

    result = synthesize(real_world, replace(REAL_CFG, exclude_queries=str(train)))
    assert len(result.records) == REAL_CFG.n
    assert not [r for r in result.records if held_out_key(r) in held_out]
    assert set(result.stats["levels"]) == {"easy", "medium", "hard"}
    assert set(result.stats["days"]) == {"3", "5", "7"}
    rejected = result.stats["rejections"][R_HELD_OUT]
    assert rejected >= len(reproduced)
    assert result.stats["held_out"] == {
        "file": str(train),
        "sha256": result.stats["held_out"]["sha256"],
        "queries": 45,
        "rejected": rejected,
    }


def test_synth_exclusion_rejects_a_record_the_same_seed_produced(real_world, tmp_path):
    cfg = SynthConfig(n=6, mix="1:1:1", seed=3)
    first = synthesize(real_world, cfg).records
    victims = [first[0], first[-1]]
    # the held-out file in the official test format: literal strings, no annotated_plan, budget as text
    rows = [
        {
            **r.to_dict(),
            "date": str(list(r.date)),
            "local_constraint": str(r.local_constraint.to_dict()),
            "budget": str(r.budget + 100),  # the budget does not make it another task
        }
        for r in victims
    ]
    for row in rows:
        row.pop("idx")
        row.pop("reference_plan")
    pl.DataFrame(rows).write_csv(tmp_path / "held_out.csv")
    result = synthesize(real_world, replace(cfg, exclude_queries=str(tmp_path / "held_out.csv")))
    keys = {held_out_key(r) for r in result.records}
    assert not keys & {held_out_key(v) for v in victims}
    assert len(result.records) == cfg.n
    assert result.stats["rejections"][R_HELD_OUT] >= 2 and result.stats["held_out"]["queries"] == 2


def test_synth_held_out_key_ignores_budget_wording_and_cuisine_order(real_world):
    record = synthesize(real_world, SynthConfig(n=1, mix="easy", seed=0)).records[0]
    same = replace(record, budget=record.budget * 2, query="other words", idx=None, reference_plan=None)
    assert held_out_key(same) == held_out_key(record)
    a = replace(record, local_constraint=LocalConstraint(cuisine=("Indian", "French")))
    b = replace(record, local_constraint=LocalConstraint(cuisine=("French", "Indian")))
    assert held_out_key(a) == held_out_key(b) != held_out_key(record)
    assert held_out_key(replace(record, people_number=2)) != held_out_key(record)


def test_synth_exclude_queries_errors_name_the_option_or_file(real_world, tmp_path):
    with pytest.raises(ValueError, match="exclude_queries=''"):
        SynthConfig(exclude_queries="")
    with pytest.raises(ValueError, match="exclude_queries=5"):
        SynthConfig(exclude_queries=5)  # type: ignore[arg-type]
    with pytest.raises(FileNotFoundError, match="missing.jsonl"):
        synthesize(real_world, SynthConfig(n=1, exclude_queries=str(tmp_path / "missing.jsonl")))
    write_jsonl_atomic(tmp_path / "bad.jsonl", [{"org": "A"}])
    with pytest.raises(ValueError, match=r"bad\.jsonl:1: .*missing"):
        synthesize(real_world, SynthConfig(n=1, exclude_queries=str(tmp_path / "bad.jsonl")))
