"""One function per finding of the paper: select and reshape the results, compare with the paper, say so.

Each function takes the results table (``star_lib.experiments.results.load_results(...).frame``, our runs)
and returns a :class:`Finding`: tidy chart data with the paper's figures (``source = "paper"``) beside our
runs (``source = "ours"``), the finding's table, the paper-vs-ours :class:`Comparison` rows, and a verdict
sentence generated from those rows — whether our runs move in the paper's direction. Nothing here knows a
result in advance: the paper's side comes from :func:`~star_lib.experiments.results.paper_reference`
(spec §9), ours from the runs, and the verdict from comparing the two.

A comparison checks one of the paper's statements on our runs: "A is higher than B" (from two reported
numbers, or from a qualitative statement such as "hard-only training collapses") or "A is about B" ("stable
for failure rates up to 5 %", or two reported numbers less than ``tolerance`` apart). The intervals decide,
not the point estimates: our difference agrees when it has the paper's sign and lies outside both its 95 %
interval and ``tolerance``; a difference inside either is *flat*. For "about", it is *opposite* only when it
lies outside both its interval and ``stable_tolerance``, else it agrees. A pair our runs lack is *missing*
and is not counted.

A verdict needs evidence (:func:`evidence_gate`): a final-pass comparison is judged only when its best arm
beats a floor — the untrained model (``eval/base/final_pass``) when evaluated, else 0 — by more than its 95 %
interval (:data:`INTERVAL_Z`), and that arm's episodes are not dominated by truncation
(:data:`MAX_TRUNCATED`) or format errors (:data:`MAX_FORMAT_ERRORS`). Otherwise its outcome is *no
evidence*, with the reason ("every episode hit the 4-turn limit; final pass 0 % in every arm"), and it is
not counted either. Every finding also carries the health of each arm (:attr:`Finding.health`: termination
mix, format errors, transport mix, tool calls), the per-check failure profile (:attr:`Finding.checks`) and
the behaviour shifts behind a gain (:func:`behaviour_shifts`), which the verdict names.

At ``tiny`` scale the model axis is the tiny study's three sizes (``tiny-s``, ``tiny``, ``tiny-l``:
:data:`~star_lib.train.models.TINY_SCALE`), stand-ins by rank for the paper's 1.5B / 3B / 7B in the scale
finding; a comparison over another axis is made against the paper model a tiny size stands for, or the
nearest one that reports it (:func:`paper_stand_in`, named in each comparison). Where the user's results
folder has no run of a finding, :func:`with_study` shows the published tiny study
(``reports/tiny-study/``, :func:`~star_lib.experiments.results.load_study`) instead.
"""

from __future__ import annotations

import functools
import itertools
import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import polars as pl

from star_lib.experiments.grids import PAPER_MODELS, finding_axes
from star_lib.experiments.results import (
    AXIS_SCHEMA,
    CURVE_SCHEMA,
    RL_CURVE,
    SCHEMA,
    STUDY_RESULTS,
    load_study,
    paper_reference,
)
from star_lib.experiments.study import PROJECT_ROOT
from star_lib.train.models import TINY_SCALE

FINAL = "eval/final_pass"
"""The paper's headline metric: TravelPlanner final pass rate (a fraction)."""
PAPER_OOD = "qa/average/em"
"""The paper's OOD measure: exact match averaged over the QA sets (the ``qa-eval`` stage)."""
TINY_OOD = "ood/cs_micro"
"""The tiny study's OOD measure: the commonsense micro rate on the OOD split (longer trips and constraint
combinations never trained on, from unseen worlds; ``star_lib.experiments.ood``). Its final pass has no
signal: most tiny OOD episodes end malformed and almost none passes."""
_METRIC_LABELS: dict[str, str] = {
    FINAL: "final pass",
    PAPER_OOD: "avg OOD EM",
    TINY_OOD: "OOD cs micro",
}


def ood_metric(scale: str) -> str:
    """Return the OOD rate findings 2 and 4 compare at ``scale`` (:data:`TINY_OOD` or :data:`PAPER_OOD`)."""
    return TINY_OOD if scale == "tiny" else PAPER_OOD


def _metric_label(metric: str) -> str:
    return _METRIC_LABELS.get(metric, metric)


CLEAN_FINAL = "eval/clean/final_pass"
"""Final pass of the same models with clean tools (``eval.also_clean``, the noise grid)."""
IN_DOMAIN: tuple[str, ...] = (
    "eval/delivery",
    "eval/cs_micro",
    "eval/cs_macro",
    "eval/hard_micro",
    "eval/hard_macro",
    FINAL,
)
"""TravelPlanner metrics of Table 1, in the paper's column order."""
CURVE_METRICS: tuple[str, ...] = ("env/final_pass", "reward", "env/faults", "env/truncation_rate", "loss")
"""Per-step metrics the noise figure plots when a run logged them (RL: success, reward, faults; SFT: loss)."""
TOKEN_METRICS: tuple[str, ...] = (
    "rl/final/train/num_tokens",
    "rl/final/num_tokens",
    "sft/final/train/num_tokens",
    "sft/final/num_tokens",
)
"""Final metrics that count training tokens (the trainers' last ``num_tokens``; RL's first, then SFT's)."""


def is_curve_metric(metric: str) -> bool:
    """Tell whether a per-step metric is in :data:`CURVE_METRICS`, bare or under a prefix (``train/loss``)."""
    if metric.startswith("summary/"):
        return False
    return any(metric == m or metric.endswith("/" + m) for m in CURVE_METRICS)


FINDING_TITLES: dict[str, str] = {
    "reward": "Reward design (Table 1, Table 2)",
    "scale": "Model scale (Fig. 4)",
    "data": "RL data quantity (Fig. 5)",
    "difficulty": "RL data difficulty (Table 3)",
    "algorithm": "RL algorithms and training cost (Table 4)",
    "noise": "Environment noise (Fig. 6)",
    "interactions": "Interactions between the axes (factorial view)",
}
"""Title of each finding's notebook section."""
_MODEL_LABELS = {
    **{name: name for name in TINY_SCALE},
    "qwen2.5-1.5b": "1.5B",
    "qwen2.5-3b": "3B",
    "qwen2.5-7b": "7B",
}
_MODEL_ORDER = (*TINY_SCALE, *PAPER_MODELS)
_DIFFICULTY_ORDER = ("easy", "medium", "hard", "4:3:3")
_REWARD_ORDER = ("sum", "macro", "success", "curriculum", "milestone")
_ALGORITHM_ORDER = ("grpo", "dapo", "arpo")


def model_label(model: str | None) -> str:
    """Short display name of a model preset (``qwen2.5-1.5b`` → ``1.5B``)."""
    return _MODEL_LABELS.get(model or "", model or "–")


def _pct(value: float | None) -> str:
    return "–" if value is None else f"{100 * value:.1f} %"


def _pts(value: float) -> str:
    return f"{100 * value:+.1f} pts"


# ───────────────────────────── evidence, comparisons and verdicts ─────────────────────────────

INTERVAL_Z = 1.96
"""Half-width of every interval shown (``± …``), in standard errors: a normal 95 % interval."""
MAX_TRUNCATED = 0.5
"""Evidence gate: largest share of the reference arm's episodes that may end at the turn or context limit.
Above it the arm measures the limit rather than the policy, and its comparisons read *no evidence*."""
MAX_FORMAT_ERRORS = 0.5
"""Evidence gate: largest share of the reference arm's episodes with a format error
(``eval/format_error_rate``) or a malformed ending (``eval/termination/malformed``)."""
SHIFT_POINTS = 0.10
"""A transport share (flight / self-driving / taxi of the plans' travel legs) that moves by more than this
(10 pts) while final pass rises is reported as a behaviour shift behind the gain."""
BOOTSTRAP_RESAMPLES = 2000
"""Resamples of every bootstrap interval (over queries and seeds, :func:`contrast_interval`)."""
BOOTSTRAP_SEED = 0
"""Seed of the bootstrap's generator: the same runs always give the same interval."""
QUERY_METRIC = "query/"
"""Prefix of the per-query outcome rows of the tidy table: ``query/<split>/<rate>/<query id>`` (one row per
run × held-out query, value 0/1 or SUM), from the published study's lists (:func:`study_rows`)."""
OUTCOMES: tuple[str, ...] = ("agrees", "flat", "opposite", "missing", "no evidence")
"""Every outcome a comparison can have; *missing* and *no evidence* are not counted in the verdict."""

HEALTH_METRICS: dict[str, str] = {
    "final_pass": FINAL,
    "untrained": "eval/base/final_pass",
    "answer": "eval/termination/answer",
    "turn limit": "eval/termination/turn_limit",
    "context limit": "eval/termination/context_limit",
    "malformed": "eval/termination/malformed",
    "format errors": "eval/format_error_rate",
    "flight": "eval/transport/flight",
    "self-driving": "eval/transport/self-driving",
    "taxi": "eval/transport/taxi",
    "tool calls": "eval/tool_calls",
    "turns": "eval/turns",
    "episodes": "eval/n",
}
"""Columns of a finding's run-health table (:attr:`Finding.health`) → the eval metric each one averages."""
HEALTH_PERCENT: tuple[str, ...] = (
    "final_pass",
    "± (95 %)",
    "untrained",
    "answer",
    "turn limit",
    "context limit",
    "malformed",
    "format errors",
    "flight",
    "self-driving",
    "taxi",
)
"""Health-table columns holding fractions (shown as percentages)."""
TERMINATION_COLUMNS: tuple[str, ...] = ("answer", "turn limit", "context limit", "malformed")
"""The termination mix of the health table (shares of the arm's evaluation episodes)."""
TRANSPORT_COLUMNS: tuple[str, ...] = ("flight", "self-driving", "taxi")
"""The transport mix of the health table (shares of the plans' travel legs)."""


def _finite(value: Any) -> float | None:
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return None
    return float(value)


@dataclass(frozen=True)
class Outcomes:
    """An arm's per-query final-pass outcomes: one row per run (seed), one column per held-out query."""

    queries: tuple[int, ...]
    """The held-out queries' ids, in the split's order (the same for every run of the arm)."""
    values: tuple[tuple[float, ...], ...]
    """Outcome per run × query (0/1 for final pass)."""

    @property
    def mean(self) -> float:
        """Mean over runs and queries (the arm's rate)."""
        return sum(map(sum, self.values)) / max(1, len(self.values) * len(self.queries))


def contrast_se(
    cells: Sequence[Outcomes],
    weights: Sequence[float],
    resamples: int = BOOTSTRAP_RESAMPLES,
    seed: int = BOOTSTRAP_SEED,
    seeds: int | None = None,
) -> float:
    """Return the bootstrap SE of ``sum(w * cell mean)`` over cells that share their held-out queries.

    Each resample draws the queries with replacement once — the same indices for every cell, so the query
    difficulty common to the cells cancels in a difference (the paired bootstrap) — and each cell's runs
    (seeds) with replacement, independently per cell. One cell with weight 1 gives the arm's own SE.

    ``seeds`` draws that many runs per cell instead of the cell's own count: the SE a design with that many
    seeds would get, projected from the runs at hand (their spread stands for every seed's; see
    :func:`seeds_for`).

    Raises:
        ValueError: the cells do not share their queries, or ``weights`` does not match ``cells``.

    Example:
        >>> a = Outcomes((1, 2, 3, 4), ((1, 0, 1, 0),))
        >>> b = Outcomes((1, 2, 3, 4), ((1, 0, 1, 1),))
        >>> contrast_se([a, a], [1.0, -1.0]), contrast_se([a, b], [1.0, -1.0]) > 0
        (0.0, True)

    """
    import numpy as np

    if len(cells) != len(weights) or not cells:
        raise ValueError(f"contrast of {len(cells)} cells needs as many weights, got {len(weights)}")
    if not shares_queries(cells):
        raise ValueError("the paired bootstrap needs cells that share their held-out queries")
    rng = np.random.default_rng(seed)
    n_queries = len(cells[0].queries)
    drawn = rng.integers(0, n_queries, size=(resamples, n_queries))
    query_counts = np.stack([np.bincount(row, minlength=n_queries) for row in drawn]).astype(float)
    total = np.zeros(resamples)
    for cell, weight in zip(cells, weights, strict=True):
        matrix = np.asarray(cell.values, dtype=float)
        runs = matrix.shape[0]
        drawn_runs = runs if seeds is None else seeds
        picks = rng.integers(0, runs, size=(resamples, drawn_runs))
        run_counts = np.stack([np.bincount(row, minlength=runs) for row in picks]).astype(float)
        total += (
            weight * np.einsum("bs,sq,bq->b", run_counts, matrix, query_counts) / (drawn_runs * n_queries)
        )
    return float(total.std(ddof=1))


def seeds_for(outcomes: Outcomes, half_width: float, most: int = 20) -> int | None:
    """Return the fewest seeds whose projected 95 % half-width of the arm's rate is at most ``half_width``.

    The projection is :func:`contrast_se` drawing ``n`` seeds from the arm's runs: their spread stands for
    every seed's, so it cannot foresee a seed unlike the ones at hand, and with few runs it errs low. More
    seeds only shrink the seeds' share of the interval; the held-out queries' share stays, so an arm whose
    queries alone give more than ``half_width`` never gets there. None when ``most`` seeds do not (that, or
    seeds that spread too far, as when one of them collapsed).

    Example:
        >>> same = Outcomes((1, 2, 3, 4), ((1, 0, 1, 0), (1, 0, 1, 0)))
        >>> seeds_for(same, 0.5), seeds_for(same, 0.1)
        (1, None)

    """
    if half_width <= 0 or most < 1:
        raise ValueError(f"half_width must be > 0 and most >= 1, got {half_width} and {most}")

    def fits(n: int) -> bool:
        return INTERVAL_Z * contrast_se([outcomes], [1.0], seeds=n) <= half_width

    if not fits(most):
        return None
    low, high = 1, most  # the smallest n that fits lies in [low, high]; the SE falls as n grows
    while low < high:
        middle = (low + high) // 2
        low, high = (low, middle) if fits(middle) else (middle + 1, high)
    return low


