"""QA answer metrics: exact match, token F1 and cover-EM after SQuAD-style normalisation.

These are the metrics of Search-R1 / FlashRAG, which the STAR paper's Table 2 reports:

- **EM**: the normalised prediction equals any normalised golden answer (1.0 or 0.0);
- **F1**: the best token-level F1 over the golden answers (HotpotQA rule: a ``yes``/``no``/``noanswer``
  prediction or gold scores 0 unless both are equal);
- **cover-EM** (Search-R1's ``subem``, FlashRAG's ``acc``): some normalised golden answer occurs in the
  normalised prediction.

Normalisation (SQuAD v1.1): lower-case, drop punctuation, drop the articles *a*, *an*, *the*, collapse
whitespace. A missing prediction (no ``<answer>``) scores 0 on every metric.
"""

from __future__ import annotations

import re
import string
from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import polars as pl

METRICS: tuple[str, ...] = ("em", "f1", "cover_em")
AVERAGE = "average"
"""``dataset`` value of the macro-average row (mean over datasets, as Table 2's last column)."""

_ARTICLES = re.compile(r"\b(a|an|the)\b")
_PUNCTUATION = str.maketrans("", "", string.punctuation)
_YES_NO = frozenset({"yes", "no", "noanswer"})


def normalize_answer(text: str) -> str:
    """SQuAD normalisation: lower-case, no punctuation, no articles, single spaces.

    >>> normalize_answer("The  Eiffel-Tower!")
    'eiffeltower'
    >>> normalize_answer("A Tale of Two Cities")
    'tale of two cities'
    """
    text = str(text).lower().translate(_PUNCTUATION)
    return " ".join(_ARTICLES.sub(" ", text).split())


def _golds(golden_answers: str | Iterable[str]) -> list[str]:
    return [golden_answers] if isinstance(golden_answers, str) else [str(g) for g in golden_answers]


def exact_match(prediction: str | None, golden_answers: str | Iterable[str]) -> float:
    """1.0 when the normalised prediction equals some normalised golden answer, else 0.0.

    >>> exact_match("the Beatles", ["Beatles", "The Fab Four"])
    1.0
    """
    if prediction is None:
        return 0.0
    pred = normalize_answer(prediction)
    return float(any(pred == normalize_answer(g) for g in _golds(golden_answers)))


def cover_exact_match(prediction: str | None, golden_answers: str | Iterable[str]) -> float:
    """1.0 when some normalised golden answer is a substring of the normalised prediction.

    >>> cover_exact_match("It was Wilhelm Röntgen.", ["Wilhelm Röntgen"])
    1.0
    """
    if prediction is None:
        return 0.0
    pred = normalize_answer(prediction)
    return float(any((g := normalize_answer(gold)) and g in pred for gold in _golds(golden_answers)))


def _token_f1(pred: str, gold: str) -> float:
    if (pred in _YES_NO or gold in _YES_NO) and pred != gold:
        return 0.0
    pred_tokens, gold_tokens = pred.split(), gold.split()
    common = Counter(pred_tokens) & Counter(gold_tokens)
    same = sum(common.values())
    if same == 0:
        return 0.0
    precision, recall = same / len(pred_tokens), same / len(gold_tokens)
    return 2 * precision * recall / (precision + recall)


def f1_score(prediction: str | None, golden_answers: str | Iterable[str]) -> float:
    """Best token F1 of the normalised prediction against any golden answer.

    >>> round(f1_score("Barack Obama Jr", ["Barack Obama"]), 3)
    0.8
    """
    if prediction is None:
        return 0.0
    pred = normalize_answer(prediction)
    return max((_token_f1(pred, normalize_answer(g)) for g in _golds(golden_answers)), default=0.0)


@dataclass(frozen=True)
class AnswerScores:
    """The three scores of one prediction."""

    em: float
    f1: float
    cover_em: float


def score_answer(prediction: str | None, golden_answers: str | Iterable[str]) -> AnswerScores:
    """EM, F1 and cover-EM of one prediction."""
    golds = _golds(golden_answers)
    return AnswerScores(
        exact_match(prediction, golds), f1_score(prediction, golds), cover_exact_match(prediction, golds)
    )


def summarize(results: pl.DataFrame, metrics: Sequence[str] = METRICS) -> pl.DataFrame:
    """Per-dataset means of ``metrics`` plus an ``average`` row (unweighted mean over datasets).

    Args:
        results: one row per question with a ``dataset`` column and the metric columns.
        metrics: metric columns to average.

    Returns:
        Wide frame: ``dataset``, ``n``, one column per metric; datasets in first-seen order, ``average`` last.

    """
    import polars as pl

    order = results["dataset"].unique(maintain_order=True).to_list()
    per = (
        results.group_by("dataset", maintain_order=True)
        .agg(pl.len().alias("n"), *[pl.col(m).cast(pl.Float64).mean() for m in metrics])
        .sort(pl.col("dataset").replace_strict(order, list(range(len(order)))))
    )
    if per.height == 0:
        return per
    average = per.select(
        pl.lit(AVERAGE).alias("dataset"),
        pl.col("n").sum().cast(per.schema["n"]),
        *[pl.col(m).mean() for m in metrics],
    )
    return pl.concat([per, average])
