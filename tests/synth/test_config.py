from __future__ import annotations

import pytest

from star_lib.synth import SynthConfig, level_counts, mixture, parse_mix


def test_config_parse_mix_named_and_custom():
    assert parse_mix("4:3:3") == pytest.approx((0.4, 0.3, 0.3))
    assert parse_mix("mixed") == parse_mix("4:3:3")
    assert parse_mix("easy") == (1.0, 0.0, 0.0)
    assert parse_mix("hard") == (0.0, 0.0, 1.0)
    assert parse_mix("1:1:2") == pytest.approx((0.25, 0.25, 0.5))


@pytest.mark.parametrize("bad", ["", "4:3", "a:b:c", "-1:1:1", "0:0:0", "spicy"])
def test_config_parse_mix_rejects_malformed(bad):
    with pytest.raises(ValueError, match="a:b:c"):
        parse_mix(bad)


@pytest.mark.parametrize("n", [1, 7, 100, 101, 1000, 2000])
def test_config_level_counts_sum_to_n(n):
    counts = level_counts(n, "4:3:3")
    assert sum(counts.values()) == n
    assert counts["easy"] >= counts["medium"] == counts["hard"] or n < 10


def test_config_level_counts_single_level():
    assert level_counts(500, "medium") == {"easy": 0, "medium": 500, "hard": 0}


def test_config_mixture_names():
    assert mixture("mixed-2000") == (2000, "4:3:3")
    assert mixture("easy-100") == (100, "easy")
    assert mixture("2:1:1-500") == (500, "2:1:1")
    with pytest.raises(ValueError, match="composition"):
        mixture("mixed")


@pytest.mark.parametrize(
    ("field", "value", "message"),
    [
        ("n", 0, "at least one"),
        ("splits", (0.5, 0.5, 0.5), "summing to 1"),
        ("days_choices", (4,), "subset of"),
        ("driving_share", 1.5, r"\[0, 1\]"),
        ("people_range", (1, 8), "2 <= low"),
        ("tie_break", "fanciest", "cheapest"),
        ("realiser", "gpt", "template"),
        ("workers", 0, ">= 1"),
        ("budget_multipliers", {"easy": 1.0}, "positive value"),
    ],
)
def test_config_validation_says_what_to_change(field, value, message):
    with pytest.raises(ValueError, match=message):
        SynthConfig(**{field: value})