def shares_queries(cells: Sequence[Outcomes | None]) -> bool:
    """Return whether every cell has per-query outcomes on the same queries (the paired bootstrap applies)."""
    present = [c for c in cells if c is not None]
    return bool(cells) and len(present) == len(cells) and len({c.queries for c in present}) == 1


def contrast_interval(arms: Sequence[Arm], weights: Sequence[float], *, paired: bool = True) -> float | None:
    """Return the 95 % half-width of ``sum(w * arm value)``: the one place every interval is computed.

    When the arms carry per-query outcomes on the same queries (the tiny study's runs do: synthesis is
    shared by every arm and seed) and ``paired`` (the contrast is of final pass, what the outcomes hold), it
    is :data:`INTERVAL_Z` times the paired bootstrap SE over queries and seeds (:func:`contrast_se`);
    otherwise the arms' SEs in quadrature, ``Z·sqrt(sum(w² se²))``; None when an arm's SE is unknown.
    """
    if paired and shares_queries([a.outcomes for a in arms]):
        return INTERVAL_Z * contrast_se([a.outcomes for a in arms if a.outcomes is not None], weights)
    if not arms or any(a.se is None for a in arms):
        return None
    return INTERVAL_Z * math.sqrt(sum((w * (a.se or 0.0)) ** 2 for a, w in zip(arms, weights, strict=True)))


@dataclass(frozen=True)
class Arm:
    """One side of a comparison: a group of our runs (seeds pooled) and the health of its episodes."""

    label: str
    """The arm's axis value, e.g. ``fail=0.1`` or ``curriculum``."""
    value: float | None
    """Final pass rate (mean over the arm's runs)."""
    se: float | None = None
    """Standard error of ``value`` (:func:`arm_stats`): the bootstrap SE over queries and seeds when the runs
    carry per-query outcomes, else the larger of the seeds' SE and the binomial SE of the pooled episodes
    (never below the Laplace-smoothed binomial SE); None when neither is known."""
    floor: float | None = None
    """The untrained model's final pass on the same tasks (``eval/base/final_pass``), when evaluated."""
    turn_limit: float = 0.0
    """Share of episodes that ended at the turn limit."""
    context_limit: float = 0.0
    """Share of episodes that ended at the context limit."""
    format_errors: float = 0.0
    """Share of episodes with a format error or a malformed ending."""
    turns: float | None = None
    """Mean turns per episode."""
    transport: Mapping[str, float] = field(default_factory=dict)
    """Shares of the travel legs by kind (``flight``, ``self-driving``, ``taxi``); empty when unknown."""
    outcomes: Outcomes | None = None
    """The runs' per-query final pass (the published study's runs), for paired bootstrap intervals."""

    @property
    def interval(self) -> float | None:
        """Half-width of the arm's 95 % interval (:data:`INTERVAL_Z` standard errors), None when unknown."""
        return None if self.se is None else INTERVAL_Z * self.se

    @property
    def truncated(self) -> float:
        """Share of episodes cut by a limit (turn or context)."""
        return self.turn_limit + self.context_limit


def _limit_reason(arms: Sequence[Arm], ref: Arm) -> str | None:
    """Why the reference arm's episodes measure a limit, or None when they are not dominated by one."""
    if ref.truncated <= MAX_TRUNCATED:
        return None
    every = all(a.truncated >= 1.0 - 1e-9 for a in arms)
    only_turns = all(a.context_limit == 0 for a in arms)
    turns = {round(a.turns) for a in arms if a.turns is not None}
    if every and only_turns:
        limit = f"{turns.pop()}-turn limit" if len(turns) == 1 else "turn limit"
        return f"every episode hit the {limit}"
    if every:
        return "every episode hit the turn or context limit"
    return (
        f"{_pct(ref.truncated)} of the {ref.label} episodes hit the turn or context limit "
        f"(the gate allows {_pct(MAX_TRUNCATED)})"
    )


def evidence_gate(arms: Sequence[Arm]) -> str | None:
    """Return why the arms show no signal ("no evidence"), or None when a comparison of them may be judged.

    The reference arm is the best-scoring arm (a difference can only be read when something scores). It must
    beat a floor — the untrained model (``eval/base/final_pass``) when the runs evaluated it, else 0 — by more
    than its interval (:data:`INTERVAL_Z` standard errors), and its episodes must not be dominated by
    truncation (more than :data:`MAX_TRUNCATED` at the turn or context limit) or by format errors (more than
    :data:`MAX_FORMAT_ERRORS`). Every failed condition is named, e.g. "every episode hit the 4-turn limit;
    final pass 0 % in every arm".

    Example:
        >>> cut = [Arm(f"fail={r}", 0.0, turn_limit=1.0, turns=4) for r in (0.05, 0)]
        >>> evidence_gate(cut)
        'every episode hit the 4-turn limit; final pass 0 % in every arm'
        >>> evidence_gate([Arm("a", 0.9, se=0.05), Arm("b", 0.5, se=0.1)]) is None
        True

    """
    scored = [a for a in arms if a.value is not None]
    if not scored:
        return None
    ref = max(scored, key=lambda a: a.value or 0.0)
    reasons = []
    limit = _limit_reason(scored, ref)
    if limit:
        reasons.append(limit)
    if ref.format_errors > MAX_FORMAT_ERRORS:
        reasons.append(
            f"{_pct(ref.format_errors)} of the {ref.label} episodes have format errors "
            f"(the gate allows {_pct(MAX_FORMAT_ERRORS)})"
        )
    floor = ref.floor if ref.floor is not None else 0.0
    interval = ref.interval or 0.0
    if (ref.value or 0.0) - floor <= interval:
        if ref.floor is None and all(a.value == 0 for a in scored):
            reasons.append("final pass 0 % in every arm")
        elif ref.floor is None:
            reasons.append(
                f"the best arm ({ref.label}: {_pct(ref.value)} ± {_pts_abs(interval)}) is within "
                "its interval of 0 %"
            )
        else:
            reasons.append(
                f"the best arm ({ref.label}: {_pct(ref.value)} ± {_pts_abs(interval)}) does not beat "
                f"the untrained model ({_pct(ref.floor)}) by more than its interval"
            )
    return "; ".join(reasons) or None


def _pts_abs(value: float) -> str:
    return f"{100 * value:.1f} pts"


@dataclass(frozen=True)
class Comparison:
    """One of the paper's statements, checked on our runs."""

    label: str
    """What is compared, e.g. ``curriculum > sum`` or ``fail=0.05 ≈ fail=0``."""
    metric: str
    """The metric compared (``eval/final_pass`` …)."""
    expect: str
    """The paper's direction: ``higher`` (first above second), ``lower`` or ``similar``."""
    paper: str
    """The paper's evidence, e.g. ``1.5B: 34.9 % vs 33.1 %`` or a quoted statement."""
    our_diff: float | None
    """Our first-minus-second difference (fraction), None when our runs lack one side."""
    ours: str = ""
    """Our values, e.g. ``tiny: 40.0 % vs 35.0 %``."""
    tolerance: float = 0.01
    """Differences within this (or within their 95 % interval) are flat (for ``higher``/``lower``)."""
    stable_tolerance: float = 0.05
    """Largest difference that still counts as ``similar``."""
    arms: tuple[Arm, ...] = ()
    """Our two arms (first, second) when known: their intervals and the evidence gate read them."""
    context: str = ""
    """Whose arms are compared when it is one model's (``tiny-l``), for the verdict clause; else empty."""

    @functools.cached_property
    def interval(self) -> float | None:
        """Half-width of the difference's 95 % interval, when known (:func:`contrast_interval`).

        The paired bootstrap of the difference when both arms carry per-query outcomes on the same queries,
        else the arms' intervals in quadrature.
        """
        if len(self.arms) != 2 or self.our_diff is None:
            return None
        return contrast_interval(self.arms, (1.0, -1.0), paired=self.metric == FINAL)

    @property
    def no_evidence(self) -> str | None:
        """Why our arms show no signal (see :func:`evidence_gate`), or None; only final pass is gated."""
        if self.our_diff is None or not self.arms or self.metric != FINAL:
            return None
        return evidence_gate(self.arms)

    @property
    def outcome(self) -> str:
        """``agrees`` | ``flat`` | ``opposite`` | ``missing`` | ``no evidence``."""
        diff = self.our_diff
        if diff is None or (isinstance(diff, float) and math.isnan(diff)):
            return "missing"
        if self.no_evidence:
            return "no evidence"
        interval = self.interval or 0.0
        if self.expect == "similar":
            return "opposite" if abs(diff) > max(self.stable_tolerance, interval) else "agrees"
        if abs(diff) <= max(self.tolerance, interval):
            return "flat"
        return "agrees" if (diff > 0) == (self.expect == "higher") else "opposite"

    def difference(self) -> str:
        """Our difference with its interval, e.g. ``+2.0 ± 3.1 pts`` (``–`` when our runs lack a side)."""
        if self.our_diff is None:
            return "–"
        interval = self.interval
        spread = f" ± {100 * interval:.1f}" if interval is not None else ""
        return f"{100 * self.our_diff:+.1f}{spread} pts"

    def describe(self) -> str:
        """Describe the comparison as a clause of the verdict sentence, its outcome spelled out.

        The parentheses name our arms' model (``tiny-l; paper 7B: …``) when the comparison is one model's.
        """
        who = self.context
        paper = f"{who}; paper {self.paper}" if who and who != "ours" else f"paper {self.paper}"
        outcome = self.outcome
        if outcome == "missing":
            return f"{self.label}: missing, not in our runs ({paper})"
        ours = f"ours {self.difference()}"
        inside = self.interval is not None and abs(self.our_diff or 0.0) <= self.interval
        if outcome == "no evidence":
            return f"{self.label}: no evidence, {self.no_evidence} ({ours}; {paper})"
        if outcome == "agrees":
            return f"{self.label}: agrees, {ours} ({paper})"
        if outcome == "flat":
            bound = "its 95 % interval" if inside else f"the ±{100 * self.tolerance:.0f} pt tolerance"
            return f"{self.label}: flat, {ours} is within {bound} where the paper has a difference ({paper})"
        if self.expect == "similar":
            return (
                f"{self.label}: opposite, {ours} differs by more than its interval and the "
                f"±{100 * self.stable_tolerance:.0f} pts the paper calls stable ({paper})"
            )
        return f"{self.label}: opposite, {ours} goes against the paper's direction ({paper})"


def comparisons_frame(comparisons: Sequence[Comparison]) -> pl.DataFrame:
    """Return the comparisons as a table (one row each, with the outcome and why a gate held it back)."""
    schema = {
        "comparison": pl.String,
        "metric": pl.String,
        "paper": pl.String,
        "ours": pl.String,
        "our difference (pts)": pl.Float64,
        "± (95 %, pts)": pl.Float64,
        "outcome": pl.String,
        "why": pl.String,
    }
    rows = [
        {
            "comparison": c.label,
            "metric": c.metric,
            "paper": c.paper,
            "ours": c.ours or "–",
            "our difference (pts)": None if c.our_diff is None else 100 * c.our_diff,
            "± (95 %, pts)": None if c.interval is None else 100 * c.interval,
            "outcome": c.outcome,
            "why": c.no_evidence,
        }
        for c in comparisons
    ]
    return pl.DataFrame(rows, schema=schema)


_HEADS = {"agrees": "Agrees", "flat": "Flat", "opposite": "Opposite"}


def verdict(comparisons: Sequence[Comparison], *, have_runs: bool, scope: str = "") -> str:
    """One sentence: how our runs compare with the paper, each comparison's outcome spelled out.

    The sentence opens with one word — ``Agrees`` (every judged comparison agrees), ``Flat``, ``Opposite``,
    ``Mixed`` (outcomes differ) or ``No evidence`` (the evidence gate held every comparison back) — then
    counts the outcomes and lists each comparison with our difference and its 95 % interval. Comparisons
    that are *missing* or have *no evidence* are listed but not counted as agreeing or disagreeing.

    Args:
        comparisons: The paper's statements checked on our runs.
        have_runs: Whether any of our runs for this finding have finished.
        scope: What our runs cover (e.g. ``reward ∈ {sum, success} at tiny``), used when nothing compares.

    Example:
        >>> c = Comparison("7B > 1.5B", FINAL, "higher", "62.8 % vs 33.1 %", our_diff=0.05)
        >>> print(verdict([c], have_runs=True)[:93])
        Agrees: our runs agree with the paper on 1 of 1 comparison — 7B > 1.5B: agrees, ours +5.0 pts

    """
    if not have_runs:
        return (
            "No finished runs of this finding yet, so nothing can be compared with the paper; "
            "launch them (launch='local' or 'slurm') or point results_dir at a runs folder."
        )
    present = [c for c in comparisons if c.outcome != "missing"]
    if not present:
        what = f" ({scope})" if scope else ""
        expected = "; ".join(f"{c.label}: paper {c.paper}" for c in comparisons) or "none stated"
        return (
            f"Our runs{what} have no pair that matches one of the paper's comparisons ({expected}), "
            "so the paper's direction cannot be checked at this scale."
        )
    judged = [c for c in present if c.outcome != "no evidence"]
    held = len(present) - len(judged)
    details = "; ".join(c.describe() for c in present)
    if not judged:
        plural = "comparison" if held == 1 else "comparisons"
        return (
            f"No evidence: our runs show no signal to judge {held} {plural} by, so none counts as agreeing "
            f"or disagreeing with the paper — {details}."
        )
    counts = {o: sum(c.outcome == o for c in judged) for o in ("agrees", "flat", "opposite")}
    kinds = [o for o, n in counts.items() if n]
    head = _HEADS[kinds[0]] if len(kinds) == 1 else "Mixed"
    plural = "comparison" if len(judged) == 1 else "comparisons"
    parts = [f"agree with the paper on {counts['agrees']} of {len(judged)} {plural}"]
    if counts["flat"]:
        parts.append(f"are flat (no difference beyond its interval) on {counts['flat']}")
    if counts["opposite"]:
        parts.append(f"go the opposite way on {counts['opposite']}")
    tally = ", ".join(parts[:-1]) + " and " + parts[-1] if len(parts) > 1 else parts[0]
    gated = f"; {held} more show no evidence and are not counted" if held else ""
    return f"{head}: our runs {tally}{gated} — {details}."


