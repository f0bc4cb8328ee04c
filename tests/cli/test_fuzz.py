"""CLI fuzz table: every user mistake, over every subcommand, is one line naming the culprit and exit code 2.

Each case runs ``star_lib.cli.main`` in-process and must fail before any real work starts (so the table is
fast): no traceback, nothing on stdout-as-error, exactly one stderr line ``star <cmd>: error: …`` that
contains the culprit (the option, file or value at fault).
"""

from __future__ import annotations

import importlib.util
from pathlib import Path

import huggingface_hub.constants
import pytest

from star_lib.cli import main

Q = "{d}/queries.jsonl"  # a valid query file (written by `star synth` once per module)
W = "synthetic:tiny:0"
TEACH = ["teacher", "--world", W, "--no-progress"]
ROLL = ["rollout", "--world", W, "--model", "{d}/adir", "--no-progress"]
QA = ["qa-eval", "--model", "baseline", "--quiet"]
QA_OK = [*QA, "--data-dir", "{d}/adir", "--corpus", "{d}/afile"]
SYN = ["synth", "--world", W, "--no-progress"]
BAD_QUERIES = {
    "q_five.jsonl": "q_five.jsonl",  # a line of 5
    "q_list.jsonl": "q_list.jsonl",  # a line of [1, "a"]
    "q_bytes.jsonl": "q_bytes.jsonl",  # not UTF-8
    "q_deep.jsonl": "q_deep.jsonl",  # 100k nested brackets
    "q_bad.jsonl": "q_bad.jsonl",  # not JSON
    "q_fields.jsonl": "q_fields.jsonl",  # a JSON object that is no query record
    "q_empty.jsonl": "q_empty.jsonl",  # no records at all
    "nope.jsonl": "nope.jsonl",  # missing
    "adir": "adir",  # a folder
}
BAD_YAML = ("empty.yaml", "list.yaml", "deep.yaml", "bytes.yaml", "nope.yaml", "adir", "bad.yaml")

