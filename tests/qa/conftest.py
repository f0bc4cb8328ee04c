"""Fixtures for the QA tests: the real 1,000-passage corpus indexed once per session in a tmp folder."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from star_lib.qa.retriever import BM25Retriever

WIKI_1000 = "corpus/flashrag_wiki_sample_1000.jsonl"

TOY_PASSAGES = [
    (
        "Wilhelm Röntgen",
        "Wilhelm Conrad Röntgen (27 March 1845 – 10 February 1923) was a German physicist. "
        "In 1901 Röntgen was awarded the first Nobel Prize in Physics.",
    ),
    ("Paris", "Paris is the capital and most populous city of France. The Eiffel Tower was built in 1889."),
    ("Mount Everest", "Mount Everest is Earth's highest mountain above sea level, at 8,849 metres."),
    ("Danube", "The Danube is the second-longest river in Europe, after the Volga."),
]


@pytest.fixture(scope="session")
def wiki_corpus(qa_dir: Path) -> Path:
    """The real 1,000-passage FlashRAG wiki sample (read-only, shared)."""
    return qa_dir / WIKI_1000


@pytest.fixture(scope="session")
def wiki_retriever(wiki_corpus: Path, tmp_path_factory: pytest.TempPathFactory) -> BM25Retriever:
    """BM25 over the real 1,000 passages, index built in a session tmp folder."""
    return BM25Retriever.open(wiki_corpus, tmp_path_factory.mktemp("qa_index") / "wiki1000.bm25s")


def write_corpus(path: Path, passages: list[tuple[str, str]]) -> Path:
    """Write passages in the wiki-18 JSONL format."""
    with path.open("w", encoding="utf-8") as out:
        for i, (title, text) in enumerate(passages):
            out.write(
                json.dumps({"id": str(i), "contents": f'"{title}"\n{title} {text}'}, ensure_ascii=False)
                + "\n"
            )
    return path


@pytest.fixture
def toy_corpus(tmp_path: Path) -> Path:
    """Four hand-written passages whose answers the tests know."""
    return write_corpus(tmp_path / "toy.jsonl", TOY_PASSAGES)