# ───────────────────────────── the finding ─────────────────────────────


@dataclass
class Finding:
    """What a finding notebook shows: chart data, tables, comparisons, and the verdict."""

    key: str
    """Finding name (``reward``, ``scale``, …)."""
    title: str
    """Section title (with the paper's table/figure number)."""
    chart_data: pl.DataFrame
    """Rows of the paper-vs-ours chart: ``source``, ``model``, ``x``, ``value``, ``sd``, ``n``, ``note``."""
    table: pl.DataFrame
    """The finding's table (paper and ours side by side)."""
    comparisons: list[Comparison]
    """The paper's statements checked on our runs."""
    verdict: str
    """One generated sentence (see :func:`verdict`)."""
    runs: int = 0
    """How many of our finished runs the finding uses."""
    tables: dict[str, pl.DataFrame] = field(default_factory=dict)
    """Further tables (``ood``, ``cost``, ``effects`` …)."""
    notes: list[str] = field(default_factory=list)
    """What is missing or approximated, in plain words."""
    health: pl.DataFrame = field(default_factory=pl.DataFrame)
    """Run health per arm (:func:`arm_stats`): final pass ± its interval, the termination mix, format errors,
    the transport mix, tool calls and turns per episode."""
    checks: pl.DataFrame = field(default_factory=pl.DataFrame)
    """The per-check failure profile per arm (:func:`check_failures`)."""
    shifts: list[str] = field(default_factory=list)
    """Gains that come with a shift in behaviour (:func:`behaviour_shifts`); also said in the verdict."""
    arms: tuple[str, ...] = ()
    """The axes whose values name one arm (``("model", "reward")``), as the health table groups them."""

    @property
    def comparison_table(self) -> pl.DataFrame:
        """The comparisons as a table."""
        return comparisons_frame(self.comparisons)


# ───────────────────────────── selection helpers ─────────────────────────────


def scale_models(scale: str) -> tuple[str, ...]:
    """Model presets of a scale: ``tiny`` → the tiny study's three sizes, ``paper`` → the Qwen2.5 sizes."""
    return TINY_SCALE if scale == "tiny" else PAPER_MODELS


STUDY_MISSING = "the study has not been run yet: `star study --scale tiny`"
"""What a finding says at tiny scale when neither the user's runs nor the published study has its runs."""


@dataclass(frozen=True)
class Shown:
    """The results a finding notebook shows, and one sentence saying where they come from."""

    frame: pl.DataFrame
    """The tidy results table (:data:`~star_lib.experiments.results.SCHEMA`)."""
    source: str
    """Whose runs these are: the user's, the published study's, or neither (:data:`STUDY_MISSING`)."""
    study: bool = False
    """True when the rows are the published study's."""
    curves: pl.DataFrame | None = None
    """Per-step training metrics of the same runs (:func:`~star_lib.viz.runs.load_curves`' columns): the
    user's when given, the published runs' RL reward curve (:func:`study_curves`) when the study is shown."""


def study_rows(study: pl.DataFrame) -> pl.DataFrame:
    """Turn the published study's per-run summaries (:func:`load_study`) into the tidy results table.

    One row per run × held-out metric (``eval/…``, ``ood/…``, ``cost/…``), ``source = "ours"``, ``status =
    "done"``, the run's axes and ``note`` = its commit, so every finding function reads them like the rows
    of :func:`~star_lib.experiments.results.load_results`; plus, for summaries that list them, one row per
    run × held-out query and rate (``query/eval/final_pass/<query id>``, :data:`QUERY_METRIC`), from which
    :func:`arm_stats` bootstraps the intervals.
    """
    metrics = [c for c in study.columns if c.startswith(("eval/", "ood/", "cost/"))]
    if study.height == 0 or not metrics:
        return pl.DataFrame(schema=SCHEMA)
    ids = ["grid", "run", "finding", *[k for k in AXIS_SCHEMA if k in study.columns]]
    commit = [pl.col("commit").cast(pl.String).alias("note")] if "commit" in study.columns else []
    long = study.select(*ids, *commit, *[pl.col(m).cast(pl.Float64) for m in metrics]).unpivot(
        index=[*ids, *(["note"] if commit else [])], on=metrics, variable_name="metric", value_name="value"
    )
    long = long.filter(pl.col("value").is_not_null()).with_columns(
        pl.lit("ours").alias("source"),
        pl.lit("done").alias("status"),
        pl.when(pl.col("metric").str.starts_with("cost/"))
        .then(pl.lit(None, dtype=pl.String))
        .otherwise(pl.lit("eval"))
        .alias("stage"),
        pl.lit("=").alias("relation"),
        *([] if commit else [pl.lit(None, dtype=pl.String).alias("note")]),
    )
    long = pl.concat([long, *_query_rows(study, ids, bool(commit))], how="diagonal_relaxed")
    for key, dtype in SCHEMA.items():
        long = long.with_columns(
            pl.col(key).cast(dtype) if key in long.columns else pl.lit(None, dtype=dtype).alias(key)
        )
    return long.select(list(SCHEMA))


def _query_rows(study: pl.DataFrame, ids: Sequence[str], commit: bool) -> list[pl.DataFrame]:
    """Return the per-query rows (``query/<split>/<rate>/<query id>``) of the summaries that list them."""
    from star_lib.experiments.results import OUTCOME_COLUMNS, OUTCOME_SPLITS

    parts = []
    for split in OUTCOME_SPLITS:
        key = f"{split}_query"
        for name in OUTCOME_COLUMNS:
            column = f"{split}_{name}"
            if key not in study.columns or column not in study.columns:
                continue
            picked = study.filter(
                pl.col(key).is_not_null()
                & pl.col(column).is_not_null()
                & (pl.col(key).list.len() == pl.col(column).list.len())
            )
            if picked.height == 0:
                continue
            note = [pl.col("commit").cast(pl.String).alias("note")] if commit else []
            rows = picked.select(*ids, *note, pl.col(key).alias("_q"), pl.col(column).alias("value")).explode(
                "_q", "value"
            )
            parts.append(
                rows.with_columns(
                    (pl.lit(f"{QUERY_METRIC}{split}/{name}/") + pl.col("_q").cast(pl.String)).alias("metric"),
                    pl.col("value").cast(pl.Float64),
                    pl.lit("ours").alias("source"),
                    pl.lit("done").alias("status"),
                    pl.lit(split).alias("stage"),
                    pl.lit("=").alias("relation"),
                ).drop("_q")
            )
    return parts


def with_study(
    results: pl.DataFrame,
    finding: str,
    scale: str,
    study_dir: Any = STUDY_RESULTS,
    results_dir: Any = "the results folder",
    curves: pl.DataFrame | None = None,
) -> Shown:
    """Return what a finding notebook shows: the user's runs of ``finding``, else the published tiny study.

    At ``tiny`` scale, when ``results`` holds no finished run of ``finding``, the published study's runs of it
    (``study_dir``, ``reports/tiny-study/`` by default) are shown instead, with their RL reward curves
    (:func:`study_curves`) in place of ``curves`` (the user's per-step metrics,
    :func:`~star_lib.viz.runs.load_curves`); when the study has none either, the source sentence says so
    (:data:`STUDY_MISSING`) and the finding renders its empty tables.

    Raises:
        ValueError: a published summary cannot be read (naming the file).

    """
    if ours(results, finding, scale).height:
        return Shown(results, f"Showing your runs in {results_dir}.", curves=curves)
    if scale != "tiny":
        return Shown(results, f"No {finding} runs in {results_dir} yet.", curves=curves)
    try:
        study = load_study(study_dir, findings=[finding])
    except FileNotFoundError:
        study = pl.DataFrame()
    rows = study_rows(study)
    if rows.height == 0:
        return Shown(results, f"No {finding} runs in {results_dir}, and {STUDY_MISSING}.", curves=curves)
    commits = sorted({str(c)[:10] for c in study["commit"].drop_nulls()}) if "commit" in study.columns else []
    at = f" at commit {', '.join(commits)}" if commits else ""
    source = (
        f"No {finding} runs in {results_dir}: showing the published tiny study ({study.height} runs{at}, "
        f"{_project_relative(study_dir)}).{machine_note(study)}"
    )
    frame = pl.concat([results, rows], how="vertical_relaxed")
    return Shown(frame, source, study=True, curves=study_curves(study))


def _project_relative(path: Any) -> str:
    """Return ``path`` from the project root (``reports/tiny-study``) when inside the project, else as given.

    A page published from one checkout must not name that checkout's folder.
    """
    try:
        return Path(path).resolve().relative_to(PROJECT_ROOT).as_posix()
    except ValueError:
        return str(path)


def study_curves(study: pl.DataFrame) -> pl.DataFrame:
    """Return the published runs' RL training curves (``rl_steps``, ``rl_reward``) as per-step rows.

    The columns are :data:`~star_lib.experiments.results.CURVE_SCHEMA`, the metric :data:`RL_CURVE` of
    stage ``rl``, so a notebook plots the published study's curves like the user's own runs'.
    """
    if not study.height or not {"rl_steps", "rl_reward"} <= set(study.columns):
        return pl.DataFrame(schema=CURVE_SCHEMA)
    ids = [k for k in CURVE_SCHEMA if k in study.columns and k not in ("stage", "step", "metric", "value")]
    rows = (
        study.filter(pl.col("rl_steps").list.len() == pl.col("rl_reward").list.len())
        .select(*ids, pl.col("rl_steps").alias("step"), pl.col("rl_reward").alias("value"))
        .explode("step", "value")
        .filter(pl.col("step").is_not_null())
        .with_columns(pl.lit("rl").alias("stage"), pl.lit(RL_CURVE).alias("metric"))
    )
    for key, dtype in CURVE_SCHEMA.items():
        rows = rows.with_columns(
            pl.col(key).cast(dtype) if key in rows.columns else pl.lit(None, dtype=dtype).alias(key)
        )
    return rows.select(list(CURVE_SCHEMA))


def arm_curves(curves: pl.DataFrame | None, arms: Sequence[str], metric: str = RL_CURVE) -> pl.DataFrame:
    """Average one per-step ``metric`` over each arm's seeds: the training curve per arm.

    Args:
        curves: Per-step rows (:data:`~star_lib.experiments.results.CURVE_SCHEMA`), e.g. :attr:`Shown.curves`.
        arms: The axes whose values name an arm (:attr:`Finding.arms`).
        metric: The per-step metric to plot (the RL rollouts' mean reward by default).

    Returns:
        Columns ``arm`` (e.g. ``tiny · sum``), ``step``, ``metric``, ``value`` (mean over the arm's runs)
        and ``runs``, sorted by arm and step; empty when no run logged ``metric``.

    """
    schema = {"arm": pl.String, "step": pl.Int64, "metric": pl.String, "value": pl.Float64, "runs": pl.UInt32}
    if curves is None or not curves.height:
        return pl.DataFrame(schema=schema)
    rows = curves.filter(pl.col("metric") == metric)
    present = [a for a in arms if a in rows.columns]
    named = [a for a in present if rows[a].n_unique() > 1] or present[:1]  # an axis with one value: unnamed
    if not rows.height or not named:
        return pl.DataFrame(schema=schema)
    return (
        rows.with_columns(arm_name(named, ignore_nulls=True).alias("arm"))
        .group_by("arm", "step", "metric")
        .agg(pl.col("value").mean(), pl.col("run").n_unique().cast(pl.UInt32).alias("runs"))
        .sort("arm", "step")
        .select(list(schema))
    )


def machine_note(study: pl.DataFrame) -> str:
    """Return a sentence naming the CPUs a study's runs ran on when there are several, else "".

    Each CPU kind rounds its own way, so each trained its own SFT model from the same config and data (a
    rerun on another CPU does not match bit for bit, see ``star study --verify``): two arms that ran on
    different CPUs differ by the machine as well as by their axis. Runs with no recorded CPU are not
    counted.

    Example:
        >>> cpus = ["EPYC (avx2)", "EPYC (avx512_bf16)", "EPYC (avx2)", ""]
        >>> note = machine_note(pl.DataFrame({"cpu": cpus}))
        >>> note.split(":")[0]
        ' Its runs ran on 2 CPUs (2 on EPYC (avx2), 1 on EPYC (avx512_bf16))'

    """
    if "cpu" not in study.columns:
        return ""
    known = study.filter(pl.col("cpu").is_not_null() & (pl.col("cpu") != ""))
    counts = known.group_by("cpu").len().sort("cpu")
    if counts.height < 2:
        return ""
    parts = ", ".join(f"{n} on {cpu}" for cpu, n in counts.iter_rows())
    return (
        f" Its runs ran on {counts.height} CPUs ({parts}): each trained its own SFT model, so arms that ran "
        "on different CPUs differ by the machine as well."
    )


