"""The retriever interface the QA search tool uses, and the one function that opens either kind."""

from __future__ import annotations

import os
from typing import Protocol, runtime_checkable

from star_lib.qa.retriever.bm25 import BM25Retriever
from star_lib.qa.retriever.corpus import Passage
from star_lib.qa.retriever.dense import DenseRetriever


@runtime_checkable
class Retriever(Protocol):
    """Anything that returns the top-k passages of a query."""

    def search(self, query: str, k: int = 3) -> list[Passage]:
        """Top-``k`` passages, best first (fewer when fewer match)."""
        ...


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
