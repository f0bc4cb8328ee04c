from __future__ import annotations

import json
import os
import random
import stat
from collections import Counter
from pathlib import Path

import numpy as np
import pytest

from star_lib.qa.retriever import (
    Analyzer,
    BM25Config,
    BM25Retriever,
    CorpusFile,
    DenseRetriever,
    Passage,
    default_index_dir,
    open_retriever,
    parse_passage_json,
    parse_passage_tsv,
    sentence_transformer_encoder,
)

from .conftest import write_corpus


def test_retriever_real_corpus_indexes_all_passages(wiki_retriever):
    assert len(wiki_retriever) == 1000
    first = wiki_retriever.corpus[0]
    assert (first.id, first.title) == ("0", "Evan Morris")
    assert first.text.startswith("Evan Morris Evan L. Morris (January 26, 1977")


def test_retriever_known_title_returns_its_passage_first(wiki_retriever):
    hits = wiki_retriever.search("Evan Morris", k=3)
    assert hits[0].id == "0" and hits[0].title == "Evan Morris"
    assert hits[0].score > hits[1].score
    assert [h.score for h in hits] == sorted((h.score for h in hits), reverse=True)


def test_retriever_unique_titles_mostly_rank_first(wiki_retriever):
    titles = Counter(wiki_retriever.corpus[i].title for i in range(len(wiki_retriever)))
    unique = [i for i in range(len(wiki_retriever)) if titles[wiki_retriever.corpus[i].title] == 1]
    assert len(unique) > 200
    first = sum(
        (hits := wiki_retriever.search(wiki_retriever.corpus[i].title, k=1)) != [] and hits[0].index == i
        for i in unique
    )
    assert first / len(unique) >= 0.95


def test_retriever_top_k_matches_exhaustive_bm25s_scoring(wiki_retriever):
    rng = random.Random(0)
    words = " ".join(wiki_retriever.corpus[i].text for i in range(0, 1000, 25)).split()
    for _ in range(300):
        query = " ".join(rng.choice(words) for _ in range(rng.randint(1, 10)))
        k = rng.choice([1, 3, 10])
        rows, scores = wiki_retriever.top_k(query, k)
        ids = wiki_retriever.term_ids(query)
        if not ids:
            assert len(rows) == 0
            continue
        full = wiki_retriever.bm25.get_scores_from_ids(ids)  # bm25s scores every passage
        ref = np.lexsort((np.arange(len(full)), -full))[:k]
        ref = ref[full[ref] > 0]
        np.testing.assert_allclose(scores, full[ref], rtol=1e-5, atol=1e-6)
        np.testing.assert_allclose(full[rows], full[ref], rtol=1e-5, atol=1e-6)


def test_retriever_repeated_query_terms_count_each_time(wiki_retriever):
    for query in ("Morris Morris Evan", "lobbyist lobbyist lobbyist Washington", "river river"):
        ids = wiki_retriever.term_ids(query)
        assert len(ids) > len(set(ids))
        full = wiki_retriever.bm25.get_scores_from_ids(ids)
        rows, scores = wiki_retriever.top_k(query, 5)
        ref = np.lexsort((np.arange(len(full)), -full))[:5]
        np.testing.assert_allclose(scores, full[ref], rtol=1e-5)


def test_retriever_unknown_words_return_nothing(wiki_retriever):
    assert wiki_retriever.search("qqqzzzxv", k=3) == []
    assert wiki_retriever.search("the of and", k=3) == []  # stopwords only
    assert wiki_retriever.search("Evan Morris", k=0) == []


def test_retriever_loads_index_memory_mapped(wiki_retriever):
    assert isinstance(wiki_retriever.bm25.scores["data"], np.memmap)
    assert isinstance(wiki_retriever.corpus.offsets, np.memmap)