def ours(results: pl.DataFrame, finding: str | Iterable[str] | None, scale: str) -> pl.DataFrame:
    """Our finished runs' rows for a finding (or any finding when None) at a scale."""
    if results.height == 0:
        return results
    rows = results.filter((pl.col("source") == "ours") & pl.col("model").is_in(list(scale_models(scale))))
    if finding is not None:
        names = [finding] if isinstance(finding, str) else list(finding)
        rows = rows.filter(pl.col("finding").is_in(names))
    return rows


def aggregate(rows: pl.DataFrame, by: Sequence[str], metric: str = FINAL) -> pl.DataFrame:
    """Mean, standard deviation and count of ``metric`` over seeds (and anything not in ``by``)."""
    schema = {**{k: rows.schema[k] for k in by}, "value": pl.Float64, "sd": pl.Float64, "n": pl.UInt32}
    picked = rows.filter(pl.col("metric") == metric) if rows.height else rows
    if picked.height == 0:
        return pl.DataFrame(schema=schema)
    return (
        picked.group_by(list(by))
        .agg(pl.col("value").mean().alias("value"), pl.col("value").std().alias("sd"), pl.len().alias("n"))
        .sort(list(by))
    )


def paper_rows(finding: str | Iterable[str], metric: str | None = FINAL) -> pl.DataFrame:
    """Return the paper's reference rows of a finding (all metrics when ``metric`` is None)."""
    names = [finding] if isinstance(finding, str) else list(finding)
    rows = paper_reference().filter(pl.col("finding").is_in(names))
    return rows if metric is None else rows.filter(pl.col("metric") == metric)


def _chart_rows(paper: pl.DataFrame, mine: pl.DataFrame, axis: str) -> pl.DataFrame:
    """Tidy chart rows from paper rows and our aggregated rows (``x`` = the axis value as text)."""
    parts = []
    if paper.height:
        parts.append(
            paper.select(
                pl.lit("paper").alias("source"),
                pl.col("model").map_elements(model_label, return_dtype=pl.String).alias("model"),
                pl.col(axis).cast(pl.String).alias("x"),
                pl.col("value"),
                pl.lit(None, dtype=pl.Float64).alias("sd"),
                pl.lit(None, dtype=pl.UInt32).alias("n"),
                pl.col("note"),
            )
        )
    if mine.height:
        parts.append(
            mine.select(
                pl.lit("ours").alias("source"),
                pl.col("model").map_elements(model_label, return_dtype=pl.String).alias("model"),
                pl.col(axis).cast(pl.String).alias("x"),
                pl.col("value"),
                pl.col("sd"),
                pl.col("n").cast(pl.UInt32),
                pl.lit(None, dtype=pl.String).alias("note"),
            )
        )
    schema = {
        "source": pl.String,
        "model": pl.String,
        "x": pl.String,
        "value": pl.Float64,
        "sd": pl.Float64,
        "n": pl.UInt32,
        "note": pl.String,
    }
    return pl.concat(parts, how="vertical_relaxed") if parts else pl.DataFrame(schema=schema)


def _values(rows: pl.DataFrame, key: str) -> dict[Any, float]:
    """``{axis value: value}`` of rows that have a value."""
    return {k: v for k, v in zip(rows[key].to_list(), rows["value"].to_list(), strict=True) if v is not None}


def paper_stand_in(model: str, reported: Sequence[str]) -> str:
    """Return the paper model of ``reported`` (smallest first) whose comparisons ``model`` is checked against.

    A paper model is itself when reported. A tiny size stands for the paper size of the same rank
    (``tiny-s`` ~ 1.5B, ``tiny`` ~ 3B, ``tiny-l`` ~ 7B), or the nearest reported one, the smaller on a tie:
    with the paper reporting 1.5B and 7B only, ``tiny`` is checked against 1.5B and ``tiny-l`` against 7B,
    so a scale-dependent finding is checked at both ends. Any other model gets the smallest reported one.
    """
    if model in reported:
        return model
    ranked = [m for m in reported if m in PAPER_MODELS]
    if model not in TINY_SCALE or not ranked:
        return reported[0]
    rank = TINY_SCALE.index(model)
    return min(ranked, key=lambda m: (abs(PAPER_MODELS.index(m) - rank), PAPER_MODELS.index(m)))


def _models_in(rows: pl.DataFrame) -> list[str]:
    present = set(rows["model"].drop_nulls().to_list()) if rows.height else set()
    return [m for m in _MODEL_ORDER if m in present]


def _expect(diff: float, tolerance: float) -> str:
    return "similar" if abs(diff) < tolerance else ("higher" if diff > 0 else "lower")


def _pair(
    label_a: str,
    label_b: str,
    paper_a: float,
    paper_b: float,
    context: str,
    ours_a: float | None,
    ours_b: float | None,
    our_context: str,
    metric: str,
    tolerance: float,
    stable_tolerance: float,
    arm_a: Arm | None = None,
    arm_b: Arm | None = None,
) -> Comparison:
    """Build a comparison from two paper numbers, the paper's higher value first."""
    if paper_b > paper_a:
        label_a, label_b, paper_a, paper_b, ours_a, ours_b, arm_a, arm_b = (
            label_b,
            label_a,
            paper_b,
            paper_a,
            ours_b,
            ours_a,
            arm_b,
            arm_a,
        )
    expect = _expect(paper_a - paper_b, tolerance)
    sign = "≈" if expect == "similar" else ">"
    diff = None if ours_a is None or ours_b is None else ours_a - ours_b
    ours_text = f"{our_context}: {_pct(ours_a)} vs {_pct(ours_b)}" if diff is not None else ""
    return Comparison(
        label=f"{label_a} {sign} {label_b}",
        metric=metric,
        expect=expect,
        paper=f"{context}: {_pct(paper_a)} vs {_pct(paper_b)}",
        our_diff=diff,
        ours=ours_text,
        tolerance=tolerance,
        stable_tolerance=stable_tolerance,
        arms=_arm_pair(diff, arm_a, arm_b),
        context=our_context if diff is not None else "",
    )


def _arm_pair(diff: float | None, arm_a: Arm | None, arm_b: Arm | None) -> tuple[Arm, ...]:
    return (arm_a, arm_b) if diff is not None and arm_a is not None and arm_b is not None else ()


def categorical_comparisons(
    paper: pl.DataFrame,
    mine: pl.DataFrame,
    axis: str,
    order: Sequence[str],
    metric: str = FINAL,
    tolerance: float = 0.01,
    stable_tolerance: float = 0.05,
    stats: pl.DataFrame | None = None,
) -> list[Comparison]:
    """Every pair of ``axis`` values the paper reports for one model, checked within each of our models.

    Our model is compared with the paper model it stands for (:func:`paper_stand_in`). ``stats``
    (:func:`arm_stats` by model and ``axis``) gives each comparison its arms, so it carries an interval
    and passes the evidence gate.
    """
    paper = paper.filter(pl.col("value").is_not_null() & pl.col(axis).is_not_null())
    by_model = {m: _values(paper.filter(pl.col("model") == m), axis) for m in _models_in(paper)}
    by_model = {m: v for m, v in by_model.items() if len(v) >= 2}
    if not by_model:
        return []
    out = []
    for our_model in _models_in(mine) or ["tiny"]:
        ref = paper_stand_in(our_model, list(by_model))
        p = by_model[ref]
        o = _values(mine.filter(pl.col("model") == our_model), axis) if mine.height else {}
        arms = _arms(stats, axis, our_model) if stats is not None else {}
        keys = sorted(p, key=lambda k: order.index(k) if k in order else len(order))
        for a, b in itertools.combinations(keys, 2):
            out.append(
                _pair(
                    str(a),
                    str(b),
                    p[a],
                    p[b],
                    model_label(ref),
                    o.get(a),
                    o.get(b),
                    model_label(our_model),
                    metric,
                    tolerance,
                    stable_tolerance,
                    arms.get(a),
                    arms.get(b),
                )
            )
    return out


def _claim(
    label: str,
    expect: str,
    statement: str,
    ours_a: float | None,
    ours_b: float | None,
    our_context: str,
    metric: str,
    tolerance: float,
    stable_tolerance: float,
    arm_a: Arm | None = None,
    arm_b: Arm | None = None,
) -> Comparison:
    """Build a comparison from a qualitative statement of the paper."""
    diff = None if ours_a is None or ours_b is None else ours_a - ours_b
    return Comparison(
        label=label,
        metric=metric,
        expect=expect,
        paper=f"“{statement}”",
        our_diff=diff,
        ours=f"{our_context}: {_pct(ours_a)} vs {_pct(ours_b)}" if diff is not None else "",
        tolerance=tolerance,
        stable_tolerance=stable_tolerance,
        arms=_arm_pair(diff, arm_a, arm_b),
        context=our_context if diff is not None else "",
    )


def _scope(mine: pl.DataFrame, axis: str, scale: str) -> str:
    values = sorted({str(v) for v in mine[axis].to_list()}) if mine.height else []
    return (
        f"{axis} ∈ {{{', '.join(values)}}} at {scale} scale"
        if values
        else f"no {axis} values at {scale} scale"
    )


def _wide_metrics(rows: pl.DataFrame, by: Sequence[str], metrics: Sequence[str]) -> pl.DataFrame:
    """Mean of each metric over seeds, one column per metric (short names)."""
    cols = {m: m.split("/", 1)[-1] for m in metrics}
    if rows.height == 0:
        return pl.DataFrame(schema={**{k: pl.String for k in by}, **{v: pl.Float64 for v in cols.values()}})
    picked = rows.filter(pl.col("metric").is_in(list(metrics)))
    if picked.height == 0:
        return pl.DataFrame(
            schema={**{k: rows.schema[k] for k in by}, **{v: pl.Float64 for v in cols.values()}}
        )
    wide = (
        picked.group_by([*by, "metric"])
        .agg(pl.col("value").mean())
        .pivot(on="metric", index=list(by), values="value")
    )
    for metric in metrics:
        if metric not in wide.columns:
            wide = wide.with_columns(pl.lit(None, dtype=pl.Float64).alias(metric))
    return wide.select(*by, *[pl.col(m).alias(c) for m, c in cols.items()]).sort(list(by))


# ───────────────────────────── arms: run health and behaviour ─────────────────────────────

_SFT_METRICS: dict[str, str] = {
    "sft final_pass": "eval/sft/final_pass",
    **{f"sft {kind}": f"eval/sft/transport/{kind}" for kind in TRANSPORT_COLUMNS},
}
"""The SFT model's numbers when a run also evaluated it (``eval.models: [..., sft, rl]``)."""


def arm_label(axis: str, value: Any) -> str:
    """Short name of an arm by its axis value (``tool_failure_rate`` 0.1 → ``fail=0.1``, 100 → ``n=100``)."""
    if axis == "tool_failure_rate" and isinstance(value, (int, float)):
        return f"fail={value:g}"
    if axis == "rl_data_size":
        return f"n={value}"
    if axis == "model":
        return model_label(value)
    return str(value)


def arm_name(axes: Sequence[str], *, ignore_nulls: bool = False) -> pl.Expr:
    """Return the expression that names each row's arm: its ``axes`` labels joined by `` · ``.

    E.g. ``tiny-l · fail=0.1`` (:func:`arm_label` per axis); ``ignore_nulls`` skips an axis a row lacks.
    """
    labels = [pl.col(a).map_elements(lambda v, a=a: arm_label(a, v), return_dtype=pl.String) for a in axes]
    return pl.concat_str(labels, separator=" · ", ignore_nulls=ignore_nulls)


