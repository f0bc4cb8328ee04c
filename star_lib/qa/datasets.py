"""Loaders for the seven out-of-domain QA test sets (the STAR paper's Table 2, Search-R1 protocol).

Two JSONL formats are read, one question a line:

- FlashRAG / Search-R1: ``{"id", "question", "golden_answers": [...], "data_source"?}``
  (``deepresearcher_test/nq.jsonl``, FlashRAG ``<set>/test.jsonl``);
- single answer (R1-Searcher): ``{"idx", "question", "answer": "..."}`` (``answer`` may also be a list).

A data folder may hold the sets flat (``nq.jsonl``, ``2wiki_500.jsonl`` …), in FlashRAG's
``<set>/<split>.jsonl`` layout, or be the QA data root with a ``deepresearcher_test/`` folder.
``limit`` takes a seeded random sample (kept in file order), so a run with ``--limit 100 --seed 0``
always sees the same questions. A corrupt line raises :class:`QADataError` naming the file and line
(or, with ``strict=False``, is skipped with a warning that names them).
"""

from __future__ import annotations

import json
import os
import random
import warnings
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

DATASET_NAMES: tuple[str, ...] = (
    "nq",
    "triviaqa",
    "popqa",
    "hotpotqa",
    "2wikimultihopqa",
    "musique",
    "bamboogle",
)
"""The seven sets, in the paper's Table 2 order (general QA, then multi-hop QA)."""

MULTI_HOP: frozenset[str] = frozenset({"hotpotqa", "2wikimultihopqa", "musique", "bamboogle"})

_FILE_STEMS: dict[str, tuple[str, ...]] = {
    "nq": ("nq", "nq_test", "natural_questions"),
    "triviaqa": ("triviaqa", "trivia_qa", "triviaqa_test"),
    "popqa": ("popqa", "pop_qa"),
    "hotpotqa": ("hotpotqa", "hotpotqa_500", "hotpot_qa"),
    "2wikimultihopqa": ("2wikimultihopqa", "2wiki", "2wiki_500", "2wikimqa"),
    "musique": ("musique", "musique_500"),
    "bamboogle": ("bamboogle",),
}
_ALIASES: dict[str, str] = {stem: name for name, stems in _FILE_STEMS.items() for stem in stems}
_SUBFOLDERS: tuple[str, ...] = ("deepresearcher_test", "test")


class QADataError(ValueError):
    """A QA data file is missing or has a corrupt line (the message names the path and line)."""


@dataclass(frozen=True)
class QAExample:
    """One question with its accepted answers."""

    id: str
    """Source id (``nq_-8508…``, ``Bamboogle_39``) or ``<dataset>_<line>`` when the file has none."""
    question: str
    golden_answers: tuple[str, ...]
    """Every accepted answer; a prediction matching any one scores."""
    dataset: str
    """One of :data:`DATASET_NAMES` (or the file stem for other sets)."""

    def to_dict(self) -> dict[str, Any]:
        """FlashRAG-format dict (``golden_answers`` as a list) plus ``dataset``."""
        return {
            "id": self.id,
            "question": self.question,
            "golden_answers": list(self.golden_answers),
            "dataset": self.dataset,
        }


def canonical_name(name: str) -> str:
    """Return the canonical dataset name of a name or file stem (``2wiki_500`` → ``2wikimultihopqa``).

    >>> canonical_name("HotpotQA_500")
    'hotpotqa'
    """
    key = name.strip().lower()
    return _ALIASES.get(key, key)


def parse_example(record: Any, dataset: str, default_id: str) -> QAExample:
    """Build a :class:`QAExample` from one decoded JSONL record.

    Raises:
        ValueError: saying which field is missing or has the wrong type.

    """
    if not isinstance(record, dict):
        raise ValueError(f"expected a JSON object, got {type(record).__name__}")
    question = record.get("question")
    if not isinstance(question, str) or not question.strip():
        raise ValueError("missing or empty 'question' (a non-empty string)")
    if "golden_answers" in record:
        answers = record["golden_answers"]
    elif "answer" in record:
        answers = record["answer"]
    elif "answers" in record:
        answers = record["answers"]
    else:
        raise ValueError(f"no 'golden_answers' (list) or 'answer' field; the record has {sorted(record)}")
    if isinstance(answers, (str, int, float)) and not isinstance(answers, bool):
        answers = [answers]
    if not isinstance(answers, list) or not answers:
        raise ValueError("'golden_answers' must be a non-empty list of strings (or 'answer' a string)")
    if not all(isinstance(a, (str, int, float)) and not isinstance(a, bool) for a in answers):
        raise ValueError("every golden answer must be a string")
    raw_id = record.get("id", record.get("idx"))
    qid = str(raw_id) if raw_id is not None else default_id
    return QAExample(qid, question.strip(), tuple(str(a) for a in answers), dataset)


