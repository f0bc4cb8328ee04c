from __future__ import annotations

import json
import subprocess
import sys

from star_lib.cli import main
from star_lib.synth import level_counts


def test_cli_synth_writes_dataset(tmp_path, capsys):
    out = tmp_path / "queries"
    code = main(
        [
            "synth",
            "--world",
            "synthetic:tiny:0",
            "--n",
            "12",
            "--mix",
            "4:3:3",
            "--seed",
            "1",
            "--out",
            str(out),
            "--no-progress",
        ]
    )
    assert code == 0
    assert {p.name for p in out.iterdir()} >= {
        "train.jsonl",
        "val.jsonl",
        "test.jsonl",
        "stats.json",
        "train.parquet",
    }
    stats = json.loads((out / "stats.json").read_text())
    assert stats["n_records"] == 12
    assert stats["levels"] == {k: v for k, v in level_counts(12, "4:3:3").items() if v}
    assert "acceptance" in capsys.readouterr().out


def test_cli_synth_bad_mix_exits_2(tmp_path, capsys):
    code = main(["synth", "--world", "synthetic:tiny:0", "--mix", "lots", "--out", str(tmp_path)])
    assert code == 2
    assert "a:b:c" in capsys.readouterr().err


def test_cli_synth_subprocess_mixture(tmp_path):
    out = tmp_path / "m"
    cmd = [
        sys.executable,
        "-c",
        "import sys; from star_lib.cli import main; sys.exit(main())",
        "synth",
        "--world",
        "synthetic:small:0",
        "--mixture",
        "hard-10",
        "--out",
        str(out),
        "--no-progress",
        "--no-parquet",
        "--workers",
        "1",
    ]
    run = subprocess.run(cmd, capture_output=True, text=True, timeout=120)
    assert run.returncode == 0, run.stderr
    rows = [json.loads(line) for name in ("train", "val", "test") for line in (out / f"{name}.jsonl").open()]
    assert len(rows) == 10 and {r["level"] for r in rows} == {"hard"}
    assert not (out / "train.parquet").exists()
