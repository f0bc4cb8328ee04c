"""Whole-word vocabularies: ``tiny-entities`` and ``real-entities:<database>`` (issue 14)."""

from __future__ import annotations

import re

import pytest

from star_lib.train.sft import SFTRunConfig
from star_lib.train.tokenizer import TokenizerConfig, _without, train_tokenizer
from star_lib.travel.tools import TOOL_NAMES
from star_lib.travel.vocabulary import MIN_NAME_CHARS, database_names, whole_words
from star_lib.travel.world import World


@pytest.fixture(scope="module")
def small_db(tmp_path_factory):
    """A tiny synthetic world written in the official CSV layout (a database folder like the real one)."""
    folder = tmp_path_factory.mktemp("db")
    world = World.synthetic(seed=3, scale="tiny")
    world.to_csv_dir(folder)
    return folder, world


def test_real_entities_reads_the_database_it_is_given(small_db):
    folder, world = small_db
    words = whole_words(f"real-entities:{folder}")
    assert len(words) == len(set(words))
    city = world.cities[0]
    venues = [
        world.accommodations(city)[0].name,
        world.restaurants(city)[0].name,
        world.attractions(city)[0].name,
    ]
    for name in [*world.states, *world.cities, *venues]:
        if len(name.strip()) >= MIN_NAME_CHARS:
            assert name.strip() in words, name
    for token in (*TOOL_NAMES, "2022-03-16", "F", "000", "999"):
        assert token in words
    assert all(w == w.strip() and w for w in words)
    # the names come from that folder, not from the code: the tiny pools are not all in it
    assert set(database_names(folder)) < set(words)
    assert set(whole_words("tiny-entities")) != set(words)


def test_real_entities_drops_short_and_digit_names(tmp_path, small_db):
    folder, _ = small_db
    names = database_names(folder)
    assert names and all(len(n) >= MIN_NAME_CHARS and not n.isdigit() for n in names)


def test_real_entities_on_the_real_database(real_db_dir):
    words = whole_words(f"real-entities:{real_db_dir}")
    for name in ("Tallahassee", "Florida", "Tallahassee Museum", "Kerala Cafe", "SearchFlight"):
        assert name in words
    assert 15_000 < len(words) < 20_000  # ~16 k names + 365 dates + 1,000 digit groups + tools


@pytest.mark.parametrize(
    ("name", "error", "match"),
    [
        ("real-entities", ValueError, "names no database: write real-entities:<folder>"),
        ("real-entities:  ", ValueError, "names no database"),
        ("real-entities:/no/such/folder", FileNotFoundError, "database folder '/no/such/folder' not found"),
        ("tiny-entities:somewhere", ValueError, "takes no ':<folder>'"),
        ("wiki-entities", ValueError, r"unknown; choose one of \['tiny-entities', 'real-entities'\]"),
    ],
)
def test_whole_words_errors_name_the_vocabulary(name, error, match):
    with pytest.raises(error, match=match):
        whole_words(name)


def test_sft_config_resolves_the_real_vocabulary(small_db, tmp_path):
    folder, world = small_db
    cfg = SFTRunConfig(
        data="x.jsonl",
        output_dir=str(tmp_path),
        tokenizer={"vocab_size": 512, "whole_words": f"real-entities:{folder}"},
    )
    assert isinstance(cfg.tokenizer, TokenizerConfig)
    assert world.cities[0] in cfg.tokenizer.whole_words


def test_a_venue_name_is_one_token(small_db):
    folder, world = small_db
    city = world.cities[0]
    hotel = world.accommodations(city)[0].name
    text = f"<tool_call>SearchAccommodation|{city}</tool_call>\n{hotel} min2\n"
    tok = train_tokenizer(
        [text] * 4, TokenizerConfig(vocab_size=300, whole_words=whole_words(f"real-entities:{folder}"))
    )
    pieces = tok.convert_ids_to_tokens(tok(text)["input_ids"])
    assert tok.convert_tokens_to_ids(hotel) in tok(text)["input_ids"]
    assert tok.convert_tokens_to_ids(city) in tok(text)["input_ids"]
    assert len(pieces) < 12


def test_cutting_whole_words_out_matches_the_longest_token_first():
    """The trie pattern of ``_without`` cuts what a longest-first alternation cuts, only faster."""
    tokens = ["Ab", "Abc", "Abcd", "bc", "Blue Door", "Blue Door Inn", "x"]
    texts = ["Abcde Ab Abc bcd", "the Blue Door Inn|Blue Door|Blue Do", "xx Abx", ""]
    ordered = sorted(set(tokens), key=len, reverse=True)
    reference = re.compile("|".join(re.escape(t) for t in ordered))
    assert list(_without(texts, tokens)) == [reference.sub("\n", t) for t in texts]
    assert list(_without(["Abcd"], [])) == ["Abcd"]