def read_jsonl(
    path: str | os.PathLike[str], dataset: str | None = None, *, strict: bool = True
) -> list[QAExample]:
    """All questions of one JSONL file.

    Args:
        path: the file.
        dataset: dataset name for the examples (default: from the file name, see :func:`canonical_name`).
        strict: raise on a corrupt line (default); when False, warn and skip it.

    Raises:
        QADataError: when the file is missing, or (``strict``) a line is corrupt — with path and line.

    """
    path = Path(path)
    if not path.is_file():
        raise QADataError(f"QA file not found: {path}")
    name = canonical_name(dataset or path.stem)
    examples = []
    with path.open("rb") as handle:
        for lineno, raw in enumerate(handle, start=1):
            try:
                line = raw.decode("utf-8-sig" if lineno == 1 else "utf-8")
                if not line.strip():
                    continue
                examples.append(parse_example(json.loads(line), name, f"{name}_{lineno}"))
            except RecursionError:
                raise QADataError(f"{path}:{lineno}: corrupt QA record: JSON nested too deeply") from None
            except ValueError as exc:  # json.JSONDecodeError and UnicodeDecodeError are ValueErrors
                message = f"{path}:{lineno}: corrupt QA record: {exc}"
                if strict:
                    raise QADataError(
                        message + " (fix the line, or load with strict=False to skip it)"
                    ) from exc
                warnings.warn(message + " (skipped)", stacklevel=2)
    return examples


def sample_examples(examples: Sequence[QAExample], limit: int | None, seed: int = 0) -> list[QAExample]:
    """Take a seeded random sample of ``limit`` examples, kept in file order (all when ``limit`` is None).

    Raises:
        ValueError: for a negative ``limit``.

    """
    if limit is None or limit >= len(examples):
        return list(examples)
    if limit < 0:
        raise ValueError(f"limit must be >= 0 or None, got {limit}")
    keep = sorted(random.Random(seed).sample(range(len(examples)), limit))
    return [examples[i] for i in keep]


def dataset_path(data_dir: str | os.PathLike[str], name: str, split: str = "test") -> Path:
    """Find the file holding dataset ``name`` under ``data_dir`` (flat, FlashRAG layout, or the QA root).

    Raises:
        QADataError: listing the places looked at when none holds the set.

    """
    root = Path(data_dir)
    if root.is_file():
        return root
    canonical = canonical_name(name)
    stems = (name, *_FILE_STEMS.get(canonical, (canonical,)))
    tried = []
    for folder in (root, *(root / sub for sub in _SUBFOLDERS)):
        for stem in stems:
            for candidate in (folder / f"{stem}.jsonl", folder / stem / f"{split}.jsonl"):
                tried.append(candidate)
                if candidate.is_file():
                    return candidate
    shown = ", ".join(str(p.relative_to(root)) for p in tried[:6])
    raise QADataError(
        f"no {canonical!r} data under {root} (looked for {shown}, …); pass --data-dir to the folder"
    )


def load_dataset(
    name: str,
    data_dir: str | os.PathLike[str],
    *,
    limit: int | None = None,
    seed: int = 0,
    split: str = "test",
    strict: bool = True,
) -> list[QAExample]:
    """Load one dataset by name from ``data_dir``, optionally a seeded sample of ``limit`` questions."""
    examples = read_jsonl(dataset_path(data_dir, name, split), canonical_name(name), strict=strict)
    return sample_examples(examples, limit, seed)


def load_datasets(
    names: Iterable[str],
    data_dir: str | os.PathLike[str],
    *,
    limit: int | None = None,
    seed: int = 0,
    split: str = "test",
    strict: bool = True,
) -> dict[str, list[QAExample]]:
    """Load several datasets; ``limit`` applies to each one.

    Raises:
        QADataError: when ``data_dir`` is a single file but several datasets are named.

    """
    names = list(names)
    if Path(data_dir).is_file() and len(names) != 1:
        raise QADataError(f"{data_dir} is one file; name exactly one dataset for it (got {names})")
    return {
        canonical_name(n): load_dataset(n, data_dir, limit=limit, seed=seed, split=split, strict=strict)
        for n in names
    }


def parse_dataset_list(text: str) -> tuple[str, ...]:
    """``"nq,hotpotqa"`` or ``"all"`` → canonical names (unknown names kept as given, lower-cased).

    >>> parse_dataset_list("nq, 2wiki")
    ('nq', '2wikimultihopqa')
    """
    names = [n for n in (part.strip() for part in text.split(",")) if n]
    if not names:
        raise ValueError("no dataset named; pass e.g. --datasets nq,hotpotqa or --datasets all")
    if [n.lower() for n in names] == ["all"]:
        return DATASET_NAMES
    return tuple(dict.fromkeys(canonical_name(n) for n in names))