def test_retriever_reuses_index_and_rebuilds_when_corpus_changes(tmp_path, toy_corpus):
    index = tmp_path / "idx"
    first = BM25Retriever.open(toy_corpus, index)
    built = (index / "meta.json").stat().st_mtime_ns
    BM25Retriever.open(toy_corpus, index)
    assert (index / "meta.json").stat().st_mtime_ns == built  # loaded, not rebuilt
    assert first.search("Danube river", k=1)[0].title == "Danube"

    with toy_corpus.open("a", encoding="utf-8") as out:
        out.write(
            json.dumps({"id": "9", "contents": '"Amazon"\nThe Amazon river carries the most water.'}) + "\n"
        )
    again = BM25Retriever.open(toy_corpus, index)
    assert len(again) == 5
    assert again.search("Amazon", k=1)[0].id == "9"


def test_retriever_rebuilds_when_settings_change(tmp_path, toy_corpus):
    index = tmp_path / "idx"
    BM25Retriever.open(toy_corpus, index)
    BM25Retriever.open(toy_corpus, index, config=BM25Config(k1=1.2, b=0.75))
    assert json.loads((index / "meta.json").read_text())["bm25"]["k1"] == 1.2


def test_retriever_read_only_folder_indexes_into_cache(tmp_path, monkeypatch):
    folder = tmp_path / "ro"
    folder.mkdir()
    corpus = write_corpus(folder / "c.jsonl", [("Paris", "capital of France")])
    folder.chmod(stat.S_IRUSR | stat.S_IXUSR | stat.S_IRGRP | stat.S_IXGRP)
    monkeypatch.setenv("STAR_CACHE_DIR", str(tmp_path / "cache"))
    try:
        target = default_index_dir(corpus)
        assert target.is_relative_to(tmp_path / "cache")
        retriever = BM25Retriever.open(corpus)
        assert retriever.index_dir == target and (target / "meta.json").exists()
        assert sorted(p.name for p in folder.iterdir()) == ["c.jsonl"]  # nothing written beside it
    finally:
        folder.chmod(stat.S_IRWXU)


def test_retriever_writable_folder_indexes_beside_corpus(toy_corpus):
    assert default_index_dir(toy_corpus) == toy_corpus.parent / "toy.jsonl.bm25s"


def test_retriever_shared_data_folder_counts_as_read_only(wiki_corpus, tmp_path):
    target = default_index_dir(wiki_corpus, cache_dir=None)
    if os.access(wiki_corpus.parent, os.W_OK) and wiki_corpus.parent.stat().st_mode & stat.S_IWUSR:
        pytest.skip("shared data folder is writable here")
    assert not target.is_relative_to(wiki_corpus.parent)


def test_retriever_corrupt_corpus_line_names_path_and_line(tmp_path):
    corpus = tmp_path / "bad.jsonl"
    corpus.write_text('{"id": "0", "contents": "\\"A\\"\\nok"}\n\n{"id": "1", "contents": oops}\n')
    with pytest.raises(ValueError, match=r"bad\.jsonl:line 3"):
        BM25Retriever.open(corpus, tmp_path / "idx")


def test_retriever_missing_corpus_says_so(tmp_path):
    with pytest.raises(FileNotFoundError, match="corpus file not found"):
        BM25Retriever.open(tmp_path / "nope.jsonl", tmp_path / "idx")


def test_retriever_tsv_corpus_loads(qa_dir, tmp_path):
    retriever = BM25Retriever.open(
        qa_dir / "corpus/r1searcher_wiki_title_abs_sample_100.tsv", tmp_path / "tsv"
    )
    assert len(retriever) == 100
    hit = retriever.search("Lucy Mair anthropologist", k=1)[0]
    assert hit.title == "Lucy Mair" and hit.text.startswith("Lucy Philip Mair")


def test_retriever_searchr1_example_corpus_loads(qa_dir, tmp_path):
    retriever = BM25Retriever.open(qa_dir / "corpus/searchr1_example_corpus.jsonl", tmp_path / "ex")
    assert len(retriever) == 10


def test_retriever_passage_parsers_accept_each_format():
    assert parse_passage_json({"id": 3, "contents": '"T"\nbody'}) == Passage("3", "T", "body")
    assert parse_passage_json({"id": "4", "title": "T", "text": "body"}).title == "T"
    assert parse_passage_json({"id": "5", "contents": "no title line"}).title == ""
    assert parse_passage_tsv("7\tTitle: Foo Bar Text:  some text") == Passage("7", "Foo Bar", "some text")
    assert parse_passage_tsv("8\tsome text\tDPR Title") == Passage("8", "DPR Title", "some text")
    with pytest.raises(ValueError, match="contents"):
        parse_passage_json({"id": "1"})


