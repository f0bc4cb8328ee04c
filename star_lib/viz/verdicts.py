"""Comparisons with the paper and the verdict sentence: whether our runs move in the paper's direction.

A comparison checks one of the paper's statements on our runs: "A is higher than B" (from two reported
numbers, or from a qualitative statement such as "hard-only training collapses") or "A is about B" ("stable
for failure rates up to 5 %", or two reported numbers less than ``tolerance`` apart). The intervals decide,
not the point estimates: our difference agrees when it has the paper's sign and lies outside both its 95 %
interval and ``tolerance``; a difference inside either is *flat*. For "about", it is *opposite* only when it
lies outside both its interval and ``stable_tolerance``, else it agrees. A pair our runs lack is *missing*
and is not counted; a final-pass comparison whose arms show no signal
(:func:`~star_lib.viz.stats.evidence_gate`) is *no evidence*, and is not counted either.

A finding states each statement as a :class:`Claim` (two :class:`Side` s and a :class:`Rule`) and checks
it (:meth:`Claim.check`) into a :class:`Comparison`; :func:`verdict` turns the comparisons into one
sentence, and :func:`behaviour_shifts` names the gains that come with a change of behaviour.
"""

from __future__ import annotations

import functools
import itertools
import math
from collections.abc import Sequence
from dataclasses import dataclass

import polars as pl

from star_lib.experiments.grids import PAPER_MODELS
from star_lib.train.models import TINY_SCALE
from star_lib.viz.labels import FINAL, finite, model_label, pct, pts, pts_abs
from star_lib.viz.stats import (
    INTERVAL_Z,
    POWER_Z,
    TRANSPORT_COLUMNS,
    Arm,
    arms_of,
    contrast_interval,
    evidence_gate,
    models_in,
    values_by,
)

OUTCOMES: tuple[str, ...] = ("agrees", "flat", "opposite", "missing", "no evidence")
"""Every outcome a comparison can have; *missing* and *no evidence* are not counted in the verdict."""


SHIFT_POINTS = 0.10
"""A transport share (flight / self-driving / taxi of the plans' travel legs) that moves by more than this
(10 pts) while final pass rises is reported as a behaviour shift behind the gain."""


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
    def mde(self) -> float | None:
        """The minimum detectable difference: 80 % power at the 95 % level, None when unknown.

        From the same standard error as :attr:`interval`; a smaller true difference reads *flat* more often
        than not.
        """
        if self.interval is None:
            return None
        return self.interval * (INTERVAL_Z + POWER_Z) / INTERVAL_Z

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
            power = "" if self.mde is None else f"; these runs detect {100 * self.mde:.1f} pts at 80 % power"
            return (
                f"{self.label}: flat, {ours} is within {bound} where the paper has a difference{power} "
                f"({paper})"
            )
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
        "MDE (80 %, pts)": pl.Float64,
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
            "MDE (80 %, pts)": None if c.mde is None else 100 * c.mde,
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


# ───────────────────────────── the paper's statements, as claims to check ─────────────────────────────


@dataclass(frozen=True)
class Rule:
    """How a finding judges its comparisons: the metric compared and the tolerances of :class:`Comparison`."""

    metric: str = FINAL
    """The metric compared (``eval/final_pass`` …)."""
    tolerance: float = 0.01
    """Differences within this (or within their 95 % interval) are flat (for ``higher``/``lower``)."""
    stable_tolerance: float = 0.05
    """Largest difference that still counts as ``similar``."""


@dataclass(frozen=True)
class Side:
    """One side of a paper statement: its name, the paper's number for it, and our arm's."""

    label: str
    """The side's axis value as the comparison names it (``curriculum``, ``n=100``, ``7B``)."""
    ours: float | None
    """Our arm's value (mean over its runs), None when our runs lack it."""
    arm: Arm | None = None
    """Our arm, whose interval and health the comparison reads; None when unknown."""
    paper: float | None = None
    """The paper's number for this side, when a claim is made from two numbers (:func:`number_claim`)."""


@dataclass(frozen=True)
class Claim:
    """One statement of the paper about two arms, first against second, ready to check on our runs."""

    label: str
    """What is compared, e.g. ``4:3:3 > hard``."""
    expect: str
    """The paper's direction: ``higher`` (first above second), ``lower`` or ``similar``."""
    paper: str
    """The paper's evidence: two numbers (``1.5B: 34.9 % vs 33.1 %``) or a statement (:func:`quote`)."""
    first: Side
    """The side the direction is about."""
    second: Side
    """The side it is compared with."""
    context: str
    """Whose arms are compared (``tiny-l``, ``ours``), for our values and the verdict clause."""
    rule: Rule = Rule()
    """The metric and tolerances."""

    def check(self) -> Comparison:
        """Return the claim checked on our runs: our difference, and both arms when we have both sides."""
        a, b = self.first, self.second
        diff = None if a.ours is None or b.ours is None else a.ours - b.ours
        return Comparison(
            label=self.label,
            metric=self.rule.metric,
            expect=self.expect,
            paper=self.paper,
            our_diff=diff,
            ours=f"{self.context}: {pct(a.ours)} vs {pct(b.ours)}" if diff is not None else "",
            tolerance=self.rule.tolerance,
            stable_tolerance=self.rule.stable_tolerance,
            arms=arm_pair(diff, a.arm, b.arm),
            context=self.context if diff is not None else "",
        )


