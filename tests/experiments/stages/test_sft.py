"""The sft stage: its cache key holds a from-scratch preset's shape."""

from __future__ import annotations

from dataclasses import replace

from star_lib.experiments.stages import RunSection, build_registry
from star_lib.train import models


def test_sft_key_holds_a_from_scratch_presets_shape_so_a_reshaped_model_is_retrained(monkeypatch):
    sft = build_registry().get("sft")
    small = RunSection({"model": "tiny-s", "protocol": "compact"})
    before = sft.config_dict(small)
    assert before["architecture"]["hidden_size"] == models.PRESETS["tiny-s"].architecture.hidden_size
    wider = replace(models.PRESETS["tiny-s"], architecture=replace(models.PRESETS["tiny-s"].architecture,
                                                                    hidden_size=192))  # fmt: skip
    monkeypatch.setitem(models.PRESETS, "tiny-s", wider)
    after = sft.config_dict(small)
    assert after != before and after["architecture"]["hidden_size"] == 192
    hub = RunSection({"model": "qwen2.5-1.5b", "protocol": "react"})
    assert "architecture" not in sft.config_dict(hub)  # a hub model: its name