def test_retriever_corpus_file_random_access_matches_scan(toy_corpus):
    corpus = CorpusFile(toy_corpus)
    assert len(corpus) == 4
    assert [corpus[i].title for i in range(4)] == ["Wilhelm Röntgen", "Paris", "Mount Everest", "Danube"]
    with pytest.raises(IndexError):
        corpus[4]


def test_retriever_analyzer_stems_and_drops_stopwords():
    analyzer = Analyzer()
    assert analyzer.terms("The Running of the Bulls") == ["run", "bull"]
    assert Analyzer(stemmer=None, stopwords=None).terms("The Bulls") == ["the", "bulls"]


def test_retriever_config_rejects_bad_values():
    with pytest.raises(ValueError, match="b <= 1"):
        BM25Config(b=2.0)
    with pytest.raises(ValueError, match="method"):
        BM25Config(method="bm25+")


class HashingEncoder:
    """A real (if crude) bag-of-words encoder: hashed term counts, for the dense-retriever plumbing."""

    def __init__(self, dim: int = 512):
        self.dim, self.analyzer = dim, Analyzer()

    def __call__(self, texts):
        out = np.zeros((len(texts), self.dim), dtype=np.float32)
        for row, text in enumerate(texts):
            for term in self.analyzer.terms(text):
                out[row, hash(term) % self.dim] += 1.0
        return out


def test_retriever_dense_with_custom_encoder_finds_passage_and_caches(tmp_path, toy_corpus):
    encoder = HashingEncoder()
    dense = DenseRetriever.open(toy_corpus, encoder, tmp_path / "dense", key="hashing")
    hits = dense.search("highest mountain above sea level", k=2)
    assert hits[0].title == "Mount Everest" and hits[0].score >= hits[1].score
    assert isinstance(dense.embeddings, np.memmap) and dense.embeddings.shape == (4, 512)
    built = (tmp_path / "dense" / "meta.json").stat().st_mtime_ns
    DenseRetriever.open(toy_corpus, encoder, tmp_path / "dense", key="hashing")
    assert (tmp_path / "dense" / "meta.json").stat().st_mtime_ns == built


def test_retriever_dense_without_sentence_transformers_explains(tmp_path, toy_corpus):
    try:
        import sentence_transformers  # noqa: F401
    except ImportError:
        with pytest.raises(ImportError, match="pip install sentence-transformers"):
            sentence_transformer_encoder("some/local/model")
        with pytest.raises(ImportError, match="sentence-transformers"):
            open_retriever(toy_corpus, "dense", dense_model="some/local/model", index_dir=tmp_path / "d")
    else:
        pytest.skip("sentence-transformers is installed")


def test_retriever_open_retriever_checks_kind(toy_corpus, tmp_path):
    assert isinstance(open_retriever(toy_corpus, index_dir=tmp_path / "i"), BM25Retriever)
    with pytest.raises(ValueError, match="bm25"):
        open_retriever(toy_corpus, "splade")
    with pytest.raises(ValueError, match="--dense-model"):
        open_retriever(toy_corpus, "dense")


def test_retriever_tie_break_is_corpus_order(tmp_path):
    corpus = write_corpus(
        tmp_path / "tie.jsonl", [("A", "apple pie"), ("B", "apple pie"), ("C", "apple pie")]
    )
    retriever = BM25Retriever.open(corpus, tmp_path / "idx")
    assert [h.id for h in retriever.search("apple", k=3)] == ["0", "1", "2"]


def test_retriever_index_dir_default_name(tmp_path: Path):
    corpus = write_corpus(tmp_path / "c.jsonl", [("Alpha", "beta gamma")])
    retriever = BM25Retriever.open(corpus)
    assert retriever.index_dir == tmp_path / "c.jsonl.bm25s"


def test_retriever_corpus_without_words_is_refused(tmp_path: Path):
    corpus = write_corpus(tmp_path / "c.jsonl", [("A", "x y")])
    with pytest.raises(ValueError, match="no indexable words"):
        BM25Retriever.open(corpus, tmp_path / "idx")
