"""The synthesis stage's configuration: one dataclass, validated when built.

Values that reproduce the STAR paper's DataSynthesis rules cite ``../shared/spec/TRAVELPLANNER.md`` §7.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from os import PathLike

from star_lib.types import LEVELS

TIE_BREAKS: tuple[str, ...] = ("cheapest", "best-rated", "random")
REALISERS: tuple[str, ...] = ("template", "llm")
NAMED_MIXES: dict[str, tuple[float, float, float]] = {
    "easy": (1.0, 0.0, 0.0),
    "medium": (0.0, 1.0, 0.0),
    "hard": (0.0, 0.0, 1.0),
    "mixed": (4.0, 3.0, 3.0),
    "4:3:3": (4.0, 3.0, 3.0),
}
"""Difficulty compositions of the paper's data axis (§9 "Difficulty"); any ``a:b:c`` string works too."""


def parse_mix(text: str) -> tuple[float, float, float]:
    """Parse a difficulty composition into easy/medium/hard weights that sum to 1.

    >>> parse_mix("4:3:3")
    (0.4, 0.3, 0.3)
    >>> parse_mix("easy")
    (1.0, 0.0, 0.0)

    Raises:
        ValueError: naming the accepted forms when ``text`` is neither a named mix nor ``a:b:c``.

    """
    text = str(text).strip().lower()
    if text in NAMED_MIXES:
        raw = NAMED_MIXES[text]
    else:
        parts = text.split(":")
        try:
            raw = tuple(float(p) for p in parts)
        except ValueError:
            raw = ()
        if len(raw) != 3 or any(w < 0 for w in raw) or sum(raw) <= 0:
            raise ValueError(
                f"mix {text!r} is not valid: use one of {sorted(NAMED_MIXES)} or 'a:b:c' with three "
                "non-negative easy:medium:hard weights, e.g. '4:3:3'"
            )
    total = sum(raw)
    easy, medium, hard = (w / total for w in raw)
    return (easy, medium, hard)


def level_counts(n: int, mix: str) -> dict[str, int]:
    """Split ``n`` records over the levels by largest remainder (deterministic, sums to ``n``).

    >>> level_counts(10, "4:3:3")
    {'easy': 4, 'medium': 3, 'hard': 3}
    """
    weights = parse_mix(mix)
    exact = [w * n for w in weights]
    counts = [int(x) for x in exact]
    order = sorted(range(3), key=lambda i: (-(exact[i] - counts[i]), i))
    for i in order[: n - sum(counts)]:
        counts[i] += 1
    return dict(zip(LEVELS, counts, strict=True))


MAX_RECORDS = 1_000_000
"""Most records one synthesis makes (1000x the paper's RL set; a mistyped ``n`` would run for days)."""


