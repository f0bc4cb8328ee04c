"""``star pipeline``: flags map onto PipelineConfig; bad values are refused with a clear error."""

from __future__ import annotations

from star_lib.cli import build_parser, main
from star_lib.cli.pipeline import config_from_args


def test_pipeline_cli_flags_build_the_config(tmp_path) -> None:
    args = build_parser().parse_args(
        ["pipeline", "--preset", "tiny", "--out", str(tmp_path), "--train-worlds", "7", "--rl-seconds", "9.5"]
    )
    cfg = config_from_args(args)
    assert cfg.out_dir == str(tmp_path) and cfg.train_worlds == 7 and cfg.rl_s == 9.5
    assert cfg.sft_s == config_from_args(build_parser().parse_args(["pipeline"])).sft_s  # untouched default


def test_pipeline_cli_rejects_bad_values(tmp_path, capsys) -> None:
    assert main(["pipeline", "--out", str(tmp_path), "--rl-group", "1"]) == 2
    assert "rl_group must be >= 2" in capsys.readouterr().err
