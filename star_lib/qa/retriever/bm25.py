"""BM25 retrieval over a passage corpus (bm25s), with its analyzer and a memory-mapped, exact top-k search.

Index folder layout (where it lives: :mod:`~star_lib.qa.retriever.store`)::

    <corpus>.bm25s/
        data.csc.index.npy, indices.csc.index.npy, indptr.csc.index.npy,
        vocab.index.json, params.index.json        # bm25s's own files (eager BM25 scores, CSC)
        offsets.npy                                # int64, n_passages + 1 byte offsets into the corpus
        meta.json                                  # corpus fingerprint + analyzer and BM25 settings

Later runs load it memory-mapped (``bm25s.BM25.load(mmap=True)``), so a large index costs no RAM until it
is read. Single-query search runs on bm25s's precomputed score matrix with a sparse accumulate-and-select
step that touches only the postings of the query terms, which is what makes one call fast on a large
corpus.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import threading
from collections.abc import Callable
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import numpy as np

from star_lib.qa.retriever.corpus import CorpusFile, Passage, iter_corpus
from star_lib.qa.retriever.store import (
    INDEX_FORMAT,
    default_index_dir,
    fingerprint,
    optional_path,
    publish,
    read_meta,
)

TOKEN_PATTERN = r"(?u)\b\w\w+\b"
"""bm25s's (and scikit-learn's) default token pattern."""


class Analyzer:
    """Text → index terms: lowercase, bm25s's token pattern, English stopwords out, Snowball stemming.

    The same analyzer runs at index and query time (its settings are saved in ``meta.json``).
    Stems are cached per word, so a query costs one regex pass plus dictionary lookups.

    >>> Analyzer().terms("The Running of the Bulls")
    ['run', 'bull']
    """

    def __init__(self, stemmer: str | None = "english", stopwords: str | None = "en") -> None:
        """Create an analyzer.

        Args:
            stemmer: PyStemmer language, or None for no stemming.
            stopwords: ``"en"`` for bm25s's English list, or None to keep every word.

        """
        import bm25s.stopwords

        self.stemmer_name = stemmer
        self.stopwords_name = stopwords
        self._pattern = re.compile(TOKEN_PATTERN)
        self._stop = frozenset(bm25s.stopwords.STOPWORDS_EN) if stopwords == "en" else frozenset()
        if stopwords not in ("en", None):
            raise ValueError(f"stopwords must be 'en' or None, got {stopwords!r}")
        self._stem_words: Callable[[list[str]], list[str]] | None = None
        if stemmer is not None:
            import Stemmer

            self._stem_words = Stemmer.Stemmer(stemmer).stemWords
        self._cache: dict[str, str] = {}

    def settings(self) -> dict[str, Any]:
        """Return the settings that must match between index and query time."""
        return {"stemmer": self.stemmer_name, "stopwords": self.stopwords_name, "pattern": TOKEN_PATTERN}

    def terms(self, text: str) -> list[str]:
        """Index terms of ``text`` in order (duplicates kept)."""
        words = [w for w in self._pattern.findall(text.lower()) if w not in self._stop]
        if self._stem_words is None:
            return words
        cache = self._cache
        missing = [w for w in set(words) if w not in cache]
        if not missing:
            return [cache[w] for w in words]
        fresh = dict(zip(missing, self._stem_words(missing), strict=True))
        if len(cache) > 2_000_000:
            self._cache = cache = {}  # bounded; a new dict, so a concurrent reader never sees it emptied
        cache.update(fresh)
        return [fresh[w] if w in fresh else cache[w] for w in words]


@dataclass(frozen=True)
class BM25Config:
    """Settings of a BM25 index (saved with it; a change triggers a rebuild)."""

    k1: float = 0.9
    """Term-frequency saturation (Pyserini's default, the one Search-R1's BM25 baseline uses)."""
    b: float = 0.4
    """Length normalisation (Pyserini's default)."""
    method: str = "lucene"
    """bm25s scoring variant: ``lucene`` | ``robertson`` | ``atire``."""
    stemmer: str | None = "english"
    """PyStemmer language, or None."""
    stopwords: str | None = "en"
    """``"en"`` (bm25s's English list) or None."""

    def __post_init__(self) -> None:
        if self.k1 < 0 or not 0 <= self.b <= 1:
            raise ValueError(f"BM25 needs k1 >= 0 and 0 <= b <= 1; got k1={self.k1}, b={self.b}")
        if self.method not in ("lucene", "robertson", "atire"):
            raise ValueError(
                f"method must be lucene, robertson or atire (no non-occurrence variants); got {self.method!r}"
            )


class BM25Retriever:
    """BM25 over a passage corpus, backed by a memory-mapped bm25s index.

    Use :meth:`open` (build if needed, then load). :meth:`search` is guarded by a lock, so one
    retriever may serve several threads.

    Example:
        >>> retriever = BM25Retriever.open("corpus.jsonl", index_dir="/tmp/idx")  # doctest: +SKIP
        >>> retriever.search("Evan Morris lobbyist", k=3)[0].title  # doctest: +SKIP
        'Evan Morris'

    """

    def __init__(self, index_dir: Path, corpus: CorpusFile, analyzer: Analyzer, bm25: Any) -> None:
        """Wrap a loaded index (use :meth:`open`)."""
        self.index_dir = index_dir
        self.corpus = corpus
        self.analyzer = analyzer
        self.bm25 = bm25
        scores = bm25.scores
        # plain ndarray views of the memory maps: slicing a np.memmap costs a Python-level __getitem__
        self._data: np.ndarray = scores["data"].view(np.ndarray)  # (nnz,) float32 BM25 impacts
        self._indices: np.ndarray = scores["indices"].view(np.ndarray)  # (nnz,) doc rows, sorted per term
        self._indptr: np.ndarray = scores["indptr"].view(np.ndarray)  # (n_terms + 1,)
        self._max_impact: np.ndarray = np.load(index_dir / "max_impact.npy", mmap_mode="r").view(np.ndarray)
        self._vocab: dict[str, int] = bm25.vocab_dict
        # score accumulator reused by every query; only the touched rows are reset afterwards
        self._acc = np.zeros(len(corpus), dtype=np.float32)  # (n_passages,)
        self._lock = threading.Lock()

    # ── building and loading ──

    @classmethod
    def open(
        cls,
        corpus: str | os.PathLike[str],
        index_dir: str | os.PathLike[str] | None = None,
        *,
        cache_dir: str | os.PathLike[str] | None = None,
        config: BM25Config | None = None,
        rebuild: bool = False,
        show_progress: bool = False,
    ) -> BM25Retriever:
        """Load the index of ``corpus``, building it first when missing, stale or ``rebuild``.

        Args:
            corpus: the corpus file (JSONL or TSV).
            index_dir: where the index lives (default :func:`default_index_dir`).
            cache_dir: cache root for the index (default: beside the corpus, or the user cache when the
                corpus folder is read-only).
            config: BM25 settings (default :class:`BM25Config`).
            rebuild: build even when a matching index exists.
            show_progress: show a progress bar while indexing.

        Raises:
            FileNotFoundError: when the corpus file does not exist.
            ValueError: when a corpus line is corrupt (path and line number in the message).

        """
        corpus = Path(corpus)
        if not corpus.is_file():
            raise FileNotFoundError(f"corpus file not found: {corpus} (pass --corpus PATH to a .jsonl)")
        config = config or BM25Config()
        target = (
            Path(index_dir) if index_dir else default_index_dir(corpus, "bm25s", optional_path(cache_dir))
        )
        if rebuild or not cls._index_matches(target, corpus, config):
            cls.build(corpus, target, config=config, show_progress=show_progress)
        return cls.load(target, corpus)

    @staticmethod
    def _expected_meta(corpus: Path, config: BM25Config) -> dict[str, Any]:
        return {"format": INDEX_FORMAT, **fingerprint(corpus), "bm25": asdict(config)}

    @classmethod
    def _index_matches(cls, index_dir: Path, corpus: Path, config: BM25Config) -> bool:
        meta = read_meta(index_dir)
        if meta is None:
            return False
        expected = cls._expected_meta(corpus, config)
        return all(meta.get(key) == value for key, value in expected.items() if key != "corpus")

    @classmethod
    def build(
        cls,
        corpus: str | os.PathLike[str],
        index_dir: str | os.PathLike[str],
        *,
        config: BM25Config | None = None,
        show_progress: bool = False,
    ) -> Path:
        """Tokenise the corpus, build the bm25s index and save it (atomically) to ``index_dir``.

        Returns:
            The index folder.

        """
        import bm25s
        from tqdm.auto import tqdm

        corpus, index_dir, config = Path(corpus), Path(index_dir), config or BM25Config()
        analyzer = Analyzer(config.stemmer, config.stopwords)
        vocab: dict[str, int] = {}
        doc_ids: list[list[int]] = []
        offsets: list[int] = []
        passages = tqdm(iter_corpus(corpus), desc=f"index {corpus.name}", disable=not show_progress)
        for start, passage in passages:
            offsets.append(start)
            doc_ids.append([vocab.setdefault(t, len(vocab)) for t in analyzer.terms(passage.contents)])
        if not doc_ids:
            raise ValueError(f"corpus {corpus} holds no passages; point --corpus at a non-empty .jsonl")
        if not vocab:
            raise ValueError(f"corpus {corpus} has no indexable words (only stopwords or 1-letter tokens)")
        offsets.append(corpus.stat().st_size)

        bm25 = bm25s.BM25(k1=config.k1, b=config.b, method=config.method)
        bm25.index((doc_ids, vocab), show_progress=False)
        _check_sorted_postings(bm25.scores)

        index_dir.parent.mkdir(parents=True, exist_ok=True)
        tmp = index_dir.parent / f".{index_dir.name}.tmp-{os.getpid()}-{threading.get_ident()}"
        shutil.rmtree(tmp, ignore_errors=True)
        bm25.save(tmp, show_progress=False)
        np.save(tmp / "offsets.npy", np.asarray(offsets, dtype=np.int64))
        np.save(tmp / "max_impact.npy", _max_impacts(bm25.scores))
        meta = {
            **cls._expected_meta(corpus, config),
            "analyzer": analyzer.settings(),
            "n_passages": len(doc_ids),
        }
        (tmp / "meta.json").write_text(json.dumps(meta, indent=2))
        publish(tmp, index_dir)
        return index_dir

    @classmethod
    def load(
        cls, index_dir: str | os.PathLike[str], corpus: str | os.PathLike[str] | None = None
    ) -> BM25Retriever:
        """Load a saved index memory-mapped.

        Args:
            index_dir: the index folder.
            corpus: the corpus file (default: the path recorded in ``meta.json``).

        Raises:
            FileNotFoundError: when the folder holds no index.

        """
        import bm25s

        index_dir = Path(index_dir)
        meta = read_meta(index_dir)
        if meta is None:
            raise FileNotFoundError(
                f"no BM25 index in {index_dir}; build one with BM25Retriever.open(corpus)"
            )
        bm25 = bm25s.BM25.load(index_dir, mmap=True, load_corpus=False, show_progress=False)
        offsets = np.load(index_dir / "offsets.npy", mmap_mode="r")
        config = BM25Config(**meta["bm25"])
        reader = CorpusFile(corpus or meta["corpus"], offsets=offsets)
        return cls(index_dir, reader, Analyzer(config.stemmer, config.stopwords), bm25)

    # ── search ──

    def __len__(self) -> int:
        """Return the number of indexed passages."""
        return len(self.corpus)

    def term_ids(self, query: str) -> list[int]:
        """Vocabulary ids of the query's terms (unknown terms dropped, duplicates kept)."""
        vocab = self._vocab
        return [vocab[t] for t in self.analyzer.terms(query) if t in vocab]

    def top_k(self, query: str, k: int = 3) -> tuple[np.ndarray, np.ndarray]:
        """Row indices and BM25 scores of the ``k`` best passages (score > 0), best first.

        Exact — the same ranking as scoring every passage — but with MaxScore pruning: query terms
        are taken in order of their largest possible contribution; once the terms left could add
        less than the current k-th best partial score, no passage outside the candidates seen so far
        can reach the top k, and the candidates get the remaining terms' scores by binary search in
        those terms' (sorted) posting lists. Ties are broken by corpus order.
        """
        ids = self.term_ids(query)
        if not ids or k <= 0:
            return np.empty(0, dtype=np.int64), np.empty(0, dtype=np.float32)
        terms, counts = np.unique(np.asarray(ids, dtype=np.int64), return_counts=True)
        bounds = self._max_impact[terms] * counts  # (m,) upper bound of each term's contribution
        order = np.argsort(-bounds, kind="stable")
        terms, counts, bounds = terms[order], counts[order], bounds[order]
        rest = np.concatenate([np.cumsum(bounds[::-1])[::-1][1:], [0.0]])  # bound of terms after j
        with self._lock:
            return self._max_score(terms, counts.astype(np.float32), rest, k)

    def _postings(self, term: int) -> tuple[np.ndarray, np.ndarray]:
        lo, hi = self._indptr[term], self._indptr[term + 1]
        return self._indices[lo:hi], self._data[lo:hi]

    def _max_score(
        self, terms: np.ndarray, weights: np.ndarray, rest: np.ndarray, k: int
    ) -> tuple[np.ndarray, np.ndarray]:
        acc, seen = self._acc, []
        try:
            for j, term in enumerate(terms):  # ── essential terms: accumulate their postings
                docs, impacts = self._postings(int(term))
                acc[docs] += impacts * weights[j] if weights[j] != 1 else impacts  # docs unique per term
                seen.append(docs)
                cand = seen[0] if len(seen) == 1 else np.concatenate(seen)  # (P,) rows, with repeats
                rows, partial = _select_top(cand, acc[cand], k, max_repeat=len(seen))
                if rest[j] == 0 or (len(rows) == k and rest[j] < partial[-1]):
                    break
            cand = np.unique(cand)  # (C,) sorted distinct candidates
            full = acc[cand]
        finally:
            for docs in seen:
                acc[docs] = 0.0
        # ── the remaining terms: look the candidates up in their postings
        for term, weight in zip(terms[j + 1 :], weights[j + 1 :], strict=True):
            docs, impacts = self._postings(int(term))
            if len(docs) == 0:
                continue
            pos = np.minimum(np.searchsorted(docs, cand), len(docs) - 1)
            hit = docs[pos] == cand
            full[hit] += impacts[pos[hit]] * weight
        return _select_top(cand, full, k, max_repeat=1)

    def search(self, query: str, k: int = 3) -> list[Passage]:
        """Top-``k`` passages for ``query``, best first; empty when no query term is in the index."""
        rows, scores = self.top_k(query, k)
        out = []
        for row, score in zip(rows.tolist(), scores.tolist(), strict=True):
            p = self.corpus[row]
            out.append(Passage(p.id, p.title, p.text, score=float(score), index=row))
        return out


def _select_top(
    cand: np.ndarray, scores: np.ndarray, k: int, max_repeat: int
) -> tuple[np.ndarray, np.ndarray]:
    """Top-k distinct candidates by score (ties: lower row first).

    ``cand`` may list a document up to ``max_repeat`` times (once per query term, with its full score
    each time), so the k best distinct documents lie within the ``k * max_repeat`` best entries.
    """
    m = min(len(cand), k * max_repeat)
    if m < len(cand):
        part = np.argpartition(-scores, m - 1)[:m]
        cand, scores = cand[part], scores[part]
    docs, first = np.unique(cand, return_index=True)  # sorted rows, deduplicated
    doc_scores = scores[first]
    order = np.lexsort((docs, -doc_scores))[:k]
    keep = doc_scores[order] > 0
    return docs[order][keep].astype(np.int64), doc_scores[order][keep]


def _max_impacts(scores: dict[str, Any]) -> np.ndarray:
    """Largest BM25 impact of each term (0 for a term without postings), float32 (n_terms,)."""
    data, indptr = np.asarray(scores["data"]), np.asarray(scores["indptr"])
    out = np.zeros(len(indptr) - 1, dtype=np.float32)
    nonempty = np.flatnonzero(indptr[1:] > indptr[:-1])
    if len(nonempty):
        out[nonempty] = np.maximum.reduceat(data, indptr[nonempty])
    return out


def _check_sorted_postings(scores: dict[str, Any]) -> None:
    """Check that posting lists list doc rows in increasing order (binary search relies on it)."""
    indices, indptr = np.asarray(scores["indices"]), np.asarray(scores["indptr"])
    increasing = np.diff(indices) > 0
    boundary = indptr[1:-1]
    increasing[boundary[(boundary > 0) & (boundary < len(indices))] - 1] = True
    if not increasing.all():
        raise RuntimeError("bm25s returned unsorted posting lists; this bm25s version is not supported")
