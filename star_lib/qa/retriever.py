r"""Local passage retrieval for the QA search tool: BM25 (bm25s) and optional dense retrieval.

The corpus is a JSONL file in the wiki-18 / Search-R1 format, one passage a line::

    {"id": "0", "contents": "\"Evan Morris\"\nEvan Morris Evan L. Morris (January 26, 1977 – …"}

(``{"id", "title", "text"}`` lines and DPR/KILT-style TSV files ``id<TAB>"Title: … Text: …"`` work too).

The BM25 index is built once with :mod:`bm25s` and saved in a folder beside the corpus
(``<corpus>.bm25s/``), or in ``$STAR_CACHE_DIR`` when it is set (the cache wins), or in the user cache
folder when the corpus folder is read-only — a folder whose
permission bits deny writes counts as read-only even for root, so shared data is never written to.
Later runs load it memory-mapped (``bm25s.BM25.load(mmap=True)``), so a large index costs no RAM
until it is read. Passages are not copied into the index: ``offsets.npy`` holds the byte offset of
every corpus line and a hit is read back from the corpus file itself.

Index folder layout::

    <corpus>.bm25s/
        data.csc.index.npy, indices.csc.index.npy, indptr.csc.index.npy,
        vocab.index.json, params.index.json        # bm25s's own files (eager BM25 scores, CSC)
        offsets.npy                                # int64, n_passages + 1 byte offsets into the corpus
        meta.json                                  # corpus fingerprint + analyzer and BM25 settings

The index is rebuilt when ``meta.json`` no longer matches (corpus size or mtime changed, other
settings). Single-query search runs on bm25s's precomputed score matrix with a sparse
accumulate-and-select step that touches only the postings of the query terms, which is what makes
one call fast on a large corpus.
"""

from __future__ import annotations

import csv
import hashlib
import json
import os
import re
import shutil
import stat
import threading
from collections.abc import Callable, Iterator, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Protocol, runtime_checkable

import numpy as np

INDEX_FORMAT = 2
"""Bumped when the index folder layout or the analyzer changes; older indexes are rebuilt."""
TOKEN_PATTERN = r"(?u)\b\w\w+\b"
"""bm25s's (and scikit-learn's) default token pattern."""
CACHE_ENV = "STAR_CACHE_DIR"
"""Environment variable naming the cache folder for indexes of read-only corpora."""


# ───────────────────────────── passages and corpus files ─────────────────────────────


@dataclass(frozen=True)
class Passage:
    """One retrieved passage."""

    id: str
    """The corpus id (``"0"``, ``"1234"``…)."""
    title: str
    """Article title, without quotes; may be empty."""
    text: str
    """Passage text (in wiki-18 it starts by repeating the title)."""
    score: float = 0.0
    """Retrieval score (BM25 or cosine); 0.0 when the passage was not retrieved."""
    index: int = -1
    """Row of the passage in the corpus file (0-based, blank lines not counted)."""

    @property
    def contents(self) -> str:
        r"""The wiki-18 ``contents`` form: ``"Title"\ntext``."""
        return f'"{self.title}"\n{self.text}' if self.title else self.text


_TSV_TITLE = re.compile(r"^\s*Title:\s*(?P<title>.*?)\s+Text:\s*(?P<text>.*)$", re.DOTALL)


def parse_passage_json(record: Any, index: int = -1) -> Passage:
    r"""Build a :class:`Passage` from one JSONL record (``contents`` or ``title``/``text`` form).

    >>> parse_passage_json({"id": "7", "contents": '"Paris"\nParis is the capital of France.'}).title
    'Paris'

    Raises:
        ValueError: when the record is not an object with ``contents`` or ``text``.

    """
    if not isinstance(record, dict):
        raise ValueError(f"a passage must be a JSON object, got {type(record).__name__}")
    pid = str(record.get("id", record.get("_id", index)))
    if "contents" in record:
        contents = str(record["contents"])
        head, sep, tail = contents.partition("\n")
        if not sep:
            return Passage(pid, "", contents, index=index)
        return Passage(pid, head.strip().strip('"'), tail, index=index)
    if "text" in record:
        return Passage(pid, str(record.get("title") or ""), str(record["text"]), index=index)
    raise ValueError(f"a passage needs a 'contents' or 'text' field; this one has {sorted(record)}")


def parse_passage_tsv(line: str, index: int = -1) -> Passage:
    """Build a :class:`Passage` from one TSV line: ``id<TAB>text[<TAB>title]`` (DPR) or ``Title: … Text: …``.

    Raises:
        ValueError: when the line has fewer than two fields.

    """
    fields = next(csv.reader([line.lstrip("\ufeff")], delimiter="\t"))
    if len(fields) < 2:
        raise ValueError("a TSV passage needs at least two tab-separated fields: id and text")
    pid, text = fields[0], fields[1]
    if len(fields) >= 3:
        return Passage(pid, fields[2], text, index=index)
    match = _TSV_TITLE.match(text)
    if match:
        return Passage(pid, match["title"].strip(), match["text"].strip(), index=index)
    return Passage(pid, "", text, index=index)


