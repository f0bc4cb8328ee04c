from pathlib import Path

import pytest

from star_lib.travel.hub import download_database, download_split, find_database_root


def test_hub_find_database_root_flat(real_db_dir: Path):
    assert find_database_root(real_db_dir) == real_db_dir


def test_hub_find_database_root_nested(tmp_path: Path):
    (tmp_path / "snap" / "database" / "accommodations").mkdir(parents=True)
    (tmp_path / "snap" / "database" / "accommodations" / "clean_accommodations_2022.csv").write_text("x\n")
    assert find_database_root(tmp_path / "snap") == tmp_path / "snap" / "database"


def test_hub_find_database_root_missing_names_the_folder(tmp_path: Path):
    with pytest.raises(FileNotFoundError, match=str(tmp_path)):
        find_database_root(tmp_path)


def test_hub_download_offline_is_a_clear_error(tmp_path: Path, monkeypatch):
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setenv("HF_HOME", str(tmp_path / "hf"))
    with pytest.raises(ConnectionError, match="Agent-STAR-TravelDatabase"):
        download_database(local_dir=tmp_path / "db")


# ── official query splits (issue 14 item 1) ──


def _offline(monkeypatch, tmp_path: Path) -> None:
    """Force offline mode even when datasets/huggingface_hub were imported before (they read it at import)."""
    import datasets.config
    import huggingface_hub.constants

    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setenv("HF_DATASETS_OFFLINE", "1")
    monkeypatch.setattr(datasets.config, "HF_HUB_OFFLINE", True)
    monkeypatch.setattr(huggingface_hub.constants, "HF_HUB_OFFLINE", True)
    monkeypatch.setattr(datasets.config, "HF_DATASETS_CACHE", tmp_path / "cache")


@pytest.mark.parametrize("split", ["validation", "test"])
def test_hub_download_split_offline_is_a_clear_error(tmp_path: Path, monkeypatch, split):
    _offline(monkeypatch, tmp_path)
    with pytest.raises(
        ConnectionError, match=f"split '{split}' of dataset 'osunlp/TravelPlanner'.*read_queries"
    ):
        download_split(split, cache_dir=tmp_path / "cache")


def test_hub_download_split_refuses_an_unknown_split():
    with pytest.raises(ValueError, match="split='dev': choose one of"):
        download_split("dev")


def test_hub_download_split_validates_the_rows_the_hub_gives(tmp_path: Path, monkeypatch, tp_dir: Path):
    """The hub's rows (test shape: literal strings, no annotated_plan) become validated records."""
    import json

    import datasets

    from star_lib.io import read_queries
    from star_lib.types import QueryRecord

    rows = [json.loads(line) for line in (tp_dir / "train.jsonl").read_text().splitlines() if line.strip()]
    test_rows = [{k: v for k, v in r.items() if k != "annotated_plan"} for r in rows]
    calls = []

    def load_dataset(repo, name, split, revision, cache_dir):
        calls.append((repo, name, split))
        return datasets.Dataset.from_list(test_rows)

    monkeypatch.setattr(datasets, "load_dataset", load_dataset)
    got = download_split("test", out=tmp_path / "test.jsonl")
    assert calls == [("osunlp/TravelPlanner", "test", "test")]
    assert got == [QueryRecord.from_dict(r) for r in rows] and len(got) == 45
    assert read_queries(tmp_path / "test.jsonl") == got
    test_rows[7]["days"] = 0
    with pytest.raises(ValueError, match="osunlp/TravelPlanner test row 8: query record field 'days' = 0"):
        download_split("test")
