"""``star world synth | info`` and ``star tool`` through ``star_lib.cli.main``."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from star_lib.cli import main
from star_lib.travel.world import World


def test_world_cli_synth_then_info(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "tiny"
    assert main(["world", "synth", "--scale", "tiny", "--seed", "3", "--out", str(out)]) == 0
    assert (out / "clean_Flights_2022.csv").is_file() and (out / "citySet_with_states.txt").is_file()
    capsys.readouterr()
    assert main(["world", "info", str(out), "--json"]) == 0
    summary = json.loads(capsys.readouterr().out)
    world = World.synthetic(seed=3, scale="tiny")
    assert summary["flights"] == world.summary()["flights"]
    assert summary["states_cities"] == {s: list(world.cities_in(s)) for s in world.states}
    assert main(["world", "info", "synthetic:tiny:3"]) == 0
    text = capsys.readouterr().out
    assert "flights" in text and world.cities[0] in text


def test_world_cli_tool_prints_observation(real_db_dir: Path, capsys: pytest.CaptureFixture[str]) -> None:
    args = '{"departure": "St. Petersburg", "destination": "Rockford", "date": "2022-03-16"}'
    assert main(["tool", str(real_db_dir), "SearchFlight", args]) == 0
    assert "F3573659 | 474 | 15:40 | 17:04" in capsys.readouterr().out


def test_world_cli_tool_errors_are_printed_not_raised(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["tool", "synthetic:tiny:0", "SearchFlight", "{not json"]) == 1
    assert "needs a JSON object" in capsys.readouterr().out
    assert main(["tool", "synthetic:tiny:0", "Teleport", "{}"]) == 1
    assert "unknown tool 'Teleport'" in capsys.readouterr().out


def test_world_cli_bad_world_is_a_clean_error(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["world", "info", str(tmp_path / "missing")]) == 2
    assert "database folder not found" in capsys.readouterr().err
    assert main(["tool", "synthetic:tiny", "SearchCity", "{}"]) == 2
    assert "synthetic:<tiny|small|full>:<seed>" in capsys.readouterr().err