CASES: list[tuple[list[str], str]] = [
    # ── star (no command), star world / tool ──
    ([], "command"),
    (["nope"], "nope"),
    ([*SYN, "--bogus"], "--bogus"),
    (["world"], "world_command"),
    (["world", "synth"], "--out"),
    (["world", "synth", "--out", "{d}/afile"], "afile"),
    (["world", "synth", "--out", "{d}/afile/sub"], "afile"),
    (["world", "synth", "--out", "/dev/full"], "/dev/full"),
    (["world", "synth", "--scale", "huge", "--out", "{d}/w"], "--scale"),
    (["world", "synth", "--seed", "x", "--out", "{d}/w"], "--seed"),
    (["world", "info", "{d}/nope"], "nope"),
    (["world", "info", "{d}/afile"], "afile"),
    (["world", "info", "synthetic:huge:0"], "huge"),
    (["world", "info", "synthetic:tiny:x"], "x"),
    (["tool", "{d}/nope", "SearchFlight"], "nope"),
    (["tool", W], "NAME"),
    # ── star eval ──
    (["eval", "--plans", "{d}/afile", "--db", W], "--queries"),
    (["eval", "--queries", "{d}/nope.jsonl", "--plans", "{d}/afile", "--db", W], "nope.jsonl"),
    (["eval", "--queries", "{d}/q_five.jsonl", "--plans", "{d}/afile", "--db", W], "q_five.jsonl"),
    (["eval", "--queries", Q, "--plans", "{d}/afile", "--db", W, "--mode", "lenient"], "--mode"),
    # ── star synth ──
    ([*SYN, "--n", "x"], "--n"),
    ([*SYN, "--n", "0"], "--n"),
    ([*SYN, "--n", "-5"], "--n"),
    ([*SYN, "--n", "2.5"], "--n"),
    ([*SYN, "--seed", "1e3"], "--seed"),
    ([*SYN, "--mix", "lots", "--out", "{d}/s"], "lots"),
    ([*SYN, "--mix", "1:2", "--out", "{d}/s"], "1:2"),
    ([*SYN, "--mixture", "nonsense-5", "--out", "{d}/s"], "nonsense"),
    ([*SYN, "--workers", "0", "--out", "{d}/s"], "--workers"),
    ([*SYN, "--out", "{d}/afile"], "afile"),
    ([*SYN, "--out", "{d}/afile/x"], "afile"),
    ([*SYN, "--out", "/dev/full"], "/dev/full"),
    ([*SYN, "--out", "."], "current folder"),
    ([*SYN, "--out", "/"], "root"),
    ([*SYN, "--out", ".."], "above the current"),
    ([*TEACH, "--queries", Q, "--out", "."], "current folder"),
    (["world", "synth", "--out", "{d}/.."], "above the current"),
    (["synth", "--world", "{d}/nope", "--out", "{d}/s"], "nope"),
    (["synth", "--world", "synthetic:huge:0", "--out", "{d}/s"], "huge"),
    (["synth", "--world", "{d}/afile", "--out", "{d}/s"], "afile"),
    ([*SYN, "--tie-break", "best"], "--tie-break"),
    ([*SYN, "--realiser", "gpt"], "--realiser"),
    (["synth", "--n", "3"], "--world"),
    # ── star teacher ──
    *[
        ([*TEACH, "--queries", f"{{d}}/{name}", "--out", "{d}/t"], culprit)
        for name, culprit in BAD_QUERIES.items()
    ],
    ([*TEACH, "--queries", Q, "--limit", "-1"], "--limit"),
    ([*TEACH, "--queries", Q, "--limit", "0"], "--limit"),
    ([*TEACH, "--queries", Q, "--limit", "x"], "--limit"),
    ([*TEACH, "--queries", Q, "--faults", "2"], "--faults"),
    ([*TEACH, "--queries", Q, "--faults", "nan"], "--faults"),
    ([*TEACH, "--queries", Q, "--corruption", "-0.1"], "--corruption"),
    ([*TEACH, "--queries", Q, "--max-turns", "0"], "--max-turns"),
    ([*TEACH, "--queries", Q, "--max-new-tokens", "-3"], "--max-new-tokens"),
    ([*TEACH, "--queries", Q, "--max-context", "zero"], "--max-context"),
    ([*TEACH, "--queries", Q, "--chunk-size", "0"], "--chunk-size"),
    ([*TEACH, "--queries", Q, "--concurrency", "0"], "--concurrency"),
    ([*TEACH, "--queries", Q, "--temperature", "-1"], "--temperature"),
    ([*TEACH, "--queries", Q, "--temperature", "inf"], "--temperature"),
    ([*TEACH, "--queries", Q, "--top-p", "0"], "--top-p"),
    ([*TEACH, "--queries", Q, "--top-p", "1.5"], "--top-p"),
    ([*TEACH, "--queries", Q, "--eval-mode", "lenient"], "--eval-mode"),
    ([*TEACH, "--queries", Q, "--tools-mode", "xml"], "--tools-mode"),
    ([*TEACH, "--queries", Q, "--teacher", "gpt", "--out", "{d}/t"], "--teacher"),
    ([*TEACH, "--queries", Q, "--teacher", "openai:", "--out", "{d}/t"], "--teacher"),
    ([*TEACH, "--queries", Q, "--out", "{d}/afile"], "afile"),
    ([*TEACH, "--queries", Q, "--out", "{d}/afile/x"], "afile"),
    ([*TEACH, "--queries", Q, "--out", "/dev/full"], "/dev/full"),
    (["teacher", "--queries", Q, "--world", "{d}/nope", "--out", "{d}/t"], "nope"),
    ([*TEACH, "--queries", Q, "--tokenizer", "{d}/nope", "--out", "{d}/t"], "nope"),
    (["teacher", "--queries", Q], "--world"),
    # ── star rollout ──
    *[
        ([*ROLL, "--queries", f"{{d}}/{name}", "--out", "{d}/r.parquet"], c)
        for name, c in BAD_QUERIES.items()
    ],
    ([*ROLL, "--queries", Q, "--out", "{d}/adir"], "adir"),
    ([*ROLL, "--queries", Q, "--out", "/dev/full"], "/dev/full"),
    ([*ROLL, "--queries", Q, "--out", "{d}/afile/r.parquet"], "afile"),
    ([*ROLL, "--queries", Q, "--device", "tpu"], "--device"),
    ([*ROLL, "--queries", Q, "--device", "cuda:99", "--out", "{d}/r.parquet"], "cuda:99"),
    ([*ROLL, "--queries", Q, "--backend", "tensorrt"], "--backend"),
    ([*ROLL, "--queries", Q, "--samples", "0"], "--samples"),
    ([*ROLL, "--queries", Q, "--batch-size", "0"], "--batch-size"),
    ([*ROLL, "--queries", Q, "--limit", "-1"], "--limit"),
    ([*ROLL, "--queries", Q, "--token-ids", "mine"], "--token-ids"),
    ([*ROLL, "--queries", Q, "--out", "{d}/r.parquet"], "adir"),  # a folder without config.json
    (
        ["rollout", "--world", W, "--queries", Q, "--model", "nobody/none", "--out", "{d}/r.parquet"],
        "nobody/none",
    ),
    (["rollout", "--world", W, "--queries", Q, "--model", "a/b/c", "--out", "{d}/r.parquet"], "a/b/c"),
    (["rollout", "--world", W, "--queries", Q], "--model"),
    *(
        [
            ([*ROLL, "--queries", Q, "--backend", "vllm", "--out", "{d}/r.parquet"], "--backend vllm"),
            ([*QA_OK, "--model", "m", "--backend", "vllm"], "--backend vllm"),
        ]
        if importlib.util.find_spec("vllm") is None
        else []
    ),
    # ── star serve (argument level; its runtime belongs to serve's own tests) ──
    (["serve"], "--model"),
    (["serve", "--model", "tiny", "--port", "x"], "--port"),
    # ── star sft / rl ──
    (["sft", "--data", "{d}/nope", "--out", "{d}/sft"], "nope"),
    (["sft", "--data", "{d}/adir", "--out", "{d}/afile"], "afile"),
    (["sft", "--data", "{d}/adir", "--out", "/dev/full"], "/dev/full"),
    (["sft", "--data", "{d}/adir", "--out", "{d}/sft", "--preset", "huge"], "--preset"),
    (["sft", "--data", "{d}/adir", "--out", "{d}/sft", "--max-steps", "x"], "--max-steps"),
    (["sft", "--out", "{d}/sft"], "--data"),
    *[(["rl", "--config", f"{{d}}/{name}"], name) for name in BAD_YAML],
    (["rl", "--config", "{d}/partial_rl.yaml"], "data"),
    (["rl", "--config", "{d}/rl_list.yaml"], "rl_list.yaml"),
    (["rl", "--config", "{d}/empty.yaml", "--max-steps", "x"], "--max-steps"),
    (["rl"], "--config"),
    # ── star pipeline ──
    (["pipeline", "--preset", "huge"], "--preset"),
    (["pipeline", "--seed", "x"], "--seed"),
    # ── star qa-eval ──
    ([*QA_OK, "--out", "{d}/q.csv"], ".parquet"),
    ([*QA_OK, "--out", "{d}/adir.parquet"], "adir.parquet"),
    ([*QA_OK, "--out", "/dev/full/q.parquet"], "/dev/full"),
    ([*QA_OK, "--out", "{d}/afile/q.parquet"], "afile"),
    ([*QA_OK, "--limit", "0"], "--limit"),
    ([*QA_OK, "--top-k", "0"], "--top-k"),
    ([*QA_OK, "--device", "tpu"], "--device"),
    ([*QA_OK, "--retriever", "magic"], "--retriever"),
    ([*QA_OK, "--temperature", "-2"], "--temperature"),
    ([*QA, "--data-dir", "{d}/adir", "--corpus", "{d}/nope.jsonl", "--out", "{d}/q.parquet"], "nope.jsonl"),
    ([*QA, "--corpus", "{d}/afile"], "--data-dir"),
    # ── star run / run-grid / submit / status ──
    *[(["run", f"{{d}}/{name}", "--runs", "{d}/runs"], name) for name in BAD_YAML],
    (["run", "{d}/adir/none.yaml", "--runs", "{d}/runs"], "none.yaml"),
    (["run-grid", "{d}/nope.yaml", "--runs", "{d}/runs"], "nope.yaml"),
    (["run-grid", "reward-tiny", "--seeds", "a,b", "--runs", "{d}/runs"], "--seeds"),
    (["run-grid", "reward-tiny", "--seeds", "", "--runs", "{d}/runs"], "--seeds"),
    (["run-grid", "reward-tiny", "--seeds", "1,1", "--runs", "{d}/runs"], "--seeds"),
    (["run-grid", "reward-tiny", "--seeds", "0,x", "--runs", "{d}/runs"], "'x'"),
    (["run-grid", "bogus-finding", "--runs", "{d}/runs"], "bogus-finding"),
    *[
        (["submit", "reward-tiny", "--cluster", f"{{d}}/{name}", "--runs", "{d}/runs"], name)
        for name in (*BAD_YAML, "profile_partial.yaml", "profile_types.yaml", "profile_setup.yaml")
    ],
    (["submit", "reward-tiny", "--cluster", "{d}/profile_unknown.yaml", "--runs", "{d}/runs"], "partitoin"),
    (["submit", "reward-tiny", "--runs", "{d}/runs"], "--cluster"),
    (
        ["submit", "reward-tiny", "--cluster", "{d}/profile_ok.yaml", "--seeds", "z", "--runs", "{d}/runs"],
        "--seeds",
    ),
    (["status", "{d}/adir"], "adir"),
    (["status", "{d}/nope", "--runs", "{d}/runs"], "nope"),
    (["status", "{d}/afile"], "afile"),
    # ── star plan ──
    (["plan", "{d}/partial_rl.yaml", "--cluster", "{d}/nope.yaml"], "nope.yaml"),
    (["plan", "{d}/partial_rl.yaml", "--cluster", "{d}/profile_ok.yaml"], "profile_ok.yaml"),  # no GPUs
    (
        ["plan", "{d}/partial_rl.yaml", "--cluster", "{d}/profile_ok.yaml", "--strategy", "zero9"],
        "--strategy",
    ),
    # ── star report / lab / demo ──
    (["report", "--scale", "huge"], "--scale"),
    (["report", "--launch", "everywhere"], "--launch"),
    (["lab", "--port", "x"], "--port"),
    (["demo", "--seed", "x"], "--seed"),
    (["demo", "--runs", "{d}/afile"], "--runs"),
    (["demo", "--reports", "{d}/afile/r"], "--reports"),
    (["report", "--out", "{d}/afile"], "--out"),
    (["report", "--out", "{d}/r", "--notebooks", "{d}/nope"], "--notebooks"),
    # ── star study ──
    (["study", "--scale", "paper"], "--scale"),
    (["study", "--seeds", "0,x", "--dry-run"], "--seeds"),
    (["study", "--only", "rewardz", "--dry-run"], "--only"),
    (["study", "--config-of", "no-such-run"], "--config-of"),
    (["study", "--study", "{d}/nope.yaml"], "nope.yaml"),
    (["study", "--study", "{d}/list.yaml"], "list.yaml"),
    (["study", "--study", "{d}/bad.yaml"], "bad.yaml"),
]