def quote(statement: str) -> str:
    """Quote a statement of the paper as a comparison's evidence (``“hard-only training collapses”``)."""
    return f"“{statement}”"


def number_claim(first: Side, second: Side, paper_context: str, context: str, rule: Rule) -> Claim:
    """Return the claim two reported numbers make: the paper's higher side first, ``≈`` when within tolerance.

    Raises:
        ValueError: a side has no paper number.

    Example:
        >>> claim = number_claim(Side("sum", 0.3, paper=0.331), Side("curriculum", 0.4, paper=0.349),
        ...                      "1.5B", "tiny", Rule())
        >>> claim.label, claim.paper, claim.check().ours
        ('curriculum > sum', '1.5B: 34.9 % vs 33.1 %', 'tiny: 40.0 % vs 30.0 %')

    """
    if first.paper is None or second.paper is None:
        raise ValueError(f"a claim from two numbers needs both: {first.label}, {second.label}")
    if second.paper > first.paper:
        first, second = second, first
    expect = _expect(first.paper - second.paper, rule.tolerance)
    sign = "≈" if expect == "similar" else ">"
    return Claim(
        label=f"{first.label} {sign} {second.label}",
        expect=expect,
        paper=f"{paper_context}: {pct(first.paper)} vs {pct(second.paper)}",
        first=first,
        second=second,
        context=context,
        rule=rule,
    )


def _expect(diff: float, tolerance: float) -> str:
    return "similar" if abs(diff) < tolerance else ("higher" if diff > 0 else "lower")


def arm_pair(diff: float | None, first: Arm | None, second: Arm | None) -> tuple[Arm, ...]:
    """Return the comparison's two arms, or none when our difference or an arm is unknown."""
    return (first, second) if diff is not None and first is not None and second is not None else ()


def categorical_comparisons(
    paper: pl.DataFrame,
    mine: pl.DataFrame,
    axis: str,
    order: Sequence[str],
    rule: Rule = Rule(),
    stats: pl.DataFrame | None = None,
) -> list[Comparison]:
    """Every pair of ``axis`` values the paper reports for one model, checked within each of our models.

    Our model is compared with the paper model it stands for (:func:`paper_stand_in`). ``stats``
    (:func:`~star_lib.viz.stats.arm_stats` by model and ``axis``) gives each comparison its arms, so it
    carries an interval and passes the evidence gate.
    """
    paper = paper.filter(pl.col("value").is_not_null() & pl.col(axis).is_not_null())
    by_model = {m: values_by(paper.filter(pl.col("model") == m), axis) for m in models_in(paper)}
    by_model = {m: v for m, v in by_model.items() if len(v) >= 2}
    if not by_model:
        return []
    out = []
    for our_model in models_in(mine) or ["tiny"]:
        ref = paper_stand_in(our_model, list(by_model))
        p = by_model[ref]
        o = values_by(mine.filter(pl.col("model") == our_model), axis) if mine.height else {}
        arms = arms_of(stats, axis, our_model) if stats is not None else {}
        keys = sorted(p, key=lambda k: order.index(k) if k in order else len(order))
        for a, b in itertools.combinations(keys, 2):
            first = Side(str(a), o.get(a), arms.get(a), paper=p[a])
            second = Side(str(b), o.get(b), arms.get(b), paper=p[b])
            claim = number_claim(first, second, model_label(ref), model_label(our_model), rule)
            out.append(claim.check())
    return out


# ───────────────────────────── behaviour behind a gain ─────────────────────────────


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
        f"its {kind} share of travel legs is {pct(better.transport[kind])} against "
        f"{pct(worse.transport[kind])} ({pts(delta)})"
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
                f"{better.label} scores {pts_abs(abs(c.our_diff))} above {worse.label}, and {shift}: "
                "the gain comes with a change of behaviour."
            )
    if stats is not None and stats.height and "sft final_pass" in stats.columns:
        for row in stats.iter_rows(named=True):
            after, before = finite(row["final_pass"]), finite(row["sft final_pass"])
            if after is None or before is None or after - before <= 0.01:
                continue
            mix = {k: row[k] for k in TRANSPORT_COLUMNS if row[k] is not None}
            sft_mix = {k: row[f"sft {k}"] for k in TRANSPORT_COLUMNS if row[f"sft {k}"] is not None}
            run, sft = Arm("the trained model", after, transport=mix), Arm("SFT", before, transport=sft_mix)
            shift = _transport_shift(run, sft)
            if shift:
                where = ", ".join(f"{k}={row[k]}" for k in stats.columns[: stats.columns.index("final_pass")])
                out.append(
                    f"At {where} the trained model raises final pass from {pct(before)} to {pct(after)}, "
                    f"and {shift} of the SFT model: the gain comes with a change of behaviour."
                )
    return out
