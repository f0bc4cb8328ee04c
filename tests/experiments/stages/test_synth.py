"""The synth stage: a test split left empty says which setting to raise."""

from __future__ import annotations

import pytest

from star_lib.experiments.config import ConfigError, ExperimentConfig
from star_lib.experiments.runner import run_experiment


def test_synth_that_leaves_the_test_split_empty_says_what_to_change(tmp_path):
    config = ExperimentConfig.from_dict({"stages": ["world", "synth", "eval"], "synth": {"n_base": 3}})
    with pytest.raises(ConfigError, match=r"no held-out test tasks from n_base=3: raise synth.n_base"):
        run_experiment(config, tmp_path / "g" / "small")
