"""Fuzz: >10,000 random or garbled plan payloads through parse → evaluate (both modes) → rewards.

Every payload must end as either a format error (``PlanParseError``; rewards 0) or a delivered verdict with
rewards in [0, 1] — never an exception, never the evaluator's internal-error fallback. Each payload also
goes through ``Evaluator.evaluate_payload`` (what ``star eval`` calls) in both modes: it never raises, and
only ``official`` mode may call a plan not scorable (naming the official check that raises).
"""

from __future__ import annotations

import ast
import json
import random
import sys
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from star_lib.rewards import curriculum_reward, macro_reward, reward_components, success_reward, sum_reward
from star_lib.travel.evaluate import Evaluator
from star_lib.travel.plan import PlanParseError, mutate_plan, parse_plan, plan_to_json
from star_lib.travel.world import World
from star_lib.types import COMMONSENSE_KEYS, PLAN_KEYS, QueryRecord

sys.path.insert(0, str(Path(__file__).parent))
from malformed import as_payload, malform  # noqa: E402

QUOTAS = {"text": 1500, "garbled": 3000, "structured": 4000, "mutated": 1500, "malformed": 2000}
"""Payloads per test (>= 10,000 in all)."""
BATCH = 10
"""Payloads derived from each hypothesis-drawn seed (hypothesis' per-example overhead dwarfs ours)."""
assert sum(QUOTAS.values()) >= 10_000


@pytest.fixture(scope="module")
def setup(real_db_dir, tp_dir):
    world = World.from_csv_dir(real_db_dir)
    items = []
    for line in (tp_dir / "train.jsonl").read_text().splitlines():
        record = json.loads(line)
        items.append((QueryRecord.from_dict(record), parse_plan(record["annotated_plan"])))
    evaluators = [Evaluator(world, "official"), Evaluator(world, "strict")]
    return world, items, evaluators


def _fuzz_settings(n: int):
    return settings(
        max_examples=n,
        deadline=None,
        database=None,
        derandomize=True,
        suppress_health_check=list(HealthCheck),
    )


def check_payload(payload, query, evaluators) -> None:
    """Run ``evaluate_payload`` in both modes: no raise, well-formed reports, not-scorable only officially."""
    for evaluator in evaluators:
        verdict = evaluator.evaluate_payload(query, payload)
        report = verdict.report
        assert list(report.commonsense) == list(COMMONSENSE_KEYS)
        reasons = [r.reason or "" for r in report.commonsense.values()]
        assert not any(r.startswith("internal evaluator error") for r in reasons), reasons
        if not verdict.scorable:
            assert evaluator.mode == "official" and "raises in" in verdict.error
            assert report.delivered and not report.final_pass
        assert 0.0 <= sum_reward(report, malformed=False) <= 1.0


def run_payload(payload, query, evaluators) -> str:
    """Parse → evaluate → rewards; returns 'format' or 'verdict' and asserts the invariants."""
    check_payload(payload, query, evaluators)
    try:
        plan = parse_plan(payload, days=query.days)
    except PlanParseError as exc:
        assert str(exc)
        for fn in (success_reward, macro_reward, sum_reward):
            assert fn(None, malformed=True) == 0.0
        return "format"
    for evaluator in evaluators:
        report = evaluator.evaluate(query, plan)
        assert report.delivered
        reasons = [r.reason or "" for r in report.commonsense.values()]
        assert not any(r.startswith("internal evaluator error") for r in reasons), reasons
        for fn in (success_reward, macro_reward, sum_reward):
            assert 0.0 <= fn(report, malformed=False) <= 1.0
            assert fn(report, malformed=True) == 0.0
        assert 0.0 <= curriculum_reward(report, False, progress=0.5) <= 1.0
        assert all(0.0 <= v <= 1.0 for v in reward_components(report).values())
    return "verdict"


VOCAB = [
    "-",
    "",
    " ",
    "from",
    "from A to B",
    "from St. Petersburg to Rockford",
    "Rockford",
    "Rockford(Illinois)",
    "Coco Bambu, Rockford",
    "Coco, Rockford",
    "Flight Number: F3573659, from St. Petersburg to Rockford",
    "Flight Number: F1, from",
    "flight number: X",
    "Self-driving, from St. Petersburg to Rockford",
    "Taxi, from Rockford to Rockford",
    "Driving from A to B",
    "A, B;C, D;",
    "A, B;C, D",
    ";;;",
    ",",
    "(",
    ")",
    "\n",
    "You don't need to fill in the information for this or later days.",
]
JUNK_KEYS = [" days ", "notes", "Days", ""]