def _is_tsv(path: Path) -> bool:
    return path.suffix.lower() in (".tsv", ".tab")


def iter_corpus_lines(path: str | os.PathLike[str]) -> Iterator[tuple[int, int, bytes]]:
    """Yield ``(byte offset, 1-based line number, raw line)`` for every passage line of a corpus file.

    Blank lines and a TSV header line are skipped.
    """
    path = Path(path)
    tsv, offset = _is_tsv(path), 0
    with path.open("rb") as handle:
        for lineno, raw in enumerate(handle, start=1):
            start, offset = offset, offset + len(raw)
            if not raw.strip() or (tsv and lineno == 1 and _is_tsv_header(raw)):
                continue
            yield start, lineno, raw


def parse_corpus_line(path: Path, raw: bytes, index: int, lineno: int | None = None) -> Passage:
    """Parse one raw corpus line (JSONL, or TSV when ``path`` ends in ``.tsv``) into a :class:`Passage`.

    Raises:
        ValueError: naming the file and line when the line is corrupt.

    """
    try:
        text = raw.decode("utf-8").rstrip("\r\n")
        if _is_tsv(path):
            return parse_passage_tsv(text, index)
        return parse_passage_json(json.loads(text), index)
    except RecursionError:
        raise ValueError(
            f"{path}: passage {index}: JSON nested too deeply; fix or remove that line"
        ) from None
    except (UnicodeDecodeError, ValueError) as exc:
        where = f"line {lineno}" if lineno is not None else f"passage {index}"
        raise ValueError(f"{path}:{where}: corrupt corpus passage ({exc}); fix or remove that line") from exc


def iter_corpus(path: str | os.PathLike[str]) -> Iterator[tuple[int, Passage]]:
    """Yield ``(byte offset, passage)`` in file order.

    Raises:
        ValueError: on the first corrupt line, with path and line number.

    """
    path = Path(path)
    for index, (start, lineno, raw) in enumerate(iter_corpus_lines(path)):
        yield start, parse_corpus_line(path, raw, index, lineno)


class CorpusFile:
    """Random access to the passages of a corpus file through byte offsets (no passage kept in memory).

    Reads use ``os.pread``, so one instance may serve several threads.
    """

    def __init__(self, path: str | os.PathLike[str], offsets: np.ndarray | None = None) -> None:
        """Open ``path``; scan it for line offsets unless ``offsets`` (n + 1 int64 values) is given.

        Raises:
            FileNotFoundError: when the corpus file does not exist.

        """
        self._fd = -1
        self.path = Path(path)
        if not self.path.is_file():
            raise FileNotFoundError(f"corpus file not found: {self.path} (pass --corpus PATH to a .jsonl)")
        if offsets is None:
            starts = [start for start, _, _ in iter_corpus_lines(self.path)]
            offsets = np.asarray([*starts, self.path.stat().st_size], dtype=np.int64)
        self.offsets = offsets
        self._fd = os.open(self.path, os.O_RDONLY)

    def __len__(self) -> int:
        """Return the number of passages."""
        return len(self.offsets) - 1

    def __getitem__(self, index: int) -> Passage:
        """Read the passage at row ``index``."""
        if not 0 <= index < len(self):
            raise IndexError(f"passage {index} out of range (corpus has {len(self)})")
        start, end = int(self.offsets[index]), int(self.offsets[index + 1])
        return parse_corpus_line(self.path, os.pread(self._fd, end - start, start), index)

    def close(self) -> None:
        """Close the file descriptor."""
        if getattr(self, "_fd", -1) >= 0:
            os.close(self._fd)
            self._fd = -1

    def __del__(self) -> None:
        self.close()


def _is_tsv_header(raw: bytes) -> bool:
    first = raw.decode("utf-8", "replace").lstrip("\ufeff").split("\t", 1)[0].strip().lower()
    return first in ("id", "_id", "docid")


# ───────────────────────────── analyzer ─────────────────────────────


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


# ───────────────────────────── BM25 ─────────────────────────────


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


@runtime_checkable
class Retriever(Protocol):
    """Anything that returns the top-k passages of a query."""

    def search(self, query: str, k: int = 3) -> list[Passage]:
        """Top-``k`` passages, best first (fewer when fewer match)."""
        ...


def _folder_writable(folder: Path) -> bool:
    """Tell whether ``folder`` may be written: permission bits allow it (even for root) and access agrees."""
    try:
        mode = folder.stat().st_mode
    except OSError:
        return False
    return bool(mode & stat.S_IWUSR) and os.access(folder, os.W_OK)


