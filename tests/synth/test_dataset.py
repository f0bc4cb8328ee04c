from __future__ import annotations

import json
from collections import Counter

import polars as pl
import pytest

from star_lib.synth import (
    SynthConfig,
    read_dataset,
    record_key,
    split_records,
    synthesize,
    write_dataset,
)
from star_lib.travel.evaluate import evaluate_plan
from star_lib.types import QueryRecord


@pytest.fixture(scope="module")
def result_600(small_world):
    return synthesize(small_world, SynthConfig(n=600, seed=0))


def test_dataset_every_reference_plan_passes_strict_and_official(small_world, result_600):
    records = result_600.records
    assert len(records) == 600
    for r in records:
        assert r.reference_plan is not None and r.query
        for mode in ("strict", "official"):
            report = evaluate_plan(r, r.reference_plan, small_world, mode=mode)
            assert report.final_pass, (mode, report.to_dict())


def test_dataset_composition_and_stats(result_600):
    stats = result_600.stats
    assert stats["levels"] == {"easy": 240, "hard": 180, "medium": 180}
    assert stats["splits"] == {"train": 480, "val": 60, "test": 60}
    assert set(stats["days"]) == {"3", "5", "7"}
    assert set(stats["constraint_types"]) == {"house rule", "cuisine", "room type", "transportation"}
    assert stats["constraint_types"]["transportation"] == 180
    assert 0 < stats["acceptance_rate"] <= 1
    assert sum(stats["attempts"].values()) == round(600 / stats["acceptance_rate"]) or stats["rejections"]
    assert stats["realiser"] == {"template": 600}
    for split in ("val", "test"):
        levels = Counter(r.level for r in result_600.splits[split])
        assert levels == {"easy": 24, "medium": 18, "hard": 18}


def test_dataset_no_leakage_between_splits(result_600):
    keys = {name: {record_key(r) for r in rows} for name, rows in result_600.splits.items()}
    assert (
        not keys["train"] & keys["val"]
        and not keys["train"] & keys["test"]
        and not keys["val"] & keys["test"]
    )
    idx = [r.idx for r in result_600.records]
    assert sorted(idx) == list(range(600))


def test_dataset_split_groups_identical_keys_together(result_600):
    records = result_600.splits["train"][:30]
    twins = [r.__class__(**{**r.__dict__, "people_number": r.people_number % 8 + 1}) for r in records]
    accepted = {"easy": records + twins, "medium": [], "hard": []}
    splits = split_records(accepted, SynthConfig(n=60, splits=(0.5, 0.25, 0.25)))
    where = {}
    for name, rows in splits.items():
        for r in rows:
            assert where.setdefault(record_key(r), name) == name


def test_dataset_files_round_trip(tmp_path, result_600):
    paths = write_dataset(result_600, tmp_path)
    assert {p.name for p in paths.values()} == {
        "train.jsonl",
        "val.jsonl",
        "test.jsonl",
        "train.parquet",
        "val.parquet",
        "test.parquet",
        "stats.json",
    }
    first = json.loads((tmp_path / "train.jsonl").read_text().splitlines()[0])
    assert list(first)[:10] == [
        "org",
        "dest",
        "days",
        "visiting_city_number",
        "date",
        "people_number",
        "local_constraint",
        "budget",
        "query",
        "level",
    ]
    assert isinstance(first["date"], list) and isinstance(first["local_constraint"], dict)
    assert set(first["local_constraint"]) == {"house rule", "cuisine", "room type", "transportation"}
    assert {"idx", "reference_plan"} <= set(first)
    assert read_dataset(tmp_path / "val.jsonl") == result_600.splits["val"]
    frame = pl.read_parquet(tmp_path / "test.parquet")
    assert frame.height == 60
    back = [QueryRecord.from_dict(row) for row in frame.to_dicts()]
    assert [r.reference_plan for r in back] == [r.reference_plan for r in result_600.splits["test"]]
    stats = json.loads((tmp_path / "stats.json").read_text())
    assert stats["n_records"] == 600 and "rejections" in stats


def _bytes(folder):
    return {p.name: p.read_bytes() for p in sorted(folder.iterdir())}


def test_dataset_same_seed_byte_identical_any_workers(small_world, tmp_path):
    cfg = SynthConfig(n=40, seed=11)
    outs = []
    for i, workers in enumerate((1, 1, 2)):
        cfg.workers = workers
        result = synthesize(small_world, cfg, world_spec="synthetic:small:0" if workers > 1 else None)
        write_dataset(result, tmp_path / str(i))
        outs.append(_bytes(tmp_path / str(i)))
    assert outs[0] == outs[1] == outs[2]
    other = synthesize(small_world, SynthConfig(n=40, seed=12))
    write_dataset(other, tmp_path / "other")
    assert _bytes(tmp_path / "other")["train.jsonl"] != outs[0]["train.jsonl"]


def test_dataset_single_level_mixtures(small_world):
    for mix in ("easy", "hard"):
        result = synthesize(small_world, SynthConfig(n=20, mix=mix, seed=3))
        assert {r.level for r in result.records} == {mix}


def test_dataset_real_slice_synthesis(real_world):
    result = synthesize(real_world, SynthConfig(n=60, seed=0))
    assert len(result.records) == 60
    for r in result.records:
        assert r.date[0].startswith("2022-03")
        assert evaluate_plan(r, r.reference_plan, real_world, mode="strict").final_pass


def test_dataset_impossible_world_fails_clearly(empty_world):
    with pytest.raises(ValueError, match="no feasible .* record"):
        synthesize(empty_world, SynthConfig(n=5, max_attempts_factor=2))


def test_dataset_llm_fallbacks_are_counted(small_world, monkeypatch):
    from star_lib.synth import dataset

    class Stub:
        def __init__(self, config=None):
            self.counts = {"fallback": 0}

        def realise(self, record, rng):
            self.counts["fallback"] += 1
            return dataset.realise_query(record, rng)

    monkeypatch.setattr(dataset, "LLMRealiser", Stub)
    result = synthesize(small_world, SynthConfig(n=6, realiser="llm", seed=5), llm=object())
    assert result.stats["realiser"] == {"fallback": 6}
    rng_free = synthesize(small_world, SynthConfig(n=6, seed=5))
    assert [r.query for r in result.records] == [r.query for r in rng_free.records]


def test_dataset_train_only_splits_and_named_mixtures(small_world, tmp_path):
    from star_lib.synth import PAPER_MIXTURES, synthesize_mixtures

    assert {"mixed-100", "mixed-500", "mixed-1000", "mixed-2000", "easy-1000", "hard-1000"} <= set(
        PAPER_MIXTURES
    )
    results = synthesize_mixtures(
        small_world, ["easy-8", "2:1:1-8"], tmp_path, SynthConfig(splits=(1.0, 0.0, 0.0))
    )
    assert {r.level for r in results["easy-8"].records} == {"easy"}
    assert Counter(r.level for r in results["2:1:1-8"].records) == {"easy": 4, "medium": 2, "hard": 2}
    assert (tmp_path / "easy-8" / "val.jsonl").read_text() == ""
    assert pl.read_parquet(tmp_path / "easy-8" / "test.parquet").height == 0
    assert len(read_dataset(tmp_path / "2:1:1-8" / "train.jsonl")) == 8


def test_dataset_tiny_world_synthesis(tiny_world):
    result = synthesize(tiny_world, SynthConfig(n=30, seed=0))
    assert len(result.records) == 30
    for r in result.records:
        assert evaluate_plan(r, r.reference_plan, tiny_world, mode="strict").final_pass
