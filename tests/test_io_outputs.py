"""star_lib.io's output side: atomic folders, the output lock, output checks, strict JSON, readers' errors."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from star_lib.cli import main
from star_lib.io import (
    DuplicateKeyError,
    OutputError,
    OutputLockedError,
    atomic_dir,
    check_output_dir,
    check_output_file,
    loads_strict,
    lock_output,
    read_json,
    read_jsonl,
    read_text,
    read_yaml,
)

HOLDER = r"""
import sys, time
from star_lib.io import lock_output
with lock_output(sys.argv[1]):
    print("locked", flush=True)
    time.sleep(3600)
"""


@pytest.fixture
def lock_holder(tmp_path):
    """Start a process that holds the output lock of a path; yields (start, process list)."""
    children: list[subprocess.Popen] = []

    def start(path: Path) -> subprocess.Popen:
        child = subprocess.Popen([sys.executable, "-c", HOLDER, str(path)], stdout=subprocess.PIPE, text=True)
        assert child.stdout.readline().strip() == "locked"  # waits for the event, however slow the machine
        children.append(child)
        return child

    yield start
    for child in children:
        child.kill()
        child.wait()


def test_atomic_dir_replaces_the_folder_as_one_unit(tmp_path):
    out = tmp_path / "data"
    out.mkdir()
    (out / "train.jsonl").write_text("old\n")
    (out / "train.parquet").write_text("stale")
    (out / "notes.txt").write_text("mine")
    (out / "sub").mkdir()
    (out / "sub" / "keep.txt").write_text("kept")
    with atomic_dir(out, replaces=("*.parquet",)) as tmp:
        assert tmp.parent == out.parent and tmp != out
        (tmp / "train.jsonl").write_text("new\n")
        assert (out / "train.jsonl").read_text() == "old\n"  # nothing visible until the swap
    assert (out / "train.jsonl").read_text() == "new\n"
    assert not (out / "train.parquet").exists()  # a stale output this run did not write: gone
    assert (out / "notes.txt").read_text() == "mine" and (out / "sub" / "keep.txt").read_text() == "kept"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["data"]  # no temporary folder, no lock left


def test_atomic_dir_failure_leaves_the_old_folder(tmp_path):
    out = tmp_path / "data"
    out.mkdir()
    (out / "a").write_text("old")
    with pytest.raises(RuntimeError), atomic_dir(out) as tmp:
        (tmp / "a").write_text("half")
        raise RuntimeError("killed")
    assert (out / "a").read_text() == "old"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["data"]


def test_atomic_dir_new_folder_and_modes(tmp_path):
    out = tmp_path / "x" / "new"
    with atomic_dir(out) as tmp:
        (tmp / "f").write_text("1")
    assert (out / "f").read_text() == "1"
    mask = os.umask(0)
    os.umask(mask)
    assert out.stat().st_mode & 0o777 == 0o777 & ~mask  # not mkdtemp's 0700


def test_lock_output_refuses_a_second_writer_naming_its_pid(tmp_path, lock_holder):
    out = tmp_path / "data"
    child = lock_holder(out)
    with pytest.raises(OutputLockedError, match=rf"being written by another process \(pid {child.pid}\)"):
        with lock_output(out):
            pass
    child.kill()
    child.wait()
    with lock_output(out):  # the kernel dropped the dead holder's lock: no stale-lock wedge
        with lock_output(out):  # nested in one process: shared
            pass
    assert not (tmp_path / ".data.lock").exists()


def test_two_concurrent_synth_runs_into_one_folder_are_refused(tmp_path, lock_holder, capsys):
    """Issue 12 item 5: the second run is refused at once (not after its work), the folder untouched."""
    out = tmp_path / "queries"
    argv = ["synth", "--world", "synthetic:tiny:0", "--n", "6", "--out", str(out), "--no-progress"]
    assert main(argv) == 0
    before = {p.name: p.read_bytes() for p in out.iterdir()}
    child = lock_holder(out)
    capsys.readouterr()
    assert main([*argv[:-3], "--seed", "5", "--out", str(out), "--no-progress"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and f"(pid {child.pid})" in err and str(out) in err
    assert {p.name: p.read_bytes() for p in out.iterdir()} == before


def test_synth_no_parquet_leaves_no_stale_parquet_and_no_mix(tmp_path):
    """Issue 12 item 5: --no-parquet over an earlier run drops its parquet; splits all come from one run."""
    out = tmp_path / "queries"
    base = ["synth", "--world", "synthetic:tiny:0", "--n", "12", "--out", str(out), "--no-progress"]
    assert main([*base, "--seed", "1"]) == 0
    assert (out / "train.parquet").is_file()
    assert main([*base, "--seed", "2", "--no-parquet"]) == 0
    assert sorted(p.name for p in out.iterdir()) == ["stats.json", "test.jsonl", "train.jsonl", "val.jsonl"]
    assert json.loads((out / "stats.json").read_text())["config"]["seed"] == 2
    assert (out / "train.jsonl").stat().st_size > 0
    assert sorted(p.name for p in tmp_path.iterdir()) == ["queries"]


@pytest.mark.parametrize(
    ("make", "match"),
    [
        (lambda d: (d / "f").write_text("x") and d / "f", "is a file; give a folder"),
        (lambda d: (d / "f").write_text("x") and d / "f" / "sub", "is a file, not a folder"),
        (lambda d: Path("/dev/full"), "is a file; give a folder"),
    ],
)
def test_check_output_dir_refuses_before_any_work(tmp_path, make, match):
    with pytest.raises(OutputError, match=match):
        check_output_dir(make(tmp_path))


@pytest.mark.parametrize(
    ("make", "match"),
    [
        (lambda d: d, "is a folder; give a file path"),
        (lambda d: Path("/dev/full"), "is not a regular file"),
        (lambda d: (d / "f").write_text("x") and d / "f" / "out.parquet", "is a file, not a folder"),
    ],
)
def test_check_output_file_refuses_before_any_work(tmp_path, make, match):
    with pytest.raises(OutputError, match=match) as info:
        check_output_file(make(tmp_path), "--out")
    assert str(info.value).startswith("--out ")


@pytest.mark.skipif(os.geteuid() == 0, reason="root may write any folder")
def test_check_output_refuses_a_read_only_folder(tmp_path):
    folder = tmp_path / "ro"
    folder.mkdir()
    folder.chmod(0o555)
    try:
        with pytest.raises(OutputError, match="not writable"):
            check_output_file(folder / "x.parquet")
    finally:
        folder.chmod(0o755)


def test_loads_strict_rejects_duplicate_keys_and_deep_nesting():
    """Issue 12 item 8: a tool call or plan naming a key twice is an error, not a silent last-wins."""
    assert loads_strict('{"a": {"b": 1}, "c": [1, {"d": 2}]}') == {"a": {"b": 1}, "c": [1, {"d": 2}]}
    with pytest.raises(DuplicateKeyError, match="'date'"):
        loads_strict('{"date": "2022-03-16", "date": "2022-03-17"}')
    with pytest.raises(DuplicateKeyError):
        loads_strict('[{"x": {"k": 1, "k": 1}}]')
    with pytest.raises(ValueError, match="nested too deeply"):
        loads_strict("[" * 100_000 + "]" * 100_000)


def test_star_tool_never_raises_on_deep_json_or_duplicate_keys(capsys):
    """Issue 12 item 7: `star tool` (the registry 'never raises') with deep JSON and duplicate keys."""
    assert main(["tool", "synthetic:tiny:0", "SearchFlight", "[" * 100_000 + "]" * 100_000]) == 1
    out = capsys.readouterr()
    assert "Traceback" not in out.err and out.out.startswith("Error: SearchFlight needs a JSON object")
    args = '{"departure": "A", "departure": "B", "destination": "C", "date": "2022-03-16"}'
    assert main(["tool", "synthetic:tiny:0", "SearchFlight", args]) == 1
    assert "duplicate key 'departure'" in capsys.readouterr().out


def test_readers_name_the_file_and_line_of_bad_bytes_and_deep_json(tmp_path):
    """Issue 12 item 8: non-UTF-8 input names the file (and line); deep JSON/YAML is an error, not a crash."""
    bad = tmp_path / "bad.jsonl"
    bad.write_bytes(b'{"a": 1}\n{"a": "\xff"}\n')
    with pytest.raises(ValueError, match=rf"{bad}:2: not UTF-8"):
        read_jsonl(bad)
    with pytest.raises(ValueError, match=rf"{bad}:2: not UTF-8"):
        read_text(bad)
    deep = tmp_path / "deep.json"
    deep.write_text("[" * 100_000 + "]" * 100_000)
    with pytest.raises(ValueError, match=rf"{deep}: JSON nested too deeply"):
        read_json(deep)
    with pytest.raises(ValueError, match=rf"{deep}:1: not a JSON line"):
        read_jsonl(deep)
    deep_yaml = tmp_path / "deep.yaml"
    deep_yaml.write_text("[" * 20_000 + "]" * 20_000)
    with pytest.raises(ValueError, match=str(deep_yaml)):
        read_yaml(deep_yaml)
    with pytest.raises(ValueError, match="is a folder"):
        read_yaml(tmp_path)


def test_react_tool_call_with_a_duplicate_key_is_a_format_error():
    """Issue 12 item 8: `{"date": "a", "date": "b"}` in a tool call is refused in the protocol."""
    from star_lib.agent.react import FormatError, parse_turn

    call = '<think>x</think><tool_call>{"name": "SearchFlight", "arguments": {%s}}</tool_call>'
    turn = parse_turn(call % '"date": "2022-03-16", "date": "2022-03-17"')
    assert isinstance(turn, FormatError) and "duplicate key 'date'" in turn.reason
    assert parse_turn(call % '"date": "2022-03-16"').arguments == {"date": "2022-03-16"}


def test_atomic_dir_through_a_symlink_keeps_the_link(tmp_path):
    (tmp_path / "real").mkdir()
    (tmp_path / "real" / "a").write_text("old")
    (tmp_path / "link").symlink_to(tmp_path / "real")
    with atomic_dir(tmp_path / "link") as tmp:
        (tmp / "a").write_text("new")
    assert (tmp_path / "link").is_symlink() and (tmp_path / "real" / "a").read_text() == "new"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["link", "real"]
