"""``star --help`` lists every subcommand with a one-line description, and each command's help is its own
(issue 16 item 7); a YAML grid without ``finding:`` says that no finding notebook reads its runs."""

from __future__ import annotations

import pytest

from star_lib.cli import build_parser, main


def _subcommands():
    parser = build_parser()
    sub = next(a for a in parser._actions if a.dest == "command")
    return sub


def test_every_subcommand_has_a_one_line_help_and_a_description(capsys):
    sub = _subcommands()
    helps = {a.dest: a.help for a in sub._choices_actions}
    assert set(helps) == set(sub.choices)  # every command is listed with a description
    assert {"run", "run-grid", "submit", "status", "report", "lab", "demo"} <= set(helps)
    assert all(h and "\n" not in h for h in helps.values()), helps
    assert main(["--help"]) == 0
    out = capsys.readouterr().out
    for name, text in helps.items():
        assert name in out and text.split()[0] in out
    for name, parser in sub.choices.items():
        assert parser.description, f"star {name} --help has no description"


@pytest.mark.parametrize(
    ("command", "own", "other"), [("sft", "SFTTrainer", "GRPO"), ("rl", "GRPO", "SFTTrainer")]
)
def test_sft_and_rl_help_are_their_own(capsys, command, own, other):
    assert main([command, "--help"]) == 0
    out = capsys.readouterr().out
    assert own in out and other not in out and f"star {command} --" in out


GRID = """\
name: no-finding
base: {stages: [world], world: {scale: tiny}}
axes: {seed: [0]}
"""


def test_grid_without_finding_says_no_notebook_reads_it(tmp_path, capsys):
    grid = tmp_path / "grid.yaml"
    grid.write_text(GRID)
    assert main(["run-grid", str(grid), "--runs", str(tmp_path / "runs")]) == 0
    err = capsys.readouterr().err
    assert "has no `finding:` key" in err and "No finished runs" in err and "'noise'" in err
    grid.write_text(GRID + "finding: noise\n")
    assert main(["run-grid", str(grid), "--runs", str(tmp_path / "runs")]) == 0
    assert "finding:" not in capsys.readouterr().err


def test_grid_with_an_unknown_finding_is_refused(tmp_path, capsys):
    grid = tmp_path / "grid.yaml"
    grid.write_text(GRID + "finding: rewards\n")
    assert main(["run-grid", str(grid), "--runs", str(tmp_path / "runs")]) == 2
    err = capsys.readouterr().err
    assert "finding: 'rewards' is not allowed; choose one of ['reward'" in err
    assert not (tmp_path / "runs").exists()