def random_value(rng: random.Random):
    """A random field value: real-looking text, garbage text, or a wrong type."""
    roll = rng.random()
    if roll < 0.6:
        return rng.choice(VOCAB)
    if roll < 0.8:
        return "".join(rng.choice("aZ ,;()-\n'\"0") for _ in range(rng.randrange(12)))
    return rng.choice([None, 0, 1, 2.5, float("nan"), ["a"], {"k": 1}, True])


def random_day(rng: random.Random, number: int):
    """A day object: usually all official keys, sometimes missing/extra/misnumbered ones."""
    if rng.random() < 0.02:
        return rng.choice([None, "day", 3, []])
    day = {"days": number if rng.random() < 0.98 else random_value(rng)}
    day.update({k: random_value(rng) if rng.random() < 0.02 else rng.choice(VOCAB) for k in PLAN_KEYS[1:]})
    if rng.random() < 0.02:
        day.pop(rng.choice(PLAN_KEYS), None)
    if rng.random() < 0.02:
        day[rng.choice(JUNK_KEYS)] = random_value(rng)
    return day


def test_fuzz_random_text_payloads(setup) -> None:
    _, items, evaluators = setup
    outcomes: list[str] = []

    @_fuzz_settings(QUOTAS["text"])
    @given(st.text(max_size=200), st.integers(0, 44))
    def inner(text, i):
        outcomes.append(run_payload(text, items[i][0], evaluators))

    inner()
    assert len(outcomes) >= QUOTAS["text"]


def test_fuzz_garbled_gold_json(setup) -> None:
    _, items, evaluators = setup
    outcomes: list[str] = []

    @_fuzz_settings(QUOTAS["garbled"] // BATCH)
    @given(st.integers(0, 2**32 - 1))
    def inner(seed):
        rng = random.Random(seed)
        for _ in range(BATCH):
            query, plan = rng.choice(items)
            text = list(plan_to_json(plan))
            for _ in range(rng.randint(1, 6)):
                pos = rng.randrange(len(text)) if text else 0
                op, char = rng.choice(("del", "ins", "sub")), rng.choice('[]{}",:;- aZ\\')
                if op == "del" and text:
                    del text[pos]
                elif op == "ins":
                    text.insert(pos, char)
                elif text:
                    text[pos] = char
            outcomes.append(run_payload("".join(text), query, evaluators))

    inner()
    assert len(outcomes) >= QUOTAS["garbled"]
    assert {"format", "verdict"} <= set(outcomes)


def test_fuzz_structured_day_lists(setup) -> None:
    _, items, evaluators = setup
    outcomes: list[str] = []

    @_fuzz_settings(QUOTAS["structured"] // BATCH)
    @given(st.integers(0, 2**32 - 1))
    def inner(seed):
        rng = random.Random(seed)
        for _ in range(BATCH):
            query, _ = rng.choice(items)
            days = [random_day(rng, n) for n in range(1, rng.randint(0, query.days + 1) + 1)]
            payload = days if rng.random() < 0.5 else json.dumps(days, allow_nan=True)
            outcomes.append(run_payload(payload, query, evaluators))

    inner()
    assert len(outcomes) >= QUOTAS["structured"]
    assert outcomes.count("verdict") > len(outcomes) // 4


def test_fuzz_mutated_real_plans(setup) -> None:
    world, items, evaluators = setup
    outcomes: list[str] = []

    @_fuzz_settings(QUOTAS["mutated"] // BATCH)
    @given(st.integers(0, 2**32 - 1))
    def inner(seed):
        rng = random.Random(seed)
        for _ in range(BATCH):
            query, plan = rng.choice(items)
            for _ in range(rng.randint(1, 4)):
                plan = mutate_plan(plan, rng, world)
            outcomes.append(run_payload(plan_to_json(plan), query, evaluators))

    inner()
    assert len(outcomes) >= QUOTAS["mutated"]
    assert outcomes.count("verdict") > len(outcomes) // 2


def test_fuzz_malformed_gold_plans(setup, tp_dir) -> None:
    """Raw malformed day lists (tests/travel/malformed.py) over the 45 gold plans, as submission records."""
    _, items, evaluators = setup
    gold = []
    for (query, _), line in zip(items, (tp_dir / "train.jsonl").read_text().splitlines(), strict=True):
        days = [d for d in ast.literal_eval(json.loads(line)["annotated_plan"])[1] if d]
        gold.append((query, days))
    outcomes: list[str] = []

    @_fuzz_settings(QUOTAS["malformed"] // BATCH)
    @given(st.integers(0, 2**32 - 1))
    def inner(seed):
        rng = random.Random(seed)
        for _ in range(BATCH):
            query, days = rng.choice(gold)
            outcomes.append(run_payload(as_payload(malform(days, rng), rng), query, evaluators))

    inner()
    assert len(outcomes) >= QUOTAS["malformed"]
    assert {"format", "verdict"} <= set(outcomes)