def arm_stats(rows: pl.DataFrame, by: Sequence[str], metric: str = FINAL) -> pl.DataFrame:
    """Per arm (one row per combination of ``by``, seeds pooled): final pass with its interval and the health.

    Columns: ``by``, then :data:`HEALTH_METRICS` (means over the arm's runs; ``episodes`` is their sum), the
    standard error ``se`` and the 95 % half-width ``± (95 %)`` of final pass, ``runs``, and the SFT model's
    final pass and transport mix (``sft …``) when the runs evaluated it; ``_queries`` / ``_outcomes`` hold
    the arm's per-query final pass (runs × queries) when every run of the arm lists it, else null.

    The SE is the bootstrap SE over queries and seeds (:func:`contrast_se`, :data:`BOOTSTRAP_RESAMPLES`
    resamples, fixed seed) when the runs carry per-query outcomes (the published study's), else the larger
    of the seeds' SE and the binomial SE over the pooled episodes; neither is taken below that binomial SE
    Laplace-smoothed, p = (passes + 1) / (episodes + 2), so 0 of 12 is 0 % ± 13.5 pts rather than an exact
    0 ± 0.

    ``metric`` is the rate the ``final_pass`` column, its interval and the per-query outcomes are of:
    ``eval/final_pass`` by default, e.g. ``ood/cs_micro`` for an OOD comparison, whose health columns then
    come from the same split (``ood/termination/…``).
    """
    split = metric.split("/", 1)[0]
    metrics = {
        name: m.replace("eval/", f"{split}/", 1) for name, m in {**HEALTH_METRICS, **_SFT_METRICS}.items()
    }
    metrics["final_pass"] = metric
    columns = {
        **{k: rows.schema[k] if k in rows.schema else pl.String for k in by},
        **{name: pl.Float64 for name in metrics},
        "se": pl.Float64,
        "± (95 %)": pl.Float64,
        "runs": pl.UInt32,
    }
    picked = rows.filter(pl.col("metric").is_in(list(metrics.values()))) if rows.height else rows
    if picked.height == 0 or not picked.filter(pl.col("metric") == metric).height:
        return pl.DataFrame(schema={**columns, **_OUTCOME_TYPES})
    per_run = (
        picked.group_by([*by, "grid", "run", "metric"])
        .agg(pl.col("value").mean())
        .pivot(on="metric", index=[*by, "grid", "run"], values="value")
    )
    for name in metrics.values():
        if name not in per_run.columns:
            per_run = per_run.with_columns(pl.lit(None, dtype=pl.Float64).alias(name))
    per_run = per_run.filter(pl.col(metric).is_not_null())
    stats = per_run.group_by(list(by)).agg(
        *[pl.col(m).mean().alias(name) for name, m in metrics.items() if name != "episodes"],
        pl.col(metrics["episodes"]).sum().alias("episodes"),
        pl.col(metric).std().fill_null(0.0).alias("_sd"),
        pl.len().cast(pl.UInt32).alias("runs"),
    )
    # Laplace-smoothed binomial SE, so 0 of 12 (or 12 of 12) does not read as an exact 0 % ± 0
    smoothed = (pl.col("final_pass") * pl.col("episodes") + 1) / (pl.col("episodes") + 2)
    binomial = (smoothed * (1 - smoothed) / (pl.col("episodes") + 2)).sqrt()
    binomial = pl.when(pl.col("episodes") > 0).then(binomial)  # null without an episode count
    seeds = pl.when(pl.col("runs") >= 2).then(pl.col("_sd") / pl.col("runs").cast(pl.Float64).sqrt())
    stats = stats.with_columns(pl.max_horizontal(binomial, seeds).alias("se"), binomial.alias("_binomial"))
    stats = _with_outcomes(stats, rows, per_run, by, metric)
    bootstrap = [
        None if o is None else contrast_se([o], [1.0]) for o in _outcomes_of(stats)
    ]  # over queries and seeds; never below the smoothed binomial SE (0 of 600 is not an exact 0 ± 0)
    stats = stats.with_columns(pl.Series("_bootstrap", bootstrap, dtype=pl.Float64)).with_columns(
        pl.when(pl.col("_bootstrap").is_not_null())
        .then(pl.max_horizontal("_bootstrap", "_binomial"))
        .otherwise(pl.col("se"))
        .alias("se")
    )
    stats = stats.with_columns((INTERVAL_Z * pl.col("se")).alias("± (95 %)"))
    return stats.select(*columns, "_queries", "_outcomes").sort(list(by))


_OUTCOME_TYPES = {"_queries": pl.List(pl.Int64), "_outcomes": pl.List(pl.List(pl.Float64))}


def _with_outcomes(
    stats: pl.DataFrame, rows: pl.DataFrame, per_run: pl.DataFrame, by: Sequence[str], metric: str
) -> pl.DataFrame:
    """Add each arm's per-query ``metric`` (``_queries``, ``_outcomes``: runs × queries) when all list it."""
    prefix = f"{QUERY_METRIC}{metric}/"
    picked = rows.filter(pl.col("metric").str.starts_with(prefix))
    if picked.height == 0:
        return stats.with_columns(*[pl.lit(None, dtype=t).alias(k) for k, t in _OUTCOME_TYPES.items()])
    runs = (
        picked.with_columns(
            pl.col("metric").str.strip_prefix(prefix).cast(pl.Int64, strict=False).alias("_q")
        )
        .group_by([*by, "grid", "run", "_q"])
        .agg(pl.col("value").mean())
        .sort("_q")
        .group_by([*by, "grid", "run"])
        .agg(pl.col("_q"), pl.col("value"))
    )
    runs = per_run.select(*by, "grid", "run").join(
        runs, on=[*by, "grid", "run"], how="left", nulls_equal=True
    )
    cells = []
    for key, group in runs.sort("grid", "run").group_by(list(by), maintain_order=True):
        queries = group["_q"].to_list()
        complete = all(q is not None and len(q) > 0 and q == queries[0] for q in queries)
        cells.append(
            {
                **dict(zip(by, key, strict=True)),
                "_queries": queries[0] if complete else None,
                "_outcomes": group["value"].to_list() if complete else None,
            }
        )
    schema = {**{k: stats.schema[k] for k in by}, **_OUTCOME_TYPES}
    return stats.join(pl.DataFrame(cells, schema=schema), on=list(by), how="left", nulls_equal=True)


def rate_intervals(rows: pl.DataFrame, by: Sequence[str], split: str = "eval") -> pl.DataFrame:
    """Return each arm's held-out rates with bootstrap 95 % intervals over queries and seeds.

    One row per arm × rate (``final_pass``, ``cs_micro``, ``cs_macro``, ``hard_macro``, ``sum``: the
    per-query lists of :func:`~star_lib.experiments.results.held_out_outcomes`) of ``split`` (``eval`` or
    ``ood``): ``value`` (mean over runs and queries), ``± 95 %`` (:data:`INTERVAL_Z` × :func:`contrast_se`)
    and ``runs``. Arms whose runs do not all list the same queries are left out; empty without per-query
    rows (runs of your own, summaries published before the lists existed).
    """
    from star_lib.experiments.results import OUTCOME_COLUMNS

    schema = {
        **{k: rows.schema[k] if k in rows.schema else pl.String for k in by},
        "rate": pl.String,
        "value": pl.Float64,
        "± 95 %": pl.Float64,
        "runs": pl.UInt32,
    }
    prefix = f"{QUERY_METRIC}{split}/"
    picked = rows.filter(pl.col("metric").str.starts_with(prefix)) if rows.height else rows
    if picked.height == 0:
        return pl.DataFrame(schema=schema)
    parts = picked.with_columns(
        pl.col("metric").str.strip_prefix(prefix).str.split("/").alias("_parts")
    ).with_columns(
        pl.col("_parts").list.first().alias("rate"),
        pl.col("_parts").list.last().cast(pl.Int64, strict=False).alias("_q"),
    )
    per_run = (
        parts.group_by([*by, "rate", "grid", "run", "_q"])
        .agg(pl.col("value").mean())
        .sort("_q")
        .group_by([*by, "rate", "grid", "run"])
        .agg(pl.col("_q"), pl.col("value"))
        .sort([*by, "grid", "run"])
    )
    order = {name: i for i, name in enumerate(OUTCOME_COLUMNS)}
    out = []
    for key, group in per_run.group_by([*by, "rate"], maintain_order=True):
        queries = group["_q"].to_list()
        if not queries[0] or any(q != queries[0] for q in queries):
            continue
        cell = Outcomes(tuple(queries[0]), tuple(tuple(v) for v in group["value"].to_list()))
        se = contrast_se([cell], [1.0])
        out.append(
            {
                **dict(zip([*by, "rate"], key, strict=True)),
                "value": cell.mean,
                "± 95 %": INTERVAL_Z * se,
                "runs": group.height,
            }
        )
    frame = pl.DataFrame(out, schema=schema)
    return frame.sort([*by, pl.col("rate").replace_strict(order, default=99)])


def seeds_table(
    stats: pl.DataFrame, by: Sequence[str], half_width: float = 0.05, most: int = 20
) -> pl.DataFrame:
    """Per arm of :func:`arm_stats`: its runs, its interval now and the seeds it needs for ``± half_width``.

    ``seeds needed`` is :func:`seeds_for` (null when the arm's runs list no per-query outcomes, or when
    ``most`` seeds would not do). Planning a grid's seeds from a first pass of its runs: e.g.
    ``seeds_table(arm_stats(rows, ["model", "algorithm"]), ["model", "algorithm"])``.
    """
    needed = [None if o is None else seeds_for(o, half_width, most) for o in _outcomes_of(stats)]
    return stats.select(*by, "runs", "final_pass", "± (95 %)").with_columns(
        pl.Series("seeds needed", needed, dtype=pl.UInt32)
    )


def _outcomes_of(stats: pl.DataFrame) -> list[Outcomes | None]:
    """Each arm's :class:`Outcomes` (None where its runs do not all list them)."""
    return [
        None if q is None or v is None else Outcomes(tuple(q), tuple(tuple(r) for r in v))
        for q, v in zip(stats["_queries"].to_list(), stats["_outcomes"].to_list(), strict=True)
    ]


def health_table(stats: pl.DataFrame) -> pl.DataFrame:
    """Return the run-health table a finding shows (one row per arm).

    Per arm: the termination mix, format errors, the transport mix, tool calls and turns beside final pass
    and its interval; the SFT model's columns only when the runs evaluated it.
    """
    by = stats.columns[: stats.columns.index("final_pass")]
    rest = [
        c for c in stats.columns if c not in (*by, "final_pass", "± (95 %)", "se") and not c.startswith("_")
    ]
    shown = stats.select(*by, "final_pass", "± (95 %)", *rest)
    sft = [c for c in _SFT_METRICS if c in shown.columns]
    if not shown.height or all(shown[c].null_count() == shown.height for c in sft):
        shown = shown.drop(sft)
    if "model" in shown.columns:
        shown = shown.with_columns(pl.col("model").map_elements(model_label, return_dtype=pl.String))
    return shown


def check_failures(rows: pl.DataFrame, by: Sequence[str]) -> pl.DataFrame:
    """Return the per-check failure profile: one row per check, one column per arm.

    Checks are ``cs/<check>`` and ``hard/<check>``; each cell is the share of the arm's evaluation episodes
    that fail the check (1 − its pass rate, mean over the arm's runs).
    """
    picked = rows.filter(pl.col("metric").str.contains(r"^eval/(cs|hard)/")) if rows.height else rows
    if picked.height == 0:
        return pl.DataFrame(schema={"check": pl.String})
    labelled = picked.with_columns(
        arm_name(by).alias("arm"), pl.col("metric").str.strip_prefix("eval/").alias("check")
    )
    order = labelled.sort(list(by))["arm"].unique(maintain_order=True).to_list()
    wide = (
        labelled.group_by(["check", "arm"])
        .agg((1 - pl.col("value").mean()).alias("fail"))
        .pivot(on="arm", index="check", values="fail")
    )
    return wide.select("check", *order).sort("check")


def _arms(stats: pl.DataFrame, axis: str, model: str | None = None, **fixed: Any) -> dict[Any, Arm]:
    """``{axis value: Arm}`` of one model's arms (and fixed values of other axes)."""
    rows = stats
    if model is not None and "model" in rows.columns:
        rows = rows.filter(pl.col("model") == model)
    for key, value in fixed.items():
        rows = rows.filter(pl.col(key) == value)
    out = {}
    for row, outcomes in zip(rows.iter_rows(named=True), _outcomes_of(rows), strict=True):
        prefix = ", ".join(
            arm_label(k, v) if k in ("tool_failure_rate", "rl_data_size") else f"{k}={v}"
            for k, v in fixed.items()
        )
        label = arm_label(axis, row[axis]) + (f" at {prefix}" if prefix else "")
        out[row[axis]] = Arm(
            label=label,
            value=_finite(row["final_pass"]),
            se=_finite(row["se"]),
            floor=_finite(row["untrained"]),
            turn_limit=_finite(row["turn limit"]) or 0.0,
            context_limit=_finite(row["context limit"]) or 0.0,
            format_errors=max(_finite(row["format errors"]) or 0.0, _finite(row["malformed"]) or 0.0),
            turns=_finite(row["turns"]),
            transport={k: v for k in TRANSPORT_COLUMNS if (v := _finite(row[k])) is not None},
            outcomes=outcomes,
        )
    return out


def _transport_shift(better: Arm, worse: Arm) -> str | None:
    """Describe the largest transport-share move beyond :data:`SHIFT_POINTS` between two arms (or None)."""
    moves = [
        (better.transport[k] - worse.transport[k], k)
        for k in TRANSPORT_COLUMNS
        if k in better.transport and k in worse.transport
    ]
    moves = [(d, k) for d, k in moves if abs(d) > SHIFT_POINTS]
    if not moves:
        return None
    delta, kind = max(moves, key=lambda m: abs(m[0]))
    return (
        f"its {kind} share of travel legs is {_pct(better.transport[kind])} against "
        f"{_pct(worse.transport[kind])} ({_pts(delta)})"
    )


def behaviour_shifts(comparisons: Sequence[Comparison], stats: pl.DataFrame | None = None) -> list[str]:
    """Sentences for every gain that comes with a shift in behaviour (the transport mix moves > 10 pts).

    Checked between the two arms of each judged comparison (the higher-scoring arm against the other) and,
    when the runs also evaluated their SFT model, between the run's result and that model (e.g. GRPO raises
    final pass while the flight share falls from 76.9 % to 0.2 %: the policy learned to drive instead).
    """
    out: list[str] = []
    seen: set[tuple[str, str]] = set()
    for c in comparisons:
        if len(c.arms) != 2 or c.outcome in ("missing", "no evidence") or c.our_diff is None:
            continue
        if abs(c.our_diff) <= c.tolerance:
            continue
        better, worse = c.arms if c.our_diff > 0 else c.arms[::-1]
        if (better.label, worse.label) in seen:
            continue
        seen.add((better.label, worse.label))
        shift = _transport_shift(better, worse)
        if shift:
            out.append(
                f"{better.label} scores {_pts_abs(abs(c.our_diff))} above {worse.label}, and {shift}: "
                "the gain comes with a change of behaviour."
            )
    if stats is not None and stats.height and "sft final_pass" in stats.columns:
        for row in stats.iter_rows(named=True):
            after, before = _finite(row["final_pass"]), _finite(row["sft final_pass"])
            if after is None or before is None or after - before <= 0.01:
                continue
            mix = {k: row[k] for k in TRANSPORT_COLUMNS if row[k] is not None}
            sft_mix = {k: row[f"sft {k}"] for k in TRANSPORT_COLUMNS if row[f"sft {k}"] is not None}
            run, sft = Arm("the trained model", after, transport=mix), Arm("SFT", before, transport=sft_mix)
            shift = _transport_shift(run, sft)
            if shift:
                where = ", ".join(f"{k}={row[k]}" for k in stats.columns[: stats.columns.index("final_pass")])
                out.append(
                    f"At {where} the trained model raises final pass from {_pct(before)} to {_pct(after)}, "
                    f"and {shift} of the SFT model: the gain comes with a change of behaviour."
                )
    return out


