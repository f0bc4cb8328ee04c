"""Queries per second of the BM25 ``Search`` tool on a 100k-passage synthetic corpus, one core.

The corpus (seeded) mimics wiki-18 passages: a title line plus ~100 words drawn from a Zipf law over
50k pseudo-words, with English stopwords mixed in at their usual rate. Queries are question-like
strings built from a random passage's title and words. Every query is one real tool call
(``SearchTools.call("Search", {"query": …})``: argument checks, analysis, BM25 top-k, reading the
passages back from the corpus file, formatting the observation) — no batching, since the tool serves
one call at a time.

Usage: ``python benchmarks/bench_search.py [--passages 100000] [--queries 3000] [--k 3]``.
Last line: ``{"queries_per_s": …, …}``.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time
from pathlib import Path

for _var in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS", "NUMBA_NUM_THREADS"):
    os.environ.setdefault(_var, "1")  # before numpy loads: one core

import numpy as np  # noqa: E402

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from star_lib.qa.retriever import BM25Retriever  # noqa: E402
from star_lib.qa.tools import SearchTools  # noqa: E402

STOPWORDS = "the of and in to a is was for on as by with from at that his an it which are were be".split()
SYLLABLES = "ka ri mo ten sal vor lin da ne pa ro shi tu bel gar min os ul fe zan qui lo ha dor".split()


def pseudo_words(n: int, rng: np.random.Generator) -> list[str]:
    """``n`` distinct pronounceable pseudo-words (2–4 syllables)."""
    words: set[str] = set()
    while len(words) < n:
        lengths = rng.integers(2, 5, size=n)
        picks = rng.integers(0, len(SYLLABLES), size=(n, 4))
        for length, row in zip(lengths, picks, strict=True):
            words.add("".join(SYLLABLES[i] for i in row[:length]))
    return sorted(words)[:n]


def write_corpus(path: Path, n_passages: int, seed: int, vocab_size: int = 50_000, words: int = 100) -> None:
    """Write a wiki-18-style JSONL corpus of ``n_passages`` passages (seeded)."""
    rng = np.random.default_rng(seed)
    vocab = np.asarray(pseudo_words(vocab_size, rng))
    cdf = np.cumsum(1.0 / np.arange(1, vocab_size + 1) ** 1.07)
    cdf /= cdf[-1]
    stop = np.asarray(STOPWORDS)
    with path.open("w", encoding="utf-8") as out:
        for lo in range(0, n_passages, 10_000):
            n = min(10_000, n_passages - lo)
            content = vocab[np.searchsorted(cdf, rng.random((n, words)))]  # (n, words) Zipf draws
            is_stop = rng.random((n, words)) < 0.35
            tokens = np.where(is_stop, stop[rng.integers(0, len(stop), size=(n, words))], content)
            titles = vocab[rng.integers(0, vocab_size, size=(n, 2))]
            for i in range(n):
                title = " ".join(w.capitalize() for w in titles[i])
                text = f"{title} " + " ".join(tokens[i].tolist()) + "."
                out.write(json.dumps({"id": str(lo + i), "contents": f'"{title}"\n{text}'}) + "\n")


def make_queries(retriever: BM25Retriever, n: int, seed: int) -> list[str]:
    """Question-like queries from random passages (title + a few passage words)."""
    rng = np.random.default_rng(seed + 1)
    queries = []
    for row in rng.integers(0, len(retriever), size=n):
        passage = retriever.corpus[int(row)]
        words = passage.text.split()
        picked = [words[j] for j in rng.integers(2, len(words), size=4)]
        queries.append(f"what is the {' '.join(picked)} of {passage.title}?")
    return queries


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--passages", type=int, default=100_000)
    parser.add_argument("--queries", type=int, default=3_000)
    parser.add_argument("--k", type=int, default=3)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    if hasattr(os, "sched_setaffinity"):
        os.sched_setaffinity(0, {sorted(os.sched_getaffinity(0))[0]})  # one core

    with tempfile.TemporaryDirectory(prefix="bench_search_") as tmp:
        corpus = Path(tmp) / "synthetic_wiki.jsonl"
        t0 = time.perf_counter()
        write_corpus(corpus, args.passages, args.seed)
        t1 = time.perf_counter()
        retriever = BM25Retriever.open(corpus, Path(tmp) / "index")
        t2 = time.perf_counter()
        tools = SearchTools(retriever, top_k=args.k)
        queries = make_queries(retriever, args.queries, args.seed)
        for query in queries[:200]:  # warm the stem cache and the page cache
            tools.call("Search", {"query": query})
        start = time.perf_counter()
        ok = sum(tools.call("Search", {"query": q}).ok for q in queries)
        elapsed = time.perf_counter() - start
        print(f"corpus {args.passages} passages written in {t1 - t0:.1f}s, indexed in {t2 - t1:.1f}s")
        print(f"{len(queries)} single Search calls in {elapsed:.2f}s ({ok} with results), k={args.k}")
        result = {
            "queries_per_s": round(len(queries) / elapsed, 1),
            "passages": args.passages,
            "k": args.k,
            "index_build_s": round(t2 - t1, 1),
        }
        print(json.dumps(result))


if __name__ == "__main__":
    main()
