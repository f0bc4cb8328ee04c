"""``star synth --realiser llm`` says how many queries fell back to the template, and refuses a dead endpoint.

Issue 22 item 7: a dead endpoint used to give exit 0 with every query silently realised by the template.
The endpoints here are a port nobody listens on and a tiny local HTTP stub in OpenAI chat-completions shape
that answers some records with a text the checker accepts and fails the others.
"""

from __future__ import annotations

import json
import os
import random
import socket
import subprocess
import sys
import threading
from collections.abc import Callable, Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest

from star_lib.cli import main
from star_lib.synth import realise_query
from star_lib.types import QueryRecord

STAR = Path(sys.executable).with_name("star")
Answer = Callable[[dict[str, Any]], tuple[int, dict[str, Any]]]


def dead_port() -> int:
    """A local port that was free a moment ago: bound, then closed, so a connection is refused."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def completion(text: str) -> dict[str, Any]:
    """A chat-completions response body with one choice saying ``text``."""
    return {
        "id": "stub",
        "object": "chat.completion",
        "created": 0,
        "model": "stub",
        "choices": [{"index": 0, "message": {"role": "assistant", "content": text}, "finish_reason": "stop"}],
        "usage": {"prompt_tokens": 1, "completion_tokens": 1, "total_tokens": 2},
    }


def faithful_text(body: dict[str, Any]) -> str:
    """What a good back-translator says: the template text of the record in the last user turn."""
    payload = json.loads(body["messages"][-1]["content"])
    return realise_query(QueryRecord.from_dict(payload), random.Random(0))


@pytest.fixture
def stub() -> Iterator[Callable[[Answer], str]]:
    """Start a local chat endpoint answering each POST with ``answer(body)``; yield its starter."""
    servers: list[ThreadingHTTPServer] = []

    def start(answer: Answer) -> str:
        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:  # noqa: N802 - http.server's name
                body = json.loads(self.rfile.read(int(self.headers.get("Content-Length", 0))) or b"{}")
                status, payload = answer(body)
                data = json.dumps(payload).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def log_message(self, *args: Any) -> None:
                pass

        server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        threading.Thread(target=server.serve_forever, daemon=True).start()
        servers.append(server)
        return f"http://127.0.0.1:{server.server_address[1]}/v1"

    yield start
    for server in servers:
        server.shutdown()
        server.server_close()


def _synth(out: Path, n: int = 2) -> list[str]:
    return [
        "synth",
        "--world",
        "synthetic:tiny:0",
        "--n",
        str(n),
        "--seed",
        "1",
        "--realiser",
        "llm",
        "--out",
        str(out),
        "--no-progress",
        "--no-parquet",
    ]


def _endpoint(monkeypatch: pytest.MonkeyPatch, url: str) -> None:
    monkeypatch.setenv("STAR_LLM_BASE_URL", url)
    monkeypatch.setenv("STAR_LLM_MODEL", "stub-model")
    monkeypatch.delenv("STAR_LLM_API_KEY", raising=False)


def test_synth_llm_dead_endpoint_exits_2_naming_it(tmp_path: Path) -> None:
    url = f"http://127.0.0.1:{dead_port()}/v1"
    env = {**os.environ, "STAR_LLM_BASE_URL": url, "STAR_LLM_MODEL": "stub-model"}
    out = tmp_path / "queries"
    run = subprocess.run(
        [str(STAR), *_synth(out)], capture_output=True, text=True, env=env, timeout=300, check=False
    )
    lines = run.stderr.strip().splitlines()
    assert run.returncode == 2, run.stderr
    assert len(lines) == 1 and "Traceback" not in run.stderr, run.stderr
    assert lines[0].startswith("star synth: error: ") and url in lines[0], lines[0]
    assert "connection refused" in lines[0], lines[0]
    assert not (out / "train.jsonl").exists()


def test_synth_llm_every_query_fell_back_exits_2(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch, stub: Any
) -> None:
    # the endpoint answers, but never with a text the checker accepts
    url = stub(lambda body: (200, completion("Sure! Here is a trip.")))
    _endpoint(monkeypatch, url)
    out = tmp_path / "queries"
    assert main(_synth(out)) == 2
    captured = capsys.readouterr()
    lines = captured.err.strip().splitlines()
    assert len(lines) == 1 and "Traceback" not in captured.err, captured.err
    assert "2 of 2 queries fell back to the template realiser" in lines[0] and url in lines[0], lines[0]
    assert not (out / "train.jsonl").exists()


def test_synth_llm_partial_fallback_exits_0_with_the_count(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch, stub: Any
) -> None:
    failing: list[str] = []

    def answer(body: dict[str, Any]) -> tuple[int, dict[str, Any]]:
        record = body["messages"][-1]["content"]
        if body.get("max_tokens") != 1 and (not failing or record == failing[0]):
            failing[:1] = [record]  # the first record's every request fails; the others are answered
            return 500, {"error": {"message": "overloaded", "type": "server_error"}}
        return 200, completion(faithful_text(body) if body.get("max_tokens") != 1 else "ok")

    _endpoint(monkeypatch, stub(answer))
    out = tmp_path / "queries"
    assert main(_synth(out, n=4)) == 0
    stats = json.loads((out / "stats.json").read_text())
    fallback = stats["realiser"].get("fallback", 0)
    assert 0 < fallback < 4, stats["realiser"]
    err = capsys.readouterr().err
    assert f"{fallback} of 4 queries fell back to the template realiser" in err, err
    assert os.environ["STAR_LLM_BASE_URL"] in err