@pytest.fixture(scope="module")
def fuzz_dir(tmp_path_factory) -> Path:
    """Files the cases point at: good and bad queries, YAML, profiles, a file and a folder."""
    d = tmp_path_factory.mktemp("fuzz")
    (d / "afile").write_text("not a folder\n")
    (d / "adir").mkdir()
    (d / "adir.parquet").mkdir()
    deep = "[" * 100_000 + "]" * 100_000
    for name, text in {
        "q_five.jsonl": "5\n",
        "q_list.jsonl": '[1, "a"]\n',
        "q_deep.jsonl": deep + "\n",
        "q_bad.jsonl": "{not json\n",
        "q_fields.jsonl": '{"org": "A"}\n',
        "q_empty.jsonl": "",
        "empty.yaml": "",
        "list.yaml": "- 1\n- 2\n",
        "deep.yaml": "[" * 20_000 + "]" * 20_000 + "\n",
        "bad.yaml": "a: [1, 2\n",
        "partial_rl.yaml": "max_steps: 3\n",
        "rl_list.yaml": "rl: [1, 2]\n",
        "profile_partial.yaml": "cluster: local\n",
        "profile_types.yaml": "cluster: local\nnodes: two\ngpus_per_node: 0\ncpus_per_task: 1\nmem_gb: 1\n"
        "timeout_min: 5\n",
        "profile_setup.yaml": "cluster: local\nnodes: 1\ngpus_per_node: 0\ncpus_per_task: 1\nmem_gb: 1\n"
        "timeout_min: 5\nsetup: module load cuda\n",
        "profile_unknown.yaml": "cluster: slurm\npartitoin: a100\n",
        "profile_ok.yaml": "cluster: debug\nnodes: 1\ngpus_per_node: 0\ncpus_per_task: 1\nmem_gb: 1\n"
        "timeout_min: 5\n",
    }.items():
        (d / name).write_text(text)
    (d / "q_bytes.jsonl").write_bytes(b'{"org": "\xff\xfe"}\n')
    (d / "bytes.yaml").write_bytes(b"name: \xff\xfe\n")
    assert (
        main(["synth", "--world", W, "--n", "6", "--out", str(d / "syn"), "--no-progress", "--no-parquet"])
        == 0
    )
    (d / "queries.jsonl").write_text((d / "syn" / "train.jsonl").read_text())
    return d


