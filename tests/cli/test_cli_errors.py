"""The CLI error boundary: user errors are one line and exit 2, bugs keep their traceback; empty runs fail."""

from __future__ import annotations

import errno
import json
from pathlib import Path

import pytest

from star_lib.cli import main


@pytest.fixture(scope="module")
def queries(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("q") / "syn"
    assert main(["synth", "--world", "synthetic:tiny:0", "--n", "6", "--out", str(out), "--no-progress"]) == 0
    return out / "train.jsonl"


def _boom(exc: BaseException):
    def run(args):
        raise exc

    return run


def test_a_bug_keeps_its_traceback(monkeypatch):
    import star_lib.cli.synth as synth_cli

    monkeypatch.setattr(synth_cli, "run_synth", _boom(KeyError("internal")))
    monkeypatch.delenv("STAR_TRACEBACK", raising=False)
    with pytest.raises(KeyError, match="internal"):
        main(["synth", "--world", "synthetic:tiny:0"])


@pytest.mark.parametrize("how", ["flag", "env"])
def test_traceback_flag_shows_user_errors_in_full(monkeypatch, how):
    import star_lib.cli.synth as synth_cli

    monkeypatch.setattr(synth_cli, "run_synth", _boom(ValueError("--n must be >= 1")))
    argv = ["synth", "--world", "synthetic:tiny:0"]
    if how == "flag":
        argv = ["--traceback", *argv]
    else:
        monkeypatch.setenv("STAR_TRACEBACK", "1")
    with pytest.raises(ValueError, match="--n must be"):
        main(argv)


def test_disk_full_and_permission_errors_are_one_line_naming_the_path(monkeypatch, capsys):
    import star_lib.cli.synth as synth_cli

    for code, text in ((errno.ENOSPC, "No space left on device"), (errno.EACCES, "Permission denied")):
        monkeypatch.setattr(synth_cli, "run_synth", _boom(OSError(code, text, "/data/out/train.jsonl")))
        assert main(["synth", "--world", "synthetic:tiny:0"]) == 2
        err = capsys.readouterr().err
        assert err == f"star synth: error: {text}: /data/out/train.jsonl\n"


def test_an_os_error_without_a_path_is_a_bug(monkeypatch):
    import star_lib.cli.synth as synth_cli

    monkeypatch.setattr(synth_cli, "run_synth", _boom(OSError("socket closed")))
    with pytest.raises(OSError, match="socket closed"):
        main(["synth", "--world", "synthetic:tiny:0"])


class DeadEndpoint:
    """A policy whose backend never answers (what an unreachable --base-url gives)."""

    def generate(self, conversations, *, max_new_tokens):
        from star_lib.agent.policies import Generation

        return [
            Generation(text="", finish_reason="error", error="APIConnectionError: refused")
            for _ in conversations
        ]


def test_teacher_with_a_dead_endpoint_fails_and_keeps_the_old_set(queries, tmp_path, monkeypatch, capsys):
    """Issue 12 item 8: 0 kept episodes is a failure naming the cause, not exit 0 over an emptied set."""
    import star_lib.cli.agent as agent_cli

    out = tmp_path / "sft"
    argv = [
        "teacher",
        "--queries",
        str(queries),
        "--world",
        "synthetic:tiny:0",
        "--out",
        str(out),
        "--no-progress",
    ]
    assert main(argv) == 0
    before = (out / "train.jsonl").read_bytes()
    assert before
    monkeypatch.setattr(agent_cli, "_openai_policy", lambda *a, **k: DeadEndpoint())
    capsys.readouterr()
    assert main([*argv, "--teacher", "openai:gpt-x", "--base-url", "http://127.0.0.1:9/v1"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "kept 0 of 6 episodes" in err and "APIConnectionError: refused" in err
    assert (out / "train.jsonl").read_bytes() == before


def test_rollout_with_a_dead_endpoint_fails_and_writes_nothing(queries, tmp_path, monkeypatch, capsys):
    import star_lib.cli.agent as agent_cli

    monkeypatch.setattr(agent_cli, "_rollout_policy", lambda args: DeadEndpoint())
    out = tmp_path / "r.parquet"
    argv = [
        "rollout",
        "--queries",
        str(queries),
        "--world",
        "synthetic:tiny:0",
        "--model",
        "m",
        "--out",
        str(out),
    ]
    assert main([*argv, "--backend", "openai", "--no-progress"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "all 6 episodes failed in the backend" in err and "refused" in err
    assert not out.exists()


def test_rollout_checks_its_output_before_any_work(queries, tmp_path, monkeypatch, capsys):
    """Issue 12 item 7: a bad --out fails at once, not after every episode ran."""
    import star_lib.cli.agent as agent_cli

    def no_work(args):
        raise AssertionError("the model was loaded before --out was checked")

    monkeypatch.setattr(agent_cli, "_rollout_policy", no_work)
    (tmp_path / "f").write_text("x")
    for bad in (tmp_path, Path("/dev/full"), tmp_path / "f" / "r.parquet"):
        argv = ["rollout", "--queries", str(queries), "--world", "synthetic:tiny:0", "--model", "m"]
        assert main([*argv, "--out", str(bad)]) == 2
        err = capsys.readouterr().err
        assert err.startswith("star rollout: error: --out ") and err.count("\n") == 1


def test_limit_is_never_read_as_all_but_the_last(queries, capsys):
    """Issue 12 item 8: `--limit -1` silently dropped the last query (records[:-1])."""
    for value in ("-1", "0"):
        argv = ["teacher", "--queries", str(queries), "--world", "synthetic:tiny:0", "--limit", value]
        assert main(argv) == 2
        assert "argument --limit" in capsys.readouterr().err


def test_teacher_reads_queries_through_the_one_reader(tmp_path, capsys):
    """Queries that are not records are named by file and line (read by star_lib.io.read_queries)."""
    path = tmp_path / "q.jsonl"
    path.write_text(json.dumps({"org": "A"}) + "\n")
    assert (
        main(["teacher", "--queries", str(path), "--world", "synthetic:tiny:0", "--out", str(tmp_path / "o")])
        == 2
    )
    assert str(path) in capsys.readouterr().err
