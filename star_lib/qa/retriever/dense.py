"""Optional dense retrieval: cosine similarity over passage embeddings (sentence-transformers by default)."""

from __future__ import annotations

import json
import os
import re
import threading
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from star_lib.qa.retriever.corpus import CorpusFile, Passage
from star_lib.qa.retriever.store import (
    INDEX_FORMAT,
    default_index_dir,
    fingerprint,
    optional_path,
    publish,
    read_meta,
)

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
            else default_index_dir(corpus, f"dense-{safe_key}", optional_path(cache_dir))
        )
        expected = {
            "format": INDEX_FORMAT,
            **fingerprint(corpus),
            "key": key,
            "passage_prefix": passage_prefix,
        }
        meta = read_meta(target)
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
            publish(tmp, target)
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