def test_fuzz_table_is_large_and_covers_every_subcommand():
    from star_lib.cli import build_parser

    assert len(CASES) >= 100
    commands = set(build_parser()._subparsers._group_actions[0].choices)  # noqa: SLF001
    covered = {argv[0] for argv, _ in CASES if argv and not argv[0].startswith("-")}
    assert commands - covered == set()


@pytest.mark.parametrize(("argv", "culprit"), CASES, ids=[" ".join(a)[:80] for a, _ in CASES])
def test_user_mistake_is_one_line_naming_the_culprit(argv, culprit, fuzz_dir, capsys, monkeypatch):
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setenv("TRANSFORMERS_OFFLINE", "1")
    # huggingface_hub reads HF_HUB_OFFLINE once, at import: without this a hub id waits out network retries
    monkeypatch.setattr(huggingface_hub.constants, "HF_HUB_OFFLINE", True)
    monkeypatch.delenv("STAR_TRACEBACK", raising=False)
    monkeypatch.chdir(fuzz_dir)
    capsys.readouterr()
    code = main([a.replace("{d}", str(fuzz_dir)) for a in argv])
    err = capsys.readouterr().err
    lines = [line for line in err.splitlines() if line.strip()]
    assert code == 2, err
    assert "Traceback" not in err
    assert len(lines) == 1, err
    assert lines[0].startswith("star") and ": error: " in lines[0], err
    assert culprit in lines[0], err
