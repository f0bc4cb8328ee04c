from __future__ import annotations

import json

import polars as pl
import pytest

from star_lib.cli import build_parser, main


def test_cli_qa_eval_baseline_smoke(qa_dir, wiki_corpus, tmp_path, capsys):
    out = tmp_path / "run" / "qa.parquet"
    code = main(
        [
            "qa-eval", "--model", "baseline", "--datasets", "nq,bamboogle",
            "--data-dir", str(qa_dir / "deepresearcher_test"), "--corpus", str(wiki_corpus),
            "--limit", "4", "--seed", "3", "--out", str(out), "--index-dir", str(tmp_path / "index"),
            "--json", "--quiet",
        ]
    )  # fmt: skip
    assert code == 0
    printed = capsys.readouterr().out
    assert "OOD QA — baseline" in printed and "bamboogle" in printed and "average" in printed
    summary = json.loads(printed.strip().splitlines()[-1])
    assert summary["nq/n"] == 4 and summary["average/n"] == 8
    results = pl.read_parquet(out)
    assert results.height == 8 and results["dataset"].unique(maintain_order=True).to_list() == [
        "nq",
        "bamboogle",
    ]
    stored = pl.read_parquet(tmp_path / "run" / "qa_summary.parquet")
    assert stored.columns == ["dataset", "metric", "value"]


def test_cli_qa_eval_single_file_data_dir(qa_dir, wiki_corpus, tmp_path):
    out = tmp_path / "qa.parquet"
    args = [
        "qa-eval", "--model", "baseline", "--datasets", "nq",
        "--data-dir", str(qa_dir / "corpus" / "flashrag_nq_test_sample.jsonl"), "--corpus", str(wiki_corpus),
        "--out", str(out), "--index-dir", str(tmp_path / "index"), "--quiet",
    ]  # fmt: skip
    assert main(args) == 0
    assert pl.read_parquet(out).height == 17


def test_cli_qa_eval_errors_are_exit_code_2_with_a_message(qa_dir, tmp_path, capsys):
    base = ["qa-eval", "--model", "baseline", "--data-dir", str(qa_dir / "deepresearcher_test"), "--quiet"]
    assert (
        main([*base, "--corpus", str(tmp_path / "missing.jsonl"), "--out", str(tmp_path / "q.parquet")]) == 2
    )
    assert "corpus file not found" in capsys.readouterr().err
    assert main([*base, "--corpus", str(tmp_path / "c.jsonl"), "--out", str(tmp_path / "q.csv")]) == 2
    assert ".parquet" in capsys.readouterr().err
    assert (
        main(
            [
                *base,
                "--corpus",
                str(tmp_path / "c.jsonl"),
                "--limit",
                "0",
                "--out",
                str(tmp_path / "q.parquet"),
            ]
        )
        == 2
    )
    err = capsys.readouterr().err
    assert "--limit" in err and ">= 1" in err and err.count("\n") == 1


def test_cli_qa_eval_is_registered():
    args = build_parser().parse_args(["qa-eval", "--model", "m", "--data-dir", "d", "--corpus", "c"])
    assert args.datasets == "all" and args.top_k == 3 and args.retriever == "bm25"


def test_cache_dir_wins_over_a_writable_corpus_folder(tmp_path, monkeypatch):
    """Issue 12 item 8: with $STAR_CACHE_DIR set, the BM25 index never goes into the corpus folder."""
    from star_lib.qa.retriever import default_index_dir

    corpus = tmp_path / "corpus" / "c.jsonl"
    corpus.parent.mkdir()
    corpus.write_text('{"id": "0", "contents": "a"}\n')
    monkeypatch.delenv("STAR_CACHE_DIR", raising=False)
    assert default_index_dir(corpus) == corpus.parent / "c.jsonl.bm25s"
    monkeypatch.setenv("STAR_CACHE_DIR", str(tmp_path / "cache"))
    index = default_index_dir(corpus)
    assert index.parent == tmp_path / "cache" / "qa_index" and index.name.endswith(".bm25s")
    assert default_index_dir(corpus, cache_dir=tmp_path / "other").parent == tmp_path / "other" / "qa_index"


def test_search_arguments_never_raise_on_deep_json_or_duplicate_keys():
    from star_lib.qa.tools import _query_argument

    assert _query_argument('{"query": " who "}') == "who"
    for bad in ("[" * 100_000 + "]" * 100_000, '{"query": "a", "query": "b"}'):
        observation = _query_argument(bad)
        assert not isinstance(observation, str) and "JSON object" in observation.text


def test_qa_reader_names_the_line_of_bad_bytes_and_deep_json(tmp_path):
    from star_lib.qa.datasets import QADataError, read_jsonl

    path = tmp_path / "nq.jsonl"
    path.write_bytes(b'{"question": "q", "golden_answers": ["a"]}\n{"question": "\xff"}\n')
    with pytest.raises(QADataError, match=rf"{path}:2: corrupt QA record"):
        read_jsonl(path)
    path.write_text("[" * 100_000 + "]" * 100_000 + "\n")
    with pytest.raises(QADataError, match=rf"{path}:1: corrupt QA record: JSON nested too deeply"):
        read_jsonl(path)