def default_cache_dir() -> Path:
    """``$STAR_CACHE_DIR`` or ``$XDG_CACHE_HOME/star_lib`` or ``~/.cache/star_lib``."""
    if os.environ.get(CACHE_ENV):
        return Path(os.environ[CACHE_ENV])
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "star_lib"


def default_index_dir(
    corpus: str | os.PathLike[str], kind: str = "bm25s", cache_dir: Path | None = None
) -> Path:
    """Return where the index of ``corpus`` lives: in the cache when one is named, else beside the corpus.

    A cache named by ``cache_dir`` or by ``$STAR_CACHE_DIR`` always wins; without one the index goes beside
    the corpus when its folder is writable, else in :func:`default_cache_dir`.

    Args:
        corpus: the corpus file.
        kind: index kind, used as the folder suffix (``bm25s``, ``dense-<model>``).
        cache_dir: cache root; when given the index always goes there (default: ``$STAR_CACHE_DIR`` when
            set, else beside the corpus, or :func:`default_cache_dir` for a read-only folder).

    """
    corpus = Path(corpus).resolve()
    if cache_dir is None and os.environ.get(CACHE_ENV):
        cache_dir = Path(os.environ[CACHE_ENV])
    if cache_dir is None and _folder_writable(corpus.parent):
        return corpus.parent / f"{corpus.name}.{kind}"
    digest = hashlib.sha1(str(corpus).encode()).hexdigest()[:12]
    return Path(cache_dir or default_cache_dir()) / "qa_index" / f"{corpus.name}-{digest}.{kind}"


def _fingerprint(corpus: Path) -> dict[str, Any]:
    st = corpus.stat()
    return {"corpus": str(corpus.resolve()), "size": st.st_size, "mtime_ns": st.st_mtime_ns}


def _read_meta(index_dir: Path) -> dict[str, Any] | None:
    try:
        return json.loads((index_dir / "meta.json").read_text())
    except (OSError, ValueError):
        return None


def _publish(tmp: Path, index_dir: Path) -> None:
    """Move a finished index folder into place (replacing a stale one)."""
    if index_dir.exists():
        shutil.rmtree(index_dir, ignore_errors=True)
    try:
        os.replace(tmp, index_dir)
    except OSError:
        shutil.rmtree(tmp, ignore_errors=True)  # another process published first
        if not (index_dir / "meta.json").exists():
            raise


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
        target = Path(index_dir) if index_dir else default_index_dir(corpus, "bm25s", _opt_path(cache_dir))
        if rebuild or not cls._index_matches(target, corpus, config):
            cls.build(corpus, target, config=config, show_progress=show_progress)
        return cls.load(target, corpus)

    @staticmethod
    def _expected_meta(corpus: Path, config: BM25Config) -> dict[str, Any]:
        return {"format": INDEX_FORMAT, **_fingerprint(corpus), "bm25": asdict(config)}

    @classmethod
    def _index_matches(cls, index_dir: Path, corpus: Path, config: BM25Config) -> bool:
        meta = _read_meta(index_dir)
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
        _publish(tmp, index_dir)
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
        meta = _read_meta(index_dir)
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


def _opt_path(value: str | os.PathLike[str] | None) -> Path | None:
    return Path(value) if value is not None else None


# ───────────────────────────── dense (optional) ─────────────────────────────


Encoder = Callable[[Sequence[str]], np.ndarray]
"""Texts → (n, d) float array; rows need not be normalised."""


def sentence_transformer_encoder(model: str, *, device: str | None = None, batch_size: int = 64) -> Encoder:
    """Build an :data:`Encoder` from a local sentence-transformers model.

    Raises:
        ImportError: when sentence-transformers is not installed (it is optional).

    """
    try:
        from sentence_transformers import SentenceTransformer
    except ImportError as exc:
        raise ImportError(
            "dense retrieval needs sentence-transformers: `pip install sentence-transformers`, "
            "or use the BM25 retriever (--retriever bm25)"
        ) from exc
    st_model = SentenceTransformer(model, device=device)

    def encode(texts: Sequence[str]) -> np.ndarray:
        return st_model.encode(
            list(texts), batch_size=batch_size, convert_to_numpy=True, show_progress_bar=False
        )

    return encode


