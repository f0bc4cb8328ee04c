"""``star qa-eval --backend openai`` with an endpoint that cannot serve: exit 2 in one line, nothing written.

Issue 22 item 7: a dead endpoint used to give exit 0 and a table of 0 % scores. The endpoints here are a
port nobody listens on and a tiny local HTTP stub in OpenAI chat-completions shape.
"""

from __future__ import annotations

import json
import socket
import threading
from collections.abc import Callable, Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest

from star_lib.cli import main

Reply = tuple[int, dict[str, Any]]


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


@pytest.fixture
def stub() -> Iterator[Callable[[Callable[[dict[str, Any], dict[str, str]], Reply]], str]]:
    """Start a local chat endpoint answering each POST with ``answer(body, headers)``; yield its starter."""
    servers: list[ThreadingHTTPServer] = []

    def start(answer: Callable[[dict[str, Any], dict[str, str]], Reply]) -> str:
        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:  # noqa: N802 - http.server's name
                body = json.loads(self.rfile.read(int(self.headers.get("Content-Length", 0))) or b"{}")
                status, payload = answer(body, dict(self.headers))
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


def _qa_eval(tmp_path: Path, base_url: str) -> tuple[list[str], Path]:
    (tmp_path / "qa").mkdir()
    (tmp_path / "qa" / "nq.jsonl").write_text(
        '{"question": "Who built the tower?", "golden_answers": ["Eiffel"]}\n'
        '{"question": "Which river is long?", "golden_answers": ["Danube"]}\n'
    )
    (tmp_path / "corpus.jsonl").write_text(
        '{"id": "0", "contents": "\\"Tower\\"\\nEiffel built the tower."}\n'
        '{"id": "1", "contents": "\\"River\\"\\nThe Danube is a long river."}\n'
    )
    out = tmp_path / "out" / "qa.parquet"
    argv = [
        "qa-eval",
        "--model",
        "served-model",
        "--backend",
        "openai",
        "--base-url",
        base_url,
        "--datasets",
        "nq",
        "--data-dir",
        str(tmp_path / "qa"),
        "--corpus",
        str(tmp_path / "corpus.jsonl"),
        "--index-dir",
        str(tmp_path / "index"),
        "--max-turns",
        "2",
        "--quiet",
        "--out",
        str(out),
    ]
    return argv, out


def _one_error_line(capsys: pytest.CaptureFixture[str], *words: str) -> str:
    captured = capsys.readouterr()
    lines = captured.err.strip().splitlines()
    assert len(lines) == 1 and "Traceback" not in captured.err, captured.err
    assert lines[0].startswith("star qa-eval: error: "), lines[0]
    for word in words:
        assert word in lines[0], lines[0]
    return lines[0]


def test_qa_eval_dead_endpoint_exits_2_naming_it(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    url = f"http://127.0.0.1:{dead_port()}/v1"
    argv, out = _qa_eval(tmp_path, url)
    assert main(argv) == 2
    _one_error_line(capsys, url, "connection refused")
    assert not out.exists() and not out.with_name("qa_summary.parquet").exists()


def test_qa_eval_every_request_failing_exits_2(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], stub: Any
) -> None:
    # the one-token probe is answered; every episode's request is refused (HTTP 400 is not retried)
    url = stub(
        lambda body, _: (
            (200, completion("ok"))
            if body.get("max_tokens") == 1
            else (400, {"error": {"message": "context too long", "type": "invalid_request_error"}})
        )
    )
    argv, out = _qa_eval(tmp_path, url)
    assert main(argv) == 2
    _one_error_line(capsys, url, "every one of the 2 episodes failed", "400")
    assert not out.exists()


def test_qa_eval_refused_key_is_masked(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], stub: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    secret = "sk-test-do-not-print-1234"
    monkeypatch.setenv("OPENAI_API_KEY", secret)
    url = stub(  # a careless server that echoes the key it refuses
        lambda _, headers: (401, {"error": {"message": f"bad key {headers.get('Authorization')}"}})
    )
    argv, out = _qa_eval(tmp_path, url)
    assert main(argv) == 2
    line = _one_error_line(capsys, url, "HTTP 401")
    assert secret not in line
    assert not out.exists()


def test_qa_eval_live_endpoint_still_scores(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], stub: Any
) -> None:
    url = stub(lambda body, _: (200, completion("<answer>Eiffel</answer>")))
    argv, out = _qa_eval(tmp_path, url)
    assert main(argv) == 0, capsys.readouterr().err
    assert out.exists() and "wrote" in capsys.readouterr().out
