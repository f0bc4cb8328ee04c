from pathlib import Path

import pytest

from star_lib.travel.hub import download_database, find_database_root


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