@dataclass
class SynthConfig:
    """Everything that decides which tasks ``star synth`` makes (STAR stage 1)."""

    n: int = 1000
    """Accepted records to produce, all splits together (the paper's RL set has ~1K prompts, §7)."""
    mix: str = "4:3:3"
    """Difficulty composition easy:medium:hard: ``easy``|``medium``|``hard``|``mixed``|``a:b:c`` (§7)."""
    seed: int = 0
    """Base seed; every attempt derives its own generator from it, so output is independent of ``workers``."""
    splits: tuple[float, float, float] = (0.8, 0.1, 0.1)
    """Train/val/test fractions; records sharing (org, dest, dates, constraints) always land in one split."""
    days_choices: tuple[int, ...] = (3, 5, 7)
    """Trip lengths to sample from; 3→1, 5→2, 7→3 visiting cities (§7)."""
    min_flights: int = 3
    """Flights needed each way on the first/last dates of a flight trip (§7)."""
    driving_share: float = 0.1
    """Share of easy trips that are driving trips (§7: ~10%)."""
    max_drive_km: float = 600.0
    """Longest first leg of an easy driving trip; below it the solver prefers driving (§7)."""
    min_state_cities: int = 3
    """A 5/7-day trip targets a state with at least this many usable cities (§7)."""
    people_range: tuple[int, int] = (2, 8)
    """Group sizes of medium and hard trips, inclusive (§7); easy trips have one person."""
    medium_cuisines: int = 2
    """Cuisines requested by a medium trip with a cuisine constraint (§7)."""
    hard_cuisines: tuple[int, int] = (2, 3)
    """Range of cuisines requested by a hard trip with a cuisine constraint (§7)."""
    budget_multipliers: dict[str, float] = field(
        default_factory=lambda: {"easy": 1.0, "medium": 0.75, "hard": 0.5}
    )
    """Budget = estimate × people × multiplier, rounded to 100 (§7: easy ×1, medium ×0.75, hard ×0.5)."""
    tie_break: str = "cheapest"
    """How the solver picks among valid options: ``cheapest`` | ``best-rated`` | ``random`` (seeded)."""
    attractions_per_day: int = 2
    """Attractions listed on a day that has any (at least one is always required)."""
    max_city_candidates: int = 6
    """Cheapest cities of a state that the solver combines into visiting orders."""
    max_plan_tries: int = 12
    """Full plans the solver builds and checks for one record before giving up."""
    relax_on_sparse: bool = True
    """On a world too sparse for ``min_flights``, accept routes with fewer flights (counted in the stats)."""
    verify: bool = True
    """Check every solver plan with the strict and the official evaluators (reject on any failure)."""
    realiser: str = "template"
    """Back-translation: ``template`` (offline) | ``llm`` (OpenAI-compatible endpoint, template fallback)."""
    max_attempts_factor: int = 30
    """Give up after ``n × max_attempts_factor`` sampling attempts per level."""
    workers: int = 1
    """Processes for synthesis; output is byte-identical for any value."""
    exclude_queries: str | None = None
    """A query file (``.jsonl``/``.csv``/``.parquet``, read by ``star_lib.io.read_queries``) of held-out
    queries: a record with the same origin, destination, dates, local constraints, people and days as one
    of them is rejected (counted under ``held-out query``), so synthesis never reproduces a test query."""

    def __post_init__(self) -> None:
        """Check every field; errors say which value to change."""
        if not 1 <= self.n <= MAX_RECORDS:
            raise ValueError(f"n={self.n}: ask for at least one record and at most {MAX_RECORDS:,}")
        parse_mix(self.mix)
        if len(self.splits) != 3 or any(s < 0 for s in self.splits) or abs(sum(self.splits) - 1.0) > 1e-6:
            raise ValueError(
                f"splits={self.splits}: give three non-negative train/val/test fractions summing to 1"
            )
        self.splits = tuple(float(s) for s in self.splits)  # type: ignore[assignment]
        bad_days = [d for d in self.days_choices if d not in (3, 5, 7)]
        if not self.days_choices or bad_days:
            raise ValueError(f"days_choices={self.days_choices}: use a non-empty subset of (3, 5, 7)")
        if self.min_flights < 1:
            raise ValueError(f"min_flights={self.min_flights}: must be >= 1")
        if not 0.0 <= self.driving_share <= 1.0:
            raise ValueError(f"driving_share={self.driving_share}: must lie in [0, 1]")
        if self.max_drive_km <= 0:
            raise ValueError(f"max_drive_km={self.max_drive_km}: must be positive")
        if self.min_state_cities < 2:
            raise ValueError(f"min_state_cities={self.min_state_cities}: must be >= 2")
        lo, hi = self.people_range
        if not 2 <= lo <= hi <= 8:
            raise ValueError(f"people_range={self.people_range}: use 2 <= low <= high <= 8")
        if not 1 <= self.medium_cuisines <= 7:
            raise ValueError(f"medium_cuisines={self.medium_cuisines}: use 1..7")
        clo, chi = self.hard_cuisines
        if not 1 <= clo <= chi <= 7:
            raise ValueError(f"hard_cuisines={self.hard_cuisines}: use 1 <= low <= high <= 7")
        missing = [lv for lv in LEVELS if lv not in self.budget_multipliers]
        if missing or any(v <= 0 for v in self.budget_multipliers.values()):
            raise ValueError(
                f"budget_multipliers={self.budget_multipliers}: give a positive value for {list(LEVELS)}"
            )
        if self.tie_break not in TIE_BREAKS:
            raise ValueError(f"tie_break={self.tie_break!r}: use one of {TIE_BREAKS}")
        if self.attractions_per_day < 1:
            raise ValueError(f"attractions_per_day={self.attractions_per_day}: must be >= 1")
        if self.max_city_candidates < 3:
            raise ValueError(
                f"max_city_candidates={self.max_city_candidates}: must be >= 3 (7-day trips visit 3)"
            )
        if self.max_plan_tries < 1:
            raise ValueError(f"max_plan_tries={self.max_plan_tries}: must be >= 1")
        if self.realiser not in REALISERS:
            raise ValueError(f"realiser={self.realiser!r}: use one of {REALISERS}")
        if self.max_attempts_factor < 1:
            raise ValueError(f"max_attempts_factor={self.max_attempts_factor}: must be >= 1")
        if self.workers < 1:
            raise ValueError(f"workers={self.workers}: must be >= 1")
        if self.exclude_queries is not None:
            if not isinstance(self.exclude_queries, (str, PathLike)) or not str(self.exclude_queries).strip():
                raise ValueError(
                    f"exclude_queries={self.exclude_queries!r}: give a query file path or leave it unset"
                )
            self.exclude_queries = str(self.exclude_queries)

    @property
    def level_counts(self) -> dict[str, int]:
        """Records wanted per level (largest-remainder split of ``n`` by ``mix``)."""
        return level_counts(self.n, self.mix)
