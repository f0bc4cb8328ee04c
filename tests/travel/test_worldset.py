"""Per-query worlds: a task's idx carries its world's seed; the set rebuilds worlds on demand."""

from __future__ import annotations

import json

import pytest

from star_lib.travel.world import World
from star_lib.travel.worldset import IDX_STRIDE, SPEC_FILE, WorldSet, load_worlds, query_idx


def test_worldset_builds_each_seed_once_within_its_capacity_and_rebuilds_identically():
    worlds = WorldSet("tiny", capacity=2)
    first = worlds.world(5)
    assert worlds.world(5) is first
    worlds.world(6), worlds.world(7)  # 5 is evicted
    rebuilt = worlds.world(5)
    assert rebuilt is not first and rebuilt.summary() == first.summary()


def test_worldset_for_query_reads_the_seed_from_the_idx():
    class Query:
        idx = query_idx(42, 3)

    assert Query.idx == 42 * IDX_STRIDE + 3
    assert WorldSet("tiny").for_query(Query()).summary() == World.synthetic(seed=42, scale="tiny").summary()
    Query.idx = None
    with pytest.raises(ValueError, match="idx"):
        WorldSet("tiny").for_query(Query())
    with pytest.raises(ValueError, match="at most"):
        query_idx(1, IDX_STRIDE)


def test_load_worlds_reads_spec_strings_and_spec_folders(tmp_path):
    assert isinstance(load_worlds("synthetic-per-query:tiny"), WorldSet)
    WorldSet("small").write_spec(tmp_path)
    loaded = load_worlds(tmp_path)
    assert isinstance(loaded, WorldSet) and loaded.scale == "small"
    assert isinstance(load_worlds("synthetic:tiny:0"), World)
    (tmp_path / SPEC_FILE).write_text(json.dumps({"kind": "other"}))
    with pytest.raises(ValueError, match=SPEC_FILE):
        load_worlds(tmp_path)
    with pytest.raises(ValueError, match="scale"):
        WorldSet("huge")


def test_whole_word_vocabulary_covers_names_dates_tools_and_digit_groups():
    from star_lib.travel.vocabulary import whole_words

    words = whole_words("tiny-entities")
    assert {"F", "2022-03-02", "SearchFlight", "Pellmont", "000", "999"} <= set(words)
    assert len(words) == len(set(words))
    with pytest.raises(ValueError, match="tiny-entities"):
        whole_words("nope")