@dataclass
class DenseRetriever:
    """Cosine-similarity retrieval over passage embeddings (cached as ``embeddings.npy``, loaded mmap).

    Use :meth:`open`; ``encoder`` is any text → vector function (by default a local
    sentence-transformers model, which needs the optional package).
    """

    corpus: CorpusFile
    encoder: Encoder
    embeddings: np.ndarray
    """(n_passages, d) float32, rows L2-normalised."""
    index_dir: Path | None = None
    query_prefix: str = ""
    """Prepended to every query (e5 models want ``"query: "``)."""
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False)

    @classmethod
    def open(
        cls,
        corpus: str | os.PathLike[str],
        encoder: Encoder | str,
        index_dir: str | os.PathLike[str] | None = None,
        *,
        cache_dir: str | os.PathLike[str] | None = None,
        key: str | None = None,
        query_prefix: str = "",
        passage_prefix: str = "",
        batch_size: int = 256,
        rebuild: bool = False,
    ) -> DenseRetriever:
        """Embed the corpus once (cached), then load the embeddings memory-mapped.

        Args:
            corpus: the corpus file.
            encoder: an :data:`Encoder`, or a local sentence-transformers model path/name.
            index_dir: where the embeddings live (default :func:`default_index_dir`, kind ``dense-<key>``).
            cache_dir: cache root used when the corpus folder is read-only.
            key: names the encoder in the cache folder and fingerprint (default: the model string).
            query_prefix: prepended to queries.
            passage_prefix: prepended to passages before encoding.
            batch_size: passages per encoder call while embedding.
            rebuild: re-embed even when cached embeddings match.

        """
        corpus = Path(corpus)
        if isinstance(encoder, str):
            key = key or encoder
            encoder = sentence_transformer_encoder(encoder)
        if key is None:
            raise ValueError("pass key= to name a custom encoder (it keys the embedding cache)")
        safe_key = re.sub(r"[^A-Za-z0-9_.-]+", "_", key)[-60:]
        target = (
            Path(index_dir)
            if index_dir
            else default_index_dir(corpus, f"dense-{safe_key}", _opt_path(cache_dir))
        )
        expected = {
            "format": INDEX_FORMAT,
            **_fingerprint(corpus),
            "key": key,
            "passage_prefix": passage_prefix,
        }
        meta = _read_meta(target)
        if rebuild or meta is None or any(meta.get(k) != v for k, v in expected.items() if k != "corpus"):
            reader = CorpusFile(corpus)
            target.parent.mkdir(parents=True, exist_ok=True)
            tmp = target.parent / f".{target.name}.tmp-{os.getpid()}"
            tmp.mkdir(parents=True, exist_ok=True)
            chunks = []
            for lo in range(0, len(reader), batch_size):
                texts = [
                    passage_prefix + reader[i].contents for i in range(lo, min(lo + batch_size, len(reader)))
                ]
                chunks.append(_normalise(np.asarray(encoder(texts), dtype=np.float32)))
            np.save(tmp / "embeddings.npy", np.concatenate(chunks))
            np.save(tmp / "offsets.npy", reader.offsets)
            (tmp / "meta.json").write_text(json.dumps({**expected, "n_passages": len(reader)}, indent=2))
            _publish(tmp, target)
        offsets = np.load(target / "offsets.npy", mmap_mode="r")
        embeddings = np.load(target / "embeddings.npy", mmap_mode="r")
        return cls(CorpusFile(corpus, offsets), encoder, embeddings, target, query_prefix)

    def search(self, query: str, k: int = 3) -> list[Passage]:
        """Top-``k`` passages by cosine similarity, best first."""
        q = _normalise(np.asarray(self.encoder([self.query_prefix + query]), dtype=np.float32))[0]  # (d,)
        sims = self.embeddings @ q  # (n,)
        k = min(k, len(sims))
        if k <= 0:
            return []
        top = np.argpartition(-sims, k - 1)[:k]
        top = top[np.lexsort((top, -sims[top]))]
        with self._lock:
            hits = [self.corpus[int(i)] for i in top]
        return [Passage(p.id, p.title, p.text, score=float(sims[p.index]), index=p.index) for p in hits]


def _normalise(vectors: np.ndarray) -> np.ndarray:
    norms = np.linalg.norm(vectors, axis=1, keepdims=True)
    return vectors / np.maximum(norms, 1e-12)


def open_retriever(
    corpus: str | os.PathLike[str],
    kind: str = "bm25",
    *,
    index_dir: str | os.PathLike[str] | None = None,
    cache_dir: str | os.PathLike[str] | None = None,
    dense_model: str | None = None,
) -> Retriever:
    """Open a BM25 (default) or dense retriever over ``corpus``.

    Raises:
        ValueError: for an unknown ``kind`` or ``dense`` without ``dense_model``.

    """
    if kind == "bm25":
        return BM25Retriever.open(corpus, index_dir, cache_dir=cache_dir)
    if kind == "dense":
        if not dense_model:
            raise ValueError(
                "dense retrieval needs a local sentence-transformers model: pass --dense-model PATH"
            )
        return DenseRetriever.open(corpus, dense_model, index_dir, cache_dir=cache_dir)
    raise ValueError(f"retriever kind must be 'bm25' or 'dense', got {kind!r}")
