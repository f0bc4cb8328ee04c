from __future__ import annotations

import polars as pl
import pytest

from star_lib.qa.metrics import (
    AVERAGE,
    cover_exact_match,
    exact_match,
    f1_score,
    normalize_answer,
    score_answer,
    summarize,
)


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("The Beatles", "beatles"),  # article + case
        ("a  tale of an apple", "tale of apple"),  # articles, whitespace
        ("Wilhelm Conrad Röntgen.", "wilhelm conrad röntgen"),  # punctuation, non-ASCII kept
        ("U.S.A.", "usa"),
        ("theatre", "theatre"),  # 'the' only as a word
        ("  ", ""),
        ("May 18, 2018", "may 18 2018"),
    ],
)
def test_metrics_normalize_answer_squad_rules(text, expected):
    assert normalize_answer(text) == expected


def test_metrics_exact_match_against_any_golden_answer():
    golds = ["Olivia", "MFSK"]
    assert exact_match("mfsk", golds) == 1.0
    assert exact_match("The Olivia!", golds) == 1.0
    assert exact_match("Olivia MFSK", golds) == 0.0
    assert exact_match(None, golds) == 0.0
    assert exact_match("Paris", "paris") == 1.0  # a single string gold


def test_metrics_f1_hand_checked_values():
    # pred tokens {barack, obama, jr}, gold {barack, obama}: P=2/3, R=1 -> F1=0.8
    assert f1_score("Barack Obama Jr.", ["Barack Obama"]) == pytest.approx(0.8)
    # best over golds: "new york" vs "new york city": P=1, R=2/3 -> 0.8; vs "NYC": 0
    assert f1_score("New York", ["NYC", "New York City"]) == pytest.approx(0.8)
    # articles removed before counting: "the cat sat" vs "a cat" -> {cat, sat} vs {cat}: P=1/2, R=1 -> 2/3
    assert f1_score("the cat sat", ["a cat"]) == pytest.approx(2 / 3)
    # repeated tokens count with multiplicity: "paris paris" vs "paris": P=1/2, R=1 -> 2/3
    assert f1_score("paris paris", ["paris"]) == pytest.approx(2 / 3)
    assert f1_score("London", ["Paris"]) == 0.0
    assert f1_score("", ["Paris"]) == 0.0
    assert f1_score(None, ["Paris"]) == 0.0


def test_metrics_f1_yes_no_rule():
    assert f1_score("yes", ["no"]) == 0.0
    assert f1_score("no it is not", ["no"]) == 0.0  # HotpotQA: yes/no gold needs an exact yes/no
    assert f1_score("yes", ["yes"]) == 1.0


def test_metrics_cover_em_substring_after_normalisation():
    assert cover_exact_match("It was Wilhelm Conrad Röntgen in 1901.", ["Wilhelm Conrad Röntgen"]) == 1.0
    assert cover_exact_match("Röntgen", ["Wilhelm Conrad Röntgen"]) == 0.0
    assert cover_exact_match("The answer is 291 episodes", ["291 episodes", "291"]) == 1.0
    assert cover_exact_match("anything", [""]) == 0.0  # an empty gold never covers
    assert cover_exact_match(None, ["x"]) == 0.0


def test_metrics_score_answer_bundles_all_three():
    scores = score_answer("the MFSK mode", ["Olivia", "MFSK"])
    assert (scores.em, scores.cover_em) == (0.0, 1.0)
    assert scores.f1 == pytest.approx(2 * (1 / 2) * 1 / (1 / 2 + 1))  # {mfsk, mode} vs {mfsk}


def test_metrics_summarize_per_dataset_and_unweighted_average():
    frame = pl.DataFrame(
        {
            "dataset": ["nq", "nq", "nq", "nq", "bamboogle"],
            "em": [1.0, 0.0, 0.0, 1.0, 1.0],
            "f1": [1.0, 0.5, 0.0, 1.0, 1.0],
            "cover_em": [1.0, 1.0, 0.0, 1.0, 1.0],
        }
    )
    out = summarize(frame)
    assert out["dataset"].to_list() == ["nq", "bamboogle", AVERAGE]
    rows = {r["dataset"]: r for r in out.iter_rows(named=True)}
    assert rows["nq"]["em"] == 0.5 and rows["nq"]["f1"] == pytest.approx(0.625) and rows["nq"]["n"] == 4
    assert rows[AVERAGE]["em"] == pytest.approx(0.75)  # mean of 0.5 and 1.0, not 3/5
    assert rows[AVERAGE]["n"] == 5