def _finish(finding: Finding, stats: pl.DataFrame, rows: pl.DataFrame, by: Sequence[str]) -> Finding:
    """Attach the run-health and check tables to a finding, and say any behaviour shift in its prose."""
    finding.health = health_table(stats)
    finding.checks = check_failures(rows, by)
    finding.arms = tuple(by)
    shifts = behaviour_shifts(finding.comparisons, stats)
    finding.shifts = shifts
    if shifts and finding.runs:
        finding.verdict = f"{finding.verdict} Behaviour: {' '.join(shifts)}"
    return finding


# ───────────────────────────── the findings ─────────────────────────────


def reward_design(
    results: pl.DataFrame, scale: str = "tiny", *, tolerance: float = 0.01, stable_tolerance: float = 0.05
) -> Finding:
    """Table 1 (in-domain metrics by reward × model) and Table 2 (OOD accuracy by reward)."""
    mine_rows = ours(results, "reward", scale)
    mine = aggregate(mine_rows, ["model", "reward"])
    stats = arm_stats(mine_rows, ["model", "reward"])
    paper = paper_rows("reward")
    large = [m for m in _models_in(mine) if paper_stand_in(m, PAPER_MODELS) == PAPER_MODELS[-1]]
    comparisons = categorical_comparisons(  # the paper's numbers compare rewards at 1.5B only
        paper,
        mine.filter(~pl.col("model").is_in(large)),
        "reward",
        _REWARD_ORDER,
        FINAL,
        tolerance,
        stable_tolerance,
        stats,
    )
    comparisons += _reward_claims(mine, stats, large, tolerance, stable_tolerance)
    comparisons += _ood_tax(mine_rows, scale, tolerance, stable_tolerance)
    table = _reward_table(mine_rows)
    finding = Finding(
        key="reward",
        title=FINDING_TITLES["reward"],
        chart_data=_chart_rows(paper, mine, "reward"),
        table=table,
        comparisons=comparisons,
        runs=_run_count(mine_rows),
        verdict=verdict(comparisons, have_runs=mine.height > 0, scope=_scope(mine, "reward", scale)),
        tables={"ood": _ood_table(results, scale)},
        notes=_ood_notes(mine_rows, scale),
    )
    return _finish(finding, stats, mine_rows, ["model", "reward"])


def _reward_claims(
    mine: pl.DataFrame, stats: pl.DataFrame, large: Sequence[str], tolerance: float, stable_tolerance: float
) -> list[Comparison]:
    """Check finding 1's statements beyond the paper's numbers, per model of our runs.

    A model standing for 7B (``large``) should gain from SUM rather than CURRICULUM; and for every model
    SUCCESS should not be the best reward: it is checked against the model's best other reward of the
    paper's (SUM, MACRO, CURRICULUM), when our runs have SUCCESS.
    """
    out = []
    for model in _models_in(mine):
        values = _values(mine.filter(pl.col("model") == model), "reward")
        arms = _arms(stats, "reward", model)
        pairs = []
        if model in large:
            pairs.append(("sum", "curriculum", "large models gain most from SUM, small ones from CURRICULUM"))
        rivals = [r for r in ("sum", "macro", "curriculum") if r in values]
        if "success" in values and rivals:
            pairs.append((max(rivals, key=values.__getitem__), "success", "SUCCESS is never the best reward"))
        for a, b, statement in pairs:
            out.append(
                _claim(
                    f"{a} > {b}",
                    "higher",
                    statement,
                    values.get(a),
                    values.get(b),
                    model_label(model),
                    FINAL,
                    tolerance,
                    stable_tolerance,
                    arms.get(a),
                    arms.get(b),
                )
            )
    return out


def _ood_tax(
    mine_rows: pl.DataFrame, scale: str, tolerance: float, stable_tolerance: float
) -> list[Comparison]:
    """Table 2's claim, per model: MACRO keeps OOD generalisation, the dense SUM reward pays for it.

    Empty when our runs have no OOD metric (the finding's notes say so).
    """
    metric = ood_metric(scale)
    mine = aggregate(mine_rows, ["model", "reward"], metric)
    stats = arm_stats(mine_rows, ["model", "reward"], metric)
    out = []
    for model in _models_in(mine):
        values = _values(mine.filter(pl.col("model") == model), "reward")
        arms = _arms(stats, "reward", model)
        out.append(
            _claim(
                "macro > sum (OOD)",
                "higher",
                "dense rewards pay an out-of-domain tax; MACRO keeps generalisation (Table 2)",
                values.get("macro"),
                values.get("sum"),
                f"{model_label(model)} {_metric_label(metric)}",
                metric,
                tolerance,
                stable_tolerance,
                arms.get("macro"),
                arms.get("sum"),
            )
        )
    return out


def _reward_table(mine_rows: pl.DataFrame) -> pl.DataFrame:
    ours_wide = _wide_metrics(mine_rows, ["model", "reward"], IN_DOMAIN)
    ours_wide = ours_wide.with_columns(
        pl.lit("ours").alias("source"), pl.lit(None, dtype=pl.String).alias("note")
    )
    paper = paper_rows(["reward", "baseline"])
    paper_wide = paper.select(
        pl.lit("paper").alias("source"),
        "model",
        pl.coalesce(pl.col("reward"), pl.col("note"), pl.col("run")).alias("reward"),
        *[pl.lit(None, dtype=pl.Float64).alias(m.split("/", 1)[-1]) for m in IN_DOMAIN[:-1]],
        pl.col("value").alias("final_pass"),
        pl.when(pl.col("relation") == "<")
        .then(pl.lit("upper bound"))
        .otherwise(pl.col("note"))
        .alias("note"),
    )
    columns = ["source", "model", "reward", *[m.split("/", 1)[-1] for m in IN_DOMAIN], "note"]
    table = pl.concat([paper_wide.select(columns), ours_wide.select(columns)], how="vertical_relaxed")
    return table.with_columns(pl.col("model").map_elements(model_label, return_dtype=pl.String))


def _ood_table(results: pl.DataFrame, scale: str) -> pl.DataFrame:
    """Table 2: exact match per OOD dataset — the paper's STAR models, Search-R1, and our runs by reward."""
    paper = paper_rows(["ood"], metric=None).filter(pl.col("metric").str.starts_with("qa/"))
    paper_part = paper.select(
        pl.col("metric").str.split("/").list.get(1).alias("dataset"),
        pl.lit("paper").alias("source"),
        pl.when(pl.col("run") == "Search-R1")
        .then(pl.lit("Search-R1"))
        .otherwise(pl.col("model").map_elements(model_label, return_dtype=pl.String) + " " + pl.col("reward"))
        .alias("system"),
        pl.col("value").alias("em"),
    )
    mine_rows = ours(results, None, scale)
    mine_rows = mine_rows.filter(
        pl.col("metric").str.starts_with("qa/") & pl.col("metric").str.ends_with("/em")
    )
    mine = mine_rows.group_by(["metric", "model", "reward"]).agg(pl.col("value").mean().alias("em"))
    ours_part = mine.select(
        pl.col("metric").str.split("/").list.get(1).alias("dataset"),
        pl.lit("ours").alias("source"),
        (pl.col("model").map_elements(model_label, return_dtype=pl.String) + " " + pl.col("reward")).alias(
            "system"
        ),
        pl.col("em"),
    )
    return pl.concat([paper_part, ours_part], how="vertical_relaxed").sort(["dataset", "source", "system"])


def model_scale(
    results: pl.DataFrame, scale: str = "tiny", *, tolerance: float = 0.01, stable_tolerance: float = 0.05
) -> Finding:
    """Fig. 4: final pass rate by model size (the paper's SUM runs; SFT-only and Kimi-K2.5 as baselines)."""
    mine_rows = ours(results, "scale", scale)
    mine = aggregate(mine_rows, ["model"])
    stats = arm_stats(mine_rows, ["model"])
    arms = _arms(stats, "model")
    paper = paper_rows("reward").filter(pl.col("reward") == "sum")
    comparisons = []
    p = _values(paper, "model")
    o = _values(mine, "model")
    if scale == "tiny":  # the tiny sizes stand for the paper's by rank: tiny-s ~ 1.5B, tiny ~ 3B, tiny-l ~ 7B
        rank = list(zip(TINY_SCALE, PAPER_MODELS, strict=True))
        o = {big: o[small] for small, big in rank if small in o}
        arms = {big: arms[small] for small, big in rank if small in arms}
    models = [m for m in _MODEL_ORDER if m in p]
    for a, b in itertools.combinations(models, 2):
        comparisons.append(
            _pair(
                model_label(b),
                model_label(a),
                p[b],
                p[a],
                "SUM",
                o.get(b),
                o.get(a),
                "ours",
                FINAL,
                tolerance,
                stable_tolerance,
                arms.get(b),
                arms.get(a),
            )
        )
    chart = _chart_rows(
        paper.with_columns(pl.col("model").alias("size")),
        mine.with_columns(pl.col("model").alias("size")),
        "size",
    ).with_columns(
        pl.col("x").map_elements(model_label, return_dtype=pl.String), pl.lit("final pass").alias("model")
    )
    baselines = paper_rows("baseline").select(
        pl.lit("paper").alias("source"),
        pl.coalesce(pl.col("note"), pl.col("run")).alias("system"),
        pl.col("model").map_elements(model_label, return_dtype=pl.String).alias("size"),
        pl.col("value").alias("final_pass"),
        pl.col("relation"),
    )
    table = pl.concat(
        [
            chart.select(
                pl.col("source"),
                pl.lit("SUM reward, RL").alias("system"),
                pl.col("x").alias("size"),
                pl.col("value").alias("final_pass"),
                pl.lit("=").alias("relation"),
            ),
            baselines,
        ],
        how="vertical_relaxed",
    )
    finding = Finding(
        key="scale",
        title=FINDING_TITLES["scale"],
        chart_data=chart,
        table=table,
        comparisons=comparisons,
        runs=_run_count(mine_rows),
        verdict=verdict(comparisons, have_runs=mine.height > 0, scope=_scope(mine, "model", scale)),
    )
    return _finish(finding, stats, mine_rows, ["model"])


def data_quantity(
    results: pl.DataFrame, scale: str = "tiny", *, tolerance: float = 0.01, stable_tolerance: float = 0.05
) -> Finding:
    """Fig. 5: in-domain final pass and average OOD exact match by number of RL prompts.

    The paper's size ``s`` is compared with our size at the same position of the grid
    (``finding_axes("data", scale)``; at ``tiny`` scale :data:`~star_lib.experiments.grids.TINY_DATA_SIZES`).
    """
    mine_rows = ours(results, "data", scale)
    paper_sizes, our_sizes = (
        finding_axes("data", "paper")["rl_data_size"],
        finding_axes("data", scale)["rl_data_size"],
    )
    equivalent = dict(zip(paper_sizes, our_sizes, strict=True))
    stats = arm_stats(mine_rows, ["model", "rl_data_size"])
    comparisons: list[Comparison] = []
    frames = []
    for paper_metric, metric, label in (
        (FINAL, FINAL, "final pass"),
        (PAPER_OOD, ood_metric(scale), "OOD" if scale == "tiny" else "avg OOD EM"),
    ):
        paper = paper_rows("data", paper_metric)
        mine = aggregate(mine_rows, ["model", "rl_data_size"], metric)
        arms = _arms(
            stats if metric == FINAL else arm_stats(mine_rows, ["model", "rl_data_size"], metric),
            "rl_data_size",
        )
        p = _values(paper, "rl_data_size")
        o = _values(mine, "rl_data_size")
        sizes = sorted(p)
        for a, b in itertools.pairwise(sizes):
            if p[a] > p[b]:  # the paper's higher value first, so the context reads in the pair's order
                a, b = b, a
            ea, eb = equivalent.get(a, a), equivalent.get(b, b)
            comparisons.append(
                _pair(
                    f"n={eb}" if scale == "tiny" else f"n={b}",
                    f"n={ea}" if scale == "tiny" else f"n={a}",
                    p[b],
                    p[a],
                    f"{_metric_label(paper_metric)}, n={b} vs n={a}",
                    o.get(eb),
                    o.get(ea),
                    _metric_label(metric),
                    metric,
                    tolerance,
                    stable_tolerance,
                    arms.get(eb),
                    arms.get(ea),
                )
            )
        paper_scaled = paper.with_columns(pl.col("rl_data_size").replace(equivalent))
        frames.append(
            _chart_rows(paper_scaled, mine, "rl_data_size").with_columns(pl.lit(label).alias("model"))
        )
    chart = pl.concat(frames, how="vertical_relaxed").with_columns(pl.col("x").cast(pl.Int64).alias("size"))
    table = (
        chart.select("model", "source", "size", "value", "sd", "n")
        .rename({"model": "metric", "size": "rl_data_size"})
        .sort(["metric", "rl_data_size", "source"])
    )
    mine_final = aggregate(mine_rows, ["model", "rl_data_size"])
    notes = []
    if scale == "tiny":
        notes.append(
            "Paper sizes are mapped to the tiny grid's sizes, position for position: "
            + ", ".join(f"{k}→{v}" for k, v in equivalent.items())
            + "."
        )
    notes += _ood_notes(mine_rows, scale)
    finding = Finding(
        key="data",
        title=FINDING_TITLES["data"],
        chart_data=chart,
        table=table,
        comparisons=comparisons,
        runs=_run_count(mine_rows),
        notes=notes,
        verdict=verdict(
            comparisons, have_runs=mine_final.height > 0, scope=_scope(mine_final, "rl_data_size", scale)
        ),
    )
    return _finish(finding, stats, mine_rows, ["model", "rl_data_size"])


