from __future__ import annotations

import dataclasses

import pytest

from star_lib.viz.params import NotebookParams


def test_params_defaults_are_plain_strings():
    params = NotebookParams()
    assert all(isinstance(getattr(params, f.name), str) for f in dataclasses.fields(params))
    assert params.stage_list is None and params.figures_path is None


def test_params_stage_list_and_paths():
    params = NotebookParams(results_dir="r", stages=" world, synth ,eval", figures_dir="out/fig")
    assert params.stage_list == ["world", "synth", "eval"]
    from star_lib.viz.params import project_root

    assert params.results_path == project_root() / "r" and params.figures_path == project_root() / "out/fig"


@pytest.mark.parametrize(
    ("changes", "message"),
    [
        ({"scale": "huge"}, "set scale to one of"),
        ({"launch": "cloud"}, "set launch to one of"),
        ({"launch": "slurm"}, "needs cluster"),
        ({"results_dir": " "}, "results_dir is empty"),
        ({"stages": "world,train"}, "['train'] unknown"),
        ({"scale": 3}, "give a string"),
    ],
)
def test_params_bad_values_say_what_to_change(changes, message):
    with pytest.raises(ValueError, match=message.replace("[", r"\[").replace("]", r"\]")):
        NotebookParams(**changes)
