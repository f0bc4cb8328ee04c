from __future__ import annotations

import json
import warnings

import pytest

from star_lib.qa.datasets import (
    DATASET_NAMES,
    QADataError,
    canonical_name,
    dataset_path,
    load_dataset,
    load_datasets,
    parse_dataset_list,
    read_jsonl,
    sample_examples,
)

TEST_SIZES = {name: 512 for name in DATASET_NAMES} | {"bamboogle": 125}


def test_datasets_all_seven_test_sets_load_with_paper_sizes(qa_dir):
    sets = load_datasets(DATASET_NAMES, qa_dir / "deepresearcher_test")
    assert {name: len(v) for name, v in sets.items()} == TEST_SIZES
    for name, examples in sets.items():
        assert all(ex.dataset == name for ex in examples)
        assert all(
            ex.question and ex.golden_answers and all(isinstance(a, str) for a in ex.golden_answers)
            for ex in examples
        )
        assert len({ex.id for ex in examples}) == len(examples)


def test_datasets_qa_root_finds_the_test_folder(qa_dir):
    assert dataset_path(qa_dir, "nq") == qa_dir / "deepresearcher_test" / "nq.jsonl"
    first = load_dataset("bamboogle", qa_dir)[0]
    assert first.id == "Bamboogle_39"
    assert first.golden_answers == ("wool merchant",)


def test_datasets_multiple_golden_answers_kept(qa_dir):
    nq = load_dataset("nq", qa_dir)
    assert max(len(ex.golden_answers) for ex in nq) > 1


def test_datasets_dev_sets_load(qa_dir):
    sets = load_datasets(DATASET_NAMES, qa_dir / "deepresearcher_dev")
    assert {len(v) for v in sets.values()} == {125}


@pytest.mark.parametrize(
    ("name", "size"), [("bamboogle", 125), ("hotpotqa", 500), ("2wikimultihopqa", 500), ("musique", 500)]
)
def test_datasets_r1searcher_single_answer_files_load(qa_dir, name, size):
    examples = load_dataset(name, qa_dir / "r1searcher")
    assert len(examples) == size
    assert all(len(ex.golden_answers) == 1 for ex in examples)
    assert examples[0].id == "1" and examples[0].dataset == name


def test_datasets_r1searcher_first_answer_is_the_file_value(qa_dir):
    first = read_jsonl(qa_dir / "r1searcher" / "bamboogle.jsonl")[0]
    assert first.question.startswith("Who was president of the United States in the year that Citibank")
    assert first.golden_answers == ("james madison",)


def test_datasets_flashrag_nq_sample_loads(qa_dir):
    examples = read_jsonl(qa_dir / "corpus" / "flashrag_nq_test_sample.jsonl", "nq")
    assert len(examples) == 17  # test_0 … test_16 (the last line has no newline, so `wc -l` says 16)
    assert examples[0].golden_answers == ("Wilhelm Conrad Röntgen",)
    assert examples[2].golden_answers == ("Olivia", "MFSK")


def test_datasets_limit_sample_is_seeded_and_keeps_file_order(qa_dir):
    full = load_dataset("popqa", qa_dir)
    a = load_dataset("popqa", qa_dir, limit=50, seed=1)
    b = load_dataset("popqa", qa_dir, limit=50, seed=1)
    c = load_dataset("popqa", qa_dir, limit=50, seed=2)
    assert a == b and a != c and len(a) == 50
    positions = [full.index(ex) for ex in a]
    assert positions == sorted(positions)
    assert load_dataset("bamboogle", qa_dir, limit=1000) == load_dataset("bamboogle", qa_dir)


def test_datasets_sample_examples_rejects_negative_limit():
    with pytest.raises(ValueError, match="limit"):
        sample_examples([], -1)


def test_datasets_corrupt_line_names_path_and_line(tmp_path):
    path = tmp_path / "nq.jsonl"
    path.write_text(
        json.dumps({"question": "q1", "golden_answers": ["a"]})
        + "\n\n{broken\n"
        + json.dumps({"question": "q3", "golden_answers": []})
        + "\n"
    )
    with pytest.raises(QADataError, match=r"nq\.jsonl:3: corrupt QA record"):
        read_jsonl(path)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        examples = read_jsonl(path, strict=False)
    messages = [str(w.message) for w in caught]
    assert [m.split(": ")[0] for m in messages] == [f"{path}:3", f"{path}:4"]
    assert all(m.endswith("(skipped)") for m in messages)
    assert [ex.question for ex in examples] == ["q1"]
    assert examples[0].id == "nq_1"


@pytest.mark.parametrize(
    ("record", "needle"),
    [
        ({"golden_answers": ["a"]}, "question"),
        ({"question": "q"}, "golden_answers"),
        ({"question": "q", "golden_answers": [["nested"]]}, "string"),
        (["not", "a", "dict"], "JSON object"),
    ],
)
def test_datasets_bad_records_say_what_is_wrong(tmp_path, record, needle):
    path = tmp_path / "x.jsonl"
    path.write_text(json.dumps(record) + "\n")
    with pytest.raises(QADataError, match=needle):
        read_jsonl(path)


def test_datasets_flashrag_folder_layout(tmp_path):
    (tmp_path / "hotpotqa").mkdir()
    (tmp_path / "hotpotqa" / "dev.jsonl").write_text(
        json.dumps({"id": "h1", "question": "q", "answer": "a"}) + "\n"
    )
    examples = load_dataset("hotpotqa", tmp_path, split="dev")
    assert examples[0].id == "h1" and examples[0].golden_answers == ("a",)


def test_datasets_missing_set_lists_where_it_looked(tmp_path):
    with pytest.raises(QADataError, match="no 'musique' data under"):
        load_dataset("musique", tmp_path)


def test_datasets_single_file_needs_exactly_one_name(qa_dir):
    sample = qa_dir / "corpus" / "flashrag_nq_test_sample.jsonl"
    assert len(load_datasets(["nq"], sample)["nq"]) == 17
    with pytest.raises(QADataError, match="exactly one dataset"):
        load_datasets(["nq", "popqa"], sample)


def test_datasets_names_and_aliases():
    assert canonical_name("2wiki_500") == "2wikimultihopqa"
    assert canonical_name("Bamboogle") == "bamboogle"
    assert parse_dataset_list("all") == DATASET_NAMES
    assert parse_dataset_list("nq,hotpotqa_500,nq") == ("nq", "hotpotqa")
    with pytest.raises(ValueError, match="--datasets"):
        parse_dataset_list(" , ")