def data_difficulty(
    results: pl.DataFrame, scale: str = "tiny", *, tolerance: float = 0.01, stable_tolerance: float = 0.05
) -> Finding:
    """Table 3: metrics by RL prompt difficulty (easy / medium / hard / the 4:3:3 mixture)."""
    mine_rows = ours(results, "difficulty", scale)
    mine = aggregate(mine_rows, ["model", "difficulty"])
    stats = arm_stats(mine_rows, ["model", "difficulty"])
    paper_all = paper_rows("difficulty", metric=None)
    o = {}
    for model in _models_in(mine) or ["tiny"]:
        o[model] = _values(mine.filter(pl.col("model") == model), "difficulty")
    comparisons = []
    collapse = paper_all.filter((pl.col("difficulty") == "hard") & pl.col("value").is_null())
    if collapse.height:
        statement = collapse["note"][0]
        for model, values in o.items():
            arms = _arms(stats, "difficulty", model)
            comparisons.append(
                _claim(
                    "4:3:3 > hard",
                    "higher",
                    statement,
                    values.get("4:3:3"),
                    values.get("hard"),
                    model_label(model),
                    FINAL,
                    tolerance,
                    stable_tolerance,
                    arms.get("4:3:3"),
                    arms.get("hard"),
                )
            )
    table_ours = _wide_metrics(mine_rows, ["model", "difficulty"], IN_DOMAIN).with_columns(
        pl.lit("ours").alias("source"), pl.lit(None, dtype=pl.String).alias("note")
    )
    paper_wide = (
        paper_all.group_by("difficulty")
        .agg(
            pl.col("value").filter(pl.col("metric") == "eval/cs_macro").first().alias("cs_macro"),
            pl.col("value").filter(pl.col("metric") == FINAL).first().alias("final_pass"),
            pl.col("note").drop_nulls().first().alias("note"),
        )
        .with_columns(pl.lit("paper").alias("source"), pl.lit(None, dtype=pl.String).alias("model"))
    )
    columns = ["source", "model", "difficulty", "cs_macro", "final_pass", "note"]
    table = pl.concat(
        [paper_wide.select(columns), table_ours.select(columns)], how="vertical_relaxed"
    ).with_columns(pl.col("model").map_elements(model_label, return_dtype=pl.String))
    table = table.sort(
        [
            "source",
            pl.col("difficulty").replace_strict(
                {d: i for i, d in enumerate(_DIFFICULTY_ORDER)}, default=99, return_dtype=pl.Int64
            ),
        ]
    )
    chart = _chart_rows(paper_rows("difficulty"), mine, "difficulty")
    finding = Finding(
        key="difficulty",
        title=FINDING_TITLES["difficulty"],
        chart_data=chart,
        table=table,
        comparisons=comparisons,
        runs=_run_count(mine_rows),
        verdict=verdict(comparisons, have_runs=mine.height > 0, scope=_scope(mine, "difficulty", scale)),
        notes=[
            "The paper reports easy-only training by its commonsense macro rate (79.7 %) and hard-only "
            "training only in words (it collapses), so the chart shows the 4:3:3 final pass rate "
            "as the paper's bar."
        ],
    )
    return _finish(finding, stats, mine_rows, ["model", "difficulty"])


def algorithms(
    results: pl.DataFrame,
    scale: str = "tiny",
    curves: pl.DataFrame | None = None,
    *,
    tolerance: float = 0.01,
    stable_tolerance: float = 0.05,
) -> Finding:
    """Table 4: final pass by algorithm × model, with the training cost (wall time, GPU-hours, tokens)."""
    mine_rows = ours(results, "algorithm", scale)
    mine = aggregate(mine_rows, ["model", "algorithm"])
    stats = arm_stats(mine_rows, ["model", "algorithm"])
    paper = paper_rows("algorithm")
    comparisons = categorical_comparisons(
        paper, mine, "algorithm", _ALGORITHM_ORDER, FINAL, tolerance, stable_tolerance, stats
    )
    finding = Finding(
        key="algorithm",
        title=FINDING_TITLES["algorithm"],
        chart_data=_chart_rows(paper, mine, "algorithm"),
        table=_cost_table(mine_rows, curves),
        comparisons=comparisons,
        runs=_run_count(mine_rows),
        verdict=verdict(comparisons, have_runs=mine.height > 0, scope=_scope(mine, "algorithm", scale)),
        notes=_missing_metric_notes(
            mine_rows, ["rl/", "env/", "train/"], "RL training metrics (the rl stage)"
        ),
    )
    return _finish(finding, stats, mine_rows, ["model", "algorithm"])


def _cost_table(mine_rows: pl.DataFrame, curves: pl.DataFrame | None) -> pl.DataFrame:
    """Algorithms × models: final pass and cost, paper beside ours."""
    paper_all = paper_rows("algorithm", metric=None)
    paper = (
        paper_all.group_by(["model", "algorithm"])
        .agg(
            pl.col("value").filter(pl.col("metric") == FINAL).first().alias("final_pass"),
            pl.col("value").filter(pl.col("metric") == "cost/gpu_hours").first().alias("gpu_hours"),
        )
        .with_columns(
            pl.lit("paper").alias("source"),
            pl.lit(None, dtype=pl.Float64).alias("wall_s"),
            pl.lit(None, dtype=pl.Float64).alias("tokens"),
        )
    )
    wide = _wide_metrics(mine_rows, ["model", "algorithm"], [FINAL, "cost/gpu_hours", "cost/wall_s"])
    wide = wide.rename({"final_pass": "final_pass", "gpu_hours": "gpu_hours", "wall_s": "wall_s"})
    tokens = _tokens(mine_rows, curves)
    if tokens.height:
        wide = wide.join(tokens, on=["model", "algorithm"], how="left")
    else:
        wide = wide.with_columns(pl.lit(None, dtype=pl.Float64).alias("tokens"))
    wide = wide.with_columns(pl.lit("ours").alias("source"))
    columns = ["source", "model", "algorithm", "final_pass", "wall_s", "gpu_hours", "tokens"]
    table = pl.concat([paper.select(columns), wide.select(columns)], how="vertical_relaxed")
    return table.with_columns(pl.col("model").map_elements(model_label, return_dtype=pl.String)).sort(
        [
            "source",
            "model",
            pl.col("algorithm").replace_strict(
                {a: i for i, a in enumerate(_ALGORITHM_ORDER)}, default=99, return_dtype=pl.Int64
            ),
        ]
    )


def _tokens(mine_rows: pl.DataFrame, curves: pl.DataFrame | None) -> pl.DataFrame:
    """Training tokens per model × algorithm (mean over seeds), from final metrics or the last logged step."""
    schema = {"model": pl.String, "algorithm": pl.String, "tokens": pl.Float64}
    for metric in TOKEN_METRICS:
        rows = mine_rows.filter(pl.col("metric") == metric) if mine_rows.height else mine_rows
        if rows.height:
            return rows.group_by(["model", "algorithm"]).agg(pl.col("value").mean().alias("tokens"))
    if curves is not None and curves.height and "algorithm" in curves.columns:
        steps = curves.filter(pl.col("metric").str.ends_with("num_tokens"))
        if steps.height:  # the last logged count of each run
            last = steps.group_by(["run", "model", "algorithm"]).agg(pl.col("value").max())
            return last.group_by(["model", "algorithm"]).agg(pl.col("value").mean().alias("tokens"))
    return pl.DataFrame(schema=schema)


def env_noise(
    results: pl.DataFrame,
    scale: str = "tiny",
    curves: pl.DataFrame | None = None,
    *,
    tolerance: float = 0.01,
    stable_tolerance: float = 0.05,
) -> Finding:
    """Fig. 6: test success by tool failure rate (and training curves per failure rate).

    When the runs were also scored with clean tools (``eval.also_clean``), ``tables["clean"]`` holds each
    arm's noisy and clean final pass and their difference (the comparisons stay on the noisy scores, as in
    the paper).
    """
    mine_rows = ours(results, "noise", scale)
    mine = aggregate(mine_rows, ["model", "tool_failure_rate"])
    stats = arm_stats(mine_rows, ["model", "tool_failure_rate"])
    statements = paper_rows("noise")
    comparisons = []
    for model in _models_in(mine) or ["tiny"]:
        o = _values(mine.filter(pl.col("model") == model), "tool_failure_rate")
        arms = _arms(stats, "tool_failure_rate", model)
        base = o.get(0.0)
        for row in statements.iter_rows(named=True):
            rate, note = row["tool_failure_rate"], row["note"] or ""
            expect = "lower" if "drop" in note else "similar"
            sign = "<" if expect == "lower" else "≈"
            comparisons.append(
                _claim(
                    f"fail={rate:g} {sign} fail=0",
                    expect,
                    note,
                    o.get(rate),
                    base,
                    model_label(model),
                    FINAL,
                    tolerance,
                    stable_tolerance,
                    arms.get(rate),
                    arms.get(0.0),
                )
            )
    chart = (
        mine.select(
            pl.lit("ours").alias("source"),
            pl.col("model").map_elements(model_label, return_dtype=pl.String),
            pl.col("tool_failure_rate"),
            "value",
            "sd",
            "n",
        )
        if mine.height
        else pl.DataFrame(
            schema={
                "source": pl.String,
                "model": pl.String,
                "tool_failure_rate": pl.Float64,
                "value": pl.Float64,
                "sd": pl.Float64,
                "n": pl.UInt32,
            }
        )
    )
    paper_text = statements.select(
        pl.lit("paper").alias("source"),
        pl.col("model").map_elements(model_label, return_dtype=pl.String),
        "tool_failure_rate",
        pl.col("note"),
    )
    table = pl.concat(
        [
            paper_text.with_columns(pl.lit(None, dtype=pl.Float64).alias("final_pass")),
            chart.select(
                "source",
                "model",
                "tool_failure_rate",
                pl.lit(None, dtype=pl.String).alias("note"),
                pl.col("value").alias("final_pass"),
            ),
        ],
        how="vertical_relaxed",
    ).select("source", "model", "tool_failure_rate", "final_pass", "note")
    finding = Finding(
        key="noise",
        title=FINDING_TITLES["noise"],
        chart_data=chart,
        table=table,
        comparisons=comparisons,
        runs=_run_count(mine_rows),
        verdict=verdict(
            comparisons, have_runs=mine.height > 0, scope=_scope(mine, "tool_failure_rate", scale)
        ),
        notes=[
            "The paper states the noise result in words (3B: stable up to 5 % failures, a clear drop at "
            "10 %); those statements are the comparisons."
        ],
    )
    finding.tables["paper_statements"] = statements.select(
        pl.col("tool_failure_rate").alias("x"), pl.lit("paper: ").add(pl.col("note")).alias("text")
    )
    clean = _wide_metrics(mine_rows, ["model", "tool_failure_rate"], [FINAL, CLEAN_FINAL])
    if clean.height and clean["clean/final_pass"].drop_nulls().len():
        finding.tables["clean"] = clean.select(
            pl.col("model").map_elements(model_label, return_dtype=pl.String),
            "tool_failure_rate",
            pl.col("final_pass").alias("noisy final_pass"),
            pl.col("clean/final_pass").alias("clean final_pass"),
            (pl.col("final_pass") - pl.col("clean/final_pass")).alias("noisy - clean"),
        )
    if curves is not None:
        noise_curves = curves.filter(pl.col("finding") == "noise") if curves.height else curves
        wanted = (
            noise_curves.filter(pl.col("metric").map_elements(is_curve_metric, return_dtype=pl.Boolean))
            if noise_curves.height
            else noise_curves
        )
        finding.tables["curves"] = wanted if wanted.height else noise_curves
    return _finish(finding, stats, mine_rows, ["model", "tool_failure_rate"])


EFFECT_SCHEMA: dict[str, Any] = {
    "effect": pl.String,
    "kind": pl.String,
    "estimate": pl.Float64,
    "± 95 %": pl.Float64,
    "verdict": pl.String,
}
"""Columns of the factorial effects table (:func:`factorial_effects`; estimates are fractions)."""


