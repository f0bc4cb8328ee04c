"""Local passage retrieval for the QA search tool: BM25 (bm25s) and optional dense retrieval.

One module per job:

- :mod:`~star_lib.qa.retriever.corpus` — the corpus file (wiki-18 JSONL or TSV) and its :class:`Passage` s;
- :mod:`~star_lib.qa.retriever.store` — where index folders live (beside the corpus or in the cache);
- :mod:`~star_lib.qa.retriever.bm25` — :class:`BM25Retriever` with its :class:`Analyzer`;
- :mod:`~star_lib.qa.retriever.dense` — :class:`DenseRetriever` (optional sentence-transformers);
- :mod:`~star_lib.qa.retriever.factory` — the :class:`Retriever` protocol and :func:`open_retriever`.

Nothing heavy loads at import: bm25s, PyStemmer and sentence-transformers are imported when used.
"""

from star_lib.qa.retriever.bm25 import TOKEN_PATTERN, Analyzer, BM25Config, BM25Retriever
from star_lib.qa.retriever.corpus import (
    CorpusFile,
    Passage,
    iter_corpus,
    iter_corpus_lines,
    parse_corpus_line,
    parse_passage_json,
    parse_passage_tsv,
)
from star_lib.qa.retriever.dense import DenseRetriever, Encoder, sentence_transformer_encoder
from star_lib.qa.retriever.factory import Retriever, open_retriever
from star_lib.qa.retriever.store import CACHE_ENV, INDEX_FORMAT, default_cache_dir, default_index_dir

__all__ = [
    "CACHE_ENV",
    "INDEX_FORMAT",
    "TOKEN_PATTERN",
    "Analyzer",
    "BM25Config",
    "BM25Retriever",
    "CorpusFile",
    "DenseRetriever",
    "Encoder",
    "Passage",
    "Retriever",
    "default_cache_dir",
    "default_index_dir",
    "iter_corpus",
    "iter_corpus_lines",
    "open_retriever",
    "parse_corpus_line",
    "parse_passage_json",
    "parse_passage_tsv",
    "sentence_transformer_encoder",
]