def factorial_effects(stats: pl.DataFrame, axes: Sequence[str]) -> pl.DataFrame:
    """Return the main effects and interactions of a two-level factorial on final pass, with 95 % intervals.

    Each axis is coded ±1 (its first and last level in study order; other levels are left out), and every
    non-empty set of axes is one contrast of the 2^k cell means with weights ``prod(x_a) / 2^(k-1)``: a main
    effect is the mean of the high cells minus the mean of the low ones, a two-way interaction half the
    difference between one axis's effect at the other's two levels, and so on. Its interval comes from
    :func:`contrast_interval` (the paired bootstrap over the shared queries and the seeds when the cells
    carry per-query outcomes, else the cells' SEs in quadrature). ``verdict`` is ``effect`` (a main effect)
    or ``interaction`` when the interval excludes 0, ``none`` when it does not, ``unknown`` without an
    interval; every estimate is null when a cell has no runs.

    Args:
        stats: :func:`arm_stats` by (at least) ``axes``, one row per cell.
        axes: The two or three factors.

    """
    levels = {a: sorted(set(stats[a].to_list()), key=_sort_key) if stats.height else [] for a in axes}
    arms: dict[tuple[Any, ...], Arm] = {}
    if stats.height and all(len(v) >= 2 for v in levels.values()):
        for cell in itertools.product(*[(levels[a][0], levels[a][-1]) for a in axes]):
            arm = _arms(stats, axes[-1], **dict(zip(axes[:-1], cell[:-1], strict=True))).get(cell[-1])
            if arm is not None:
                arms[cell] = arm
    rows = []
    for size in range(1, len(axes) + 1):
        for subset in itertools.combinations(range(len(axes)), size):
            name = (
                f"{axes[subset[0]]} ({levels[axes[subset[0]]][0]}→{levels[axes[subset[0]]][-1]})"
                if size == 1 and len(levels[axes[subset[0]]]) >= 2
                else " × ".join(axes[i] for i in subset)
            )
            kind = "main" if size == 1 else f"{size}-way"
            cells = list(itertools.product((0, 1), repeat=len(axes)))
            keys = [tuple((levels[a][0], levels[a][-1])[c[i]] for i, a in enumerate(axes)) for c in cells]
            if len(arms) != len(cells) or any(arms[k].value is None for k in keys):
                rows.append({"effect": name, "kind": kind, "estimate": None, "± 95 %": None, "verdict": "–"})
                continue
            weights = [math.prod(2 * c[i] - 1 for i in subset) / 2 ** (len(axes) - 1) for c in cells]
            cell_arms = [arms[k] for k in keys]
            estimate = sum(w * (a.value or 0.0) for w, a in zip(weights, cell_arms, strict=True))
            interval = contrast_interval(cell_arms, weights)
            if interval is None:
                decided = "unknown"
            elif abs(estimate) > interval:
                decided = "effect" if size == 1 else "interaction"
            else:
                decided = "none"
            rows.append(
                {"effect": name, "kind": kind, "estimate": estimate, "± 95 %": interval, "verdict": decided}
            )
    return pl.DataFrame(rows, schema=EFFECT_SCHEMA)


def interactions(
    results: pl.DataFrame,
    scale: str = "tiny",
    axes: Sequence[str] | None = None,
    *,
    tolerance: float = 0.01,
    stable_tolerance: float = 0.05,
) -> Finding:
    """Build the factorial view: final pass over two or three axes varied together, its effects and intervals.

    ``tables["effects"]`` holds the main effects and interactions with their 95 % intervals
    (:func:`factorial_effects`); the verdict names every interaction whose interval excludes 0.
    ``tables["rates"]`` gives each cell's held-out rates with bootstrap intervals (:func:`rate_intervals`;
    empty without per-query outcomes). The paper
    measures each axis alone, so the paper-direction comparisons check each axis the paper states a direction
    for (more tool failures lower success; CURRICULUM above SUM for the 1.5B model) at every level of the
    other axes. The chart data has one row per cell; with three axes its second column joins the last two
    (``reward × tool_failure_rate``), so the table still draws as one heatmap.
    """
    mine_rows = ours(results, "interactions", scale)
    if axes is None:
        axes = _varied_axes(mine_rows)[:3]
    axes = list(dict.fromkeys(axes))
    by = list(dict.fromkeys(["model", *axes]))
    if len(axes) < 2 or mine_rows.height == 0:
        empty = pl.DataFrame(schema={"x": pl.String, "y": pl.String, "value": pl.Float64})
        finding = Finding(
            key="interactions",
            title=FINDING_TITLES["interactions"],
            chart_data=empty,
            table=empty,
            comparisons=[],
            runs=_run_count(mine_rows),
            verdict=verdict([], have_runs=False)
            if mine_rows.height == 0
            else f"Our interaction runs vary fewer than two axes ({', '.join(axes) or 'none'}), so there "
            "is no factorial view to compare.",
            tables={"effects": pl.DataFrame(schema=EFFECT_SCHEMA), "rates": rate_intervals(mine_rows, by)},
        )
        return _finish(finding, arm_stats(mine_rows, by), mine_rows, by)
    grid = aggregate(mine_rows, axes)
    stats = arm_stats(mine_rows, axes)
    cells = [pl.col(a).cast(pl.String).alias(a) for a in axes]
    joined = " × ".join(axes[1:])
    columns = [] if len(axes) == 2 else [pl.concat_str(cells[1:], separator=" · ").alias(joined)]
    chart = grid.select(cells[0], *columns, *cells[1:], "value", "sd", "n")
    effects, notes = factorial_effects(stats, axes), []
    if effects["estimate"].is_null().all() and len(axes) > 2:
        block = complete_block(stats, axes)
        if block is not None:
            (axis, level), rest = block
            effects = factorial_effects(stats.filter(pl.col(axis) == level).drop(axis), rest)
            notes.append(
                f"The factorial has empty cells, so the effects are those of its complete {axis}={level} "
                f"block ({' × '.join(rest)}, {len(rest)} axes)."
            )
    comparisons = _factorial_comparisons(stats, axes, tolerance, stable_tolerance)
    head = verdict(comparisons, have_runs=True, scope=" × ".join(axes))
    finding = Finding(
        key="interactions",
        title=FINDING_TITLES["interactions"],
        chart_data=chart,
        table=chart.rename({"value": "final_pass"}),
        comparisons=comparisons,
        runs=_run_count(mine_rows),
        verdict=f"{head} {_effects_sentence(effects)}",
        tables={"effects": effects, "rates": rate_intervals(mine_rows, axes)},
        notes=["The paper varies one axis at a time; the interaction itself has no paper reference.", *notes],
    )
    return _finish(finding, stats, mine_rows, axes)


def complete_block(stats: pl.DataFrame, axes: Sequence[str]) -> tuple[tuple[str, Any], list[str]] | None:
    """Return ``((axis, level), other axes)`` of the largest complete two-level block of a factorial.

    A factorial with empty cells (e.g. one model size not run yet) has no effects of its own; fixing one
    axis at a level whose cells over the other axes (their first and last levels) all have a final pass
    gives a smaller factorial that has. The block with most runs wins; None when no block is complete.

    Example:
        >>> cells = [("tiny", "sum", 0.0), ("tiny", "sum", 0.1), ("tiny", "curriculum", 0.0),
        ...          ("tiny", "curriculum", 0.1), ("tiny-l", "sum", 0.0)]
        >>> stats = pl.DataFrame(cells, schema=["model", "reward", "rate"], orient="row")
        >>> stats = stats.with_columns(final_pass=pl.lit(0.4), runs=pl.lit(3))
        >>> complete_block(stats, ["model", "reward", "rate"])
        (('model', 'tiny'), ['reward', 'rate'])

    """
    found: list[tuple[int, tuple[str, Any], list[str]]] = []
    for axis in axes:
        rest = [a for a in axes if a != axis]
        for level in sorted(set(stats[axis].to_list()), key=_sort_key):
            block = stats.filter((pl.col(axis) == level) & pl.col("final_pass").is_not_null())
            levels = [sorted(set(block[a].to_list()), key=_sort_key) for a in rest]
            if any(len(v) < 2 for v in levels):
                continue
            corners = set(itertools.product(*[(v[0], v[-1]) for v in levels]))
            if corners <= set(block.select(rest).iter_rows()):
                found.append((int(block["runs"].sum()), (axis, level), rest))
    return max(found, key=lambda f: f[0])[1:] if found else None


def effect_chart_rows(effects: pl.DataFrame) -> pl.DataFrame:
    """Return the effects table as rows for :func:`star_lib.viz.charts.paper_vs_ours` (``sd`` = the ± 95 %).

    One bar per estimated effect (``x``), its 95 % half-width as the error bar and its verdict as the note.
    """
    known = effects.filter(pl.col("estimate").is_not_null())
    return known.select(
        pl.lit("ours").alias("source"),
        pl.col("effect").alias("x"),
        pl.col("estimate").alias("value"),
        pl.col("± 95 %").alias("sd"),
        pl.col("verdict").alias("note"),
    )


def _factorial_comparisons(
    stats: pl.DataFrame, axes: Sequence[str], tolerance: float, stable_tolerance: float
) -> list[Comparison]:
    """Each axis the paper states a direction for, high vs low level, at every level of the other axes."""
    out = []
    for axis in axes:
        levels = sorted(set(stats[axis].to_list()), key=_sort_key) if stats.height else []
        if len(levels) < 2:
            continue
        lo, hi = levels[0], levels[-1]
        expect, statement = _paper_direction(axis, lo, hi)
        if expect is None:
            continue
        others = [a for a in axes if a != axis]
        for fixed in itertools.product(*[sorted(set(stats[a].to_list()), key=_sort_key) for a in others]):
            where = dict(zip(others, fixed, strict=True))
            arms = _arms(stats, axis, **where)
            a, b = arms.get(hi), arms.get(lo)
            diff = None if a is None or b is None or a.value is None or b.value is None else a.value - b.value
            at = ", ".join(f"{k}={v}" for k, v in where.items())
            out.append(
                Comparison(
                    label=f"{axis} {hi} vs {lo} at {at}",
                    metric=FINAL,
                    expect=expect,
                    paper=statement,
                    our_diff=diff,
                    ours=f"{_pct(a.value if a else None)} vs {_pct(b.value if b else None)}",
                    tolerance=tolerance,
                    stable_tolerance=stable_tolerance,
                    arms=_arm_pair(diff, a, b),
                )
            )
    return out


def _effects_sentence(effects: pl.DataFrame) -> str:
    """Say which interactions exceed their 95 % interval (the effects table's verdicts)."""
    terms = effects.filter(pl.col("kind") != "main")
    known = terms.filter(pl.col("estimate").is_not_null())
    if known.height == 0:
        return "The interactions cannot be estimated: a cell of the factorial has no runs."

    def said(row: dict[str, Any]) -> str:
        spread = f" ± {100 * row['± 95 %']:.1f}" if row["± 95 %"] is not None else ""
        return f"{row['effect']} {100 * row['estimate']:+.1f}{spread} pts"

    found = [said(r) for r in known.iter_rows(named=True) if r["verdict"] == "interaction"]
    if found:
        return f"Interactions beyond their 95 % interval: {'; '.join(found)}."
    largest = max(known.iter_rows(named=True), key=lambda r: abs(r["estimate"]))
    if all(v == "unknown" for v in known["verdict"].to_list()):
        return f"The interactions have no interval (no episode counts); the largest is {said(largest)}."
    return f"No interaction exceeds its 95 % interval (the largest: {said(largest)})."


def _sort_key(value: Any) -> tuple[int, Any]:
    order = {
        v: i for i, v in enumerate((*_REWARD_ORDER, *_ALGORITHM_ORDER, *_DIFFICULTY_ORDER, *_MODEL_ORDER))
    }
    if isinstance(value, (int, float)):
        return (0, value)
    return (1, order.get(value, 99), str(value))  # type: ignore[return-value]


def _paper_direction(axis: str, low: Any, high: Any) -> tuple[str | None, str]:
    """Return the paper's direction for raising ``axis`` from ``low`` to ``high``, when it states one."""
    if axis == "tool_failure_rate" and isinstance(high, float) and high >= 0.10 > low:
        note = paper_rows("noise").filter(pl.col("tool_failure_rate") == 0.10)["note"]
        return "lower", f"“{note[0] if note.len() else 'clear drop at 10 %'}”"
    if axis == "tool_failure_rate" and isinstance(high, float) and high <= 0.05:
        return "similar", "“stable for tool failure rate <= 5 %”"
    if axis == "reward":
        paper = _values(paper_rows("reward").filter(pl.col("model") == "qwen2.5-1.5b"), "reward")
        if low in paper and high in paper:
            diff = paper[high] - paper[low]
            return ("higher" if diff > 0 else "lower"), f"1.5B: {_pct(paper[high])} vs {_pct(paper[low])}"
    return None, ""


def _varied_axes(rows: pl.DataFrame) -> list[str]:
    """Axes with more than one value among the rows (seed excluded), in the results table's axis order."""
    from star_lib.experiments.results import AXIS_SCHEMA

    return [a for a in AXIS_SCHEMA if a != "seed" and rows.height and rows[a].n_unique() > 1]


def _run_count(rows: pl.DataFrame) -> int:
    return rows.select(pl.struct("grid", "run").n_unique()).item() if rows.height else 0


def _ood_notes(rows: pl.DataFrame, scale: str) -> list[str]:
    """Return notes on what the OOD comparisons measure at ``scale``, and whether our runs have it."""
    if scale != "tiny":
        return _missing_metric_notes(rows, ["qa/"], "average OOD EM (the qa-eval stage)")
    return [
        "At tiny scale OOD is the OOD split (longer trips and constraint combinations never trained on, "
        "from unseen worlds), scored by its commonsense micro rate; the paper's is exact match on QA sets, "
        "so only the direction of a difference is compared.",
        *_missing_metric_notes(rows, ["ood/"], "OOD (the ood split of the eval stage)"),
    ]


def _missing_metric_notes(rows: pl.DataFrame, prefixes: Sequence[str], what: str) -> list[str]:
    if rows.height == 0:
        return []
    present = any(rows["metric"].str.starts_with(p).any() for p in prefixes)
    return [] if present else [f"Our runs have no {what} metrics yet, so that part shows the paper only."]


FINDINGS: Mapping[str, Any] = {
    "reward": reward_design,
    "scale": model_scale,
    "data": data_quantity,
    "difficulty": data_difficulty,
    "algorithm": algorithms,
    "noise": env_noise,
    "interactions": interactions,
}
"""Finding name → the function that builds it."""
