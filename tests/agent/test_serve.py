"""The OpenAI-compatible server: a tiny transformers model behind real HTTP, driven by OpenAIPolicy."""

from __future__ import annotations

import http.client
import json
import socket
import threading
import time
import urllib.error
import urllib.request
from collections import Counter
from concurrent.futures import ThreadPoolExecutor

import pytest

from star_lib.agent.config import RolloutConfig
from star_lib.agent.openai_policy import OpenAIConfig, OpenAIPolicy
from star_lib.agent.policies import (
    Conversation,
    SamplingParams,
    TransformersPolicy,
    render_prompt_ids,
)
from star_lib.agent.rollout import run_episodes
from star_lib.agent.serve import ChatServer

GREEDY = SamplingParams(temperature=0.0)
SEEDED = SamplingParams(temperature=1.0, seed=5)


@pytest.fixture(scope="module")
def server(tiny_model, qwen_tokenizer):
    with ChatServer(TransformersPolicy(tiny_model, qwen_tokenizer, GREEDY), model_name="tiny") as srv:
        yield srv


def _post(url, body, headers=None):
    request = urllib.request.Request(
        url, data=json.dumps(body).encode(), headers={"Content-Type": "application/json", **(headers or {})}
    )
    try:
        with urllib.request.urlopen(request, timeout=30) as response:
            return response.status, json.loads(response.read())
    except urllib.error.HTTPError as exc:
        return exc.code, json.loads(exc.read())


def test_serve_openai_policy_matches_local_generation(server, tiny_model, qwen_tokenizer):
    tools = [
        {
            "type": "function",
            "function": {
                "name": "SearchCity",
                "description": "d",
                "parameters": {
                    "type": "object",
                    "properties": {"state": {"type": "string"}},
                    "required": ["state"],
                },
            },
        }
    ]
    messages = [
        {"role": "system", "content": "Plan trips."},
        {"role": "user", "content": "Go to Ohio."},
        {
            "role": "assistant",
            "content": '<think>a</think><tool_call>{"name": "SearchCity", "arguments": {}}</tool_call>',
        },
        {"role": "tool", "content": "Cities in Ohio: Columbus."},
    ]
    cfg = OpenAIConfig(
        model="tiny", base_url=server.base_url, tools_mode="template", tool_messages="tool", logprobs=True
    )
    remote = OpenAIPolicy(cfg, SEEDED).generate(
        [Conversation(messages=messages, tools=tools)], max_new_tokens=10
    )[0]
    conv = Conversation(messages=messages, tools=tools)
    conv.prompt_ids = render_prompt_ids(qwen_tokenizer, conv)
    local = TransformersPolicy(tiny_model, qwen_tokenizer, SEEDED).generate([conv], max_new_tokens=10)[0]
    assert remote.error is None and remote.text == local.text and remote.text
    assert remote.logprobs == pytest.approx(local.logprobs, abs=1e-5)
    assert remote.finish_reason == local.finish_reason


def test_serve_runs_episodes_over_http(server, fake_tools, query):
    cfg = OpenAIConfig(
        model="tiny",
        base_url=server.base_url,
        concurrency=2,
        tools_mode="template",
        tool_messages="tool",
        retry_empty=False,
        backoff_s=0.0,
    )
    rollout = RolloutConfig(evaluate=False, reward="none", max_turns=2, max_new_tokens=6)
    episodes = run_episodes(OpenAIPolicy(cfg, SEEDED), [query] * 3, None, rollout, tools=fake_tools)
    assert len(episodes) == 3 and all(ep.error is None and ep.turns == 2 for ep in episodes)
    assert all(ep.messages[2]["role"] == "assistant" for ep in episodes)
    assert all(ep.format_errors == 2 for ep in episodes)  # a random model does not follow the protocol


def test_serve_rejects_bad_requests_and_reports_models(server):
    url = server.base_url + "/chat/completions"
    status, body = _post(url, {"model": "tiny", "messages": []})
    assert status == 400 and "messages" in body["error"]["message"]
    status, body = _post(
        url, {"model": "tiny", "messages": [{"role": "user", "content": "hi"}], "max_tokens": 10**9}
    )
    assert status == 400 and "max_tokens" in body["error"]["message"]
    with urllib.request.urlopen(server.base_url + "/models", timeout=10) as response:
        assert json.loads(response.read())["data"][0]["id"] == "tiny"


def test_serve_requires_the_configured_key(tiny_model, qwen_tokenizer, monkeypatch):
    with ChatServer(TransformersPolicy(tiny_model, qwen_tokenizer, GREEDY), api_key="k-123") as srv:
        body = {"model": "tiny", "messages": [{"role": "user", "content": "hi"}], "max_tokens": 2}
        assert _post(srv.base_url + "/chat/completions", body)[0] == 401
        assert _post(srv.base_url + "/chat/completions", body, {"Authorization": "Bearer k-123"})[0] == 200
        monkeypatch.setenv("STAR_SERVE_KEY", "k-123")
        cfg = OpenAIConfig(model="tiny", base_url=srv.base_url, api_key_env="STAR_SERVE_KEY", max_retries=0)
        assert (
            OpenAIPolicy(cfg).generate([Conversation(messages=body["messages"])], max_new_tokens=2)[0].error
            is None
        )


# ─────────────────── hardening: nothing a client sends blocks the server ───────────────────

HI = [{"role": "user", "content": "hi"}]


def _raw(srv, body: bytes, headers=None, timeout=30):
    """POST raw bytes with http.client; return (status, headers, parsed JSON body)."""
    conn = http.client.HTTPConnection("127.0.0.1", srv.port, timeout=timeout)
    try:
        conn.request(
            "POST",
            "/v1/chat/completions",
            body=body,
            headers={"Content-Type": "application/json", **(headers or {})},
        )
        response = conn.getresponse()
        return response.status, dict(response.getheaders()), json.loads(response.read())
    finally:
        conn.close()


def _wait_for(condition, seconds=10.0):
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if condition():
            return True
        time.sleep(0.02)
    return condition()


BAD_FIELDS = [
    ('"seed": "abc"', "seed"),
    ('"seed": true', "seed"),
    ('"seed": 1.5', "seed"),
    ('"seed": 100000000000000000000000', "seed"),
    ('"temperature": Infinity', "temperature"),
    ('"temperature": NaN', "temperature"),
    ('"temperature": 1e999', "temperature"),
    ('"temperature": -1', "temperature"),
    ('"temperature": "hot"', "temperature"),
    ('"top_p": 0', "top_p"),
    ('"top_p": 1.5', "top_p"),
    ('"top_p": "x"', "top_p"),
    ('"top_k": -1', "top_k"),
    ('"max_tokens": 0', "max_tokens"),
    ('"max_tokens": -1', "max_tokens"),
    ('"max_tokens": 2.5', "max_tokens"),
    ('"max_tokens": true', "max_tokens"),
    ('"max_tokens": "8"', "max_tokens"),
    ('"max_completion_tokens": 0', "max_completion_tokens"),
    ('"n": 2', "n"),
    ('"logprobs": "yes"', "logprobs"),
    ('"stream": true', "stream"),
    ('"tools": "SearchCity"', "tools"),
    ('"tools": [5]', "tools"),
]
BAD_MESSAGES = ['"hi"', "[]", "[5]", '[{"role": "bot", "content": "x"}]', '[{"role": "user", "content": 5}]']


@pytest.mark.parametrize(("field_text", "name"), BAD_FIELDS)
def test_serve_answers_400_naming_each_malformed_field(server, field_text, name):
    body = ('{"model": "tiny", "messages": [{"role": "user", "content": "hi"}], ' + field_text + "}").encode()
    status, _, answer = _raw(server, body)
    assert status == 400, answer
    assert answer["error"]["param"] == name and f"'{name}'" in answer["error"]["message"]


@pytest.mark.parametrize("messages", BAD_MESSAGES)
def test_serve_answers_400_naming_malformed_messages(server, messages):
    status, _, answer = _raw(server, ('{"messages": ' + messages + "}").encode())
    assert status == 400 and "messages" in answer["error"]["message"], answer


@pytest.mark.parametrize(
    ("body", "says"),
    [
        (b'{"messages": ' + b"[" * 100_000 + b"]" * 100_000 + b"}", "nests"),
        (b'{"messages": [{"role": "user", "content": "hi"}], "x": ' + b"[" * 40 + b"]" * 40 + b"}", "nests"),
        (b"[1, 2]", "JSON object"),
        (b'{"messages": ', "not valid JSON"),
        (b'{"messages": "\xff"}', "UTF-8"),
    ],
)
def test_serve_answers_400_for_a_body_that_is_not_a_request(server, body, says):
    status, _, answer = _raw(server, body)
    assert status == 400 and says in answer["error"]["message"], answer


def test_serve_bounds_the_prompt_by_the_model_context_and_the_body_size(tiny_model, qwen_tokenizer):
    policy = TransformersPolicy(tiny_model, qwen_tokenizer, GREEDY)
    with ChatServer(policy, max_body_bytes=200_000) as srv:
        assert srv.max_context_tokens == tiny_model.config.max_position_embeddings
        long = [{"role": "user", "content": "plan a trip " * 8_500}]  # 100 kB, ~25k tokens > 8192
        status, _, answer = _raw(srv, json.dumps({"messages": long, "max_tokens": 2}).encode())
        assert status == 413 and "context is 8192 tokens" in answer["error"]["message"], answer
        huge = json.dumps({"messages": [{"role": "user", "content": "x" * 300_000}]}).encode()
        status, headers, answer = _raw(srv, huge)  # the body is not read, yet the answer arrives (no reset)
        assert status == 413 and "at most 200000" in answer["error"]["message"]
        assert srv.stats["too_large"] == 2
    with ChatServer(policy, max_context_tokens=40) as srv:
        status, _, answer = _raw(srv, json.dumps({"messages": HI, "max_tokens": 39}).encode())
        assert (
            status == 400
            and answer["error"]["param"] == "max_tokens"
            and "at most" in answer["error"]["message"]
        )
        status, _, answer = _raw(srv, json.dumps({"messages": HI}).encode())  # unset: fits what is left
        assert status == 200 and answer["usage"]["total_tokens"] <= 40


@pytest.fixture
def slow_model(tiny_model, qwen_tokenizer):
    """The tiny model at ~20 ms per forward pass that never ends a turn; counts its forward passes."""
    import torch

    calls = []
    stop_ids = [qwen_tokenizer.convert_tokens_to_ids("<|im_end|>"), qwen_tokenizer.eos_token_id]

    def hook(_module, _args, output):
        calls.append(1)
        time.sleep(0.02)
        output.logits[..., [i for i in stop_ids if i is not None]] = -torch.inf
        return output

    handle = tiny_model.register_forward_hook(hook)
    try:
        yield tiny_model, calls
    finally:
        handle.remove()


def _send_request(port, max_tokens):
    sock = socket.create_connection(("127.0.0.1", port), timeout=10)
    body = json.dumps({"messages": HI, "max_tokens": max_tokens}).encode()
    head = "POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
    sock.sendall(f"{head}Content-Length: {len(body)}\r\n\r\n".encode() + body)
    return sock


def test_serve_client_disconnect_cancels_running_and_queued_work(slow_model, qwen_tokenizer):
    model, calls = slow_model
    with ChatServer(TransformersPolicy(model, qwen_tokenizer, GREEDY)) as srv:
        running = _send_request(srv.port, 4000)  # ~80 s of generation if nothing stops it
        assert _wait_for(lambda: len(calls) > 3)
        queued = _send_request(srv.port, 4000)
        assert _wait_for(lambda: srv._jobs.qsize() == 1)
        queued.close()
        running.close()
        assert _wait_for(lambda: srv.stats["cancelled"] == 2, seconds=5), srv.stats
        stopped_at = len(calls)
        time.sleep(0.3)
        assert len(calls) == stopped_at < 200  # no forward pass after both cancels (of ~8000 asked for)
        status, _, answer = _raw(srv, json.dumps({"messages": HI, "max_tokens": 3}).encode(), timeout=10)
        assert status == 200 and answer["usage"]["completion_tokens"] == 3


def test_serve_stops_a_generation_past_its_time_limit(slow_model, qwen_tokenizer):
    model, calls = slow_model
    with ChatServer(TransformersPolicy(model, qwen_tokenizer, GREEDY), generation_timeout_s=0.3) as srv:
        status, headers, answer = _raw(srv, json.dumps({"messages": HI, "max_tokens": 4000}).encode())
        assert status == 503 and "0.3 s limit" in answer["error"]["message"] and "Retry-After" in headers
        assert len(calls) < 200


def test_serve_closes_idle_and_stalled_sockets(server, tiny_model, qwen_tokenizer):
    with ChatServer(TransformersPolicy(tiny_model, qwen_tokenizer, GREEDY), socket_timeout_s=0.5) as srv:
        idle = [socket.create_connection(("127.0.0.1", srv.port), timeout=10) for _ in range(20)]
        stalled = []
        for _ in range(20):  # headers sent, body promised but never finished
            sock = socket.create_connection(("127.0.0.1", srv.port), timeout=10)
            sock.sendall(b"POST /v1/chat/completions HTTP/1.1\r\nContent-Length: 100\r\n\r\n{")
            stalled.append(sock)
        for sock in idle + stalled:
            assert sock.recv(1024) == b""  # the server closed it (recv would time out otherwise)
            sock.close()
        assert _wait_for(lambda: srv.active_connections == 0, seconds=5)
        assert _raw(srv, json.dumps({"messages": HI, "max_tokens": 2}).encode())[0] == 200


def test_serve_answers_503_not_a_reset_over_the_connection_cap(tiny_model, qwen_tokenizer):
    policy = TransformersPolicy(tiny_model, qwen_tokenizer, GREEDY)
    with ChatServer(policy, max_connections=2, socket_timeout_s=5) as srv:
        held = [socket.create_connection(("127.0.0.1", srv.port), timeout=10) for _ in range(2)]
        assert _wait_for(lambda: srv.active_connections == 2, seconds=5)
        for _ in range(5):
            status, headers, answer = _raw(srv, json.dumps({"messages": HI, "max_tokens": 2}).encode())
            assert status == 503 and headers["Retry-After"] == "1", answer
        for sock in held:
            sock.close()
        assert _wait_for(lambda: srv.active_connections == 0, seconds=5)
        assert _raw(srv, json.dumps({"messages": HI, "max_tokens": 2}).encode())[0] == 200
        assert srv.stats["busy"] == 5


def test_serve_load_every_request_gets_a_status_never_a_reset(tiny_model, qwen_tokenizer):
    """200 concurrent requests against a queue of 4: each gets 200 or 429/503 with Retry-After."""
    n = 200
    policy = TransformersPolicy(tiny_model, qwen_tokenizer, GREEDY)
    with ChatServer(policy, max_queue=4, max_connections=64) as srv:
        barrier = threading.Barrier(n)
        body = json.dumps({"messages": HI, "max_tokens": 2}).encode()

        def one(_):
            barrier.wait()
            try:
                status, headers, _ = _raw(srv, body, timeout=60)
            except OSError as exc:  # a reset, a refused connection, a timeout
                return type(exc).__name__, None
            return status, headers.get("Retry-After")

        with ThreadPoolExecutor(max_workers=n) as pool:
            results = list(pool.map(one, range(n)))
        statuses = Counter(status for status, _ in results)
        assert set(statuses) <= {200, 429, 503}, statuses
        assert statuses[200] >= 5 and statuses[429] + statuses[503] > 0, statuses
        assert all(after is not None and int(after) >= 1 for status, after in results if status != 200)
        with urllib.request.urlopen(srv.base_url.removesuffix("/v1") + "/health", timeout=10) as response:
            assert response.status == 200
        assert srv.stats["ok"] == statuses[200]


# ───────────────────────────── star serve options ─────────────────────────────


def _serve_cli(capsys, *options):
    from star_lib.cli import main

    try:
        code = main(["serve", *options])
    except SystemExit as exc:  # argparse refuses the option
        code = exc.code
    return code, capsys.readouterr().err.strip()


@pytest.mark.parametrize("port", ["70000", "0", "-1", "http"])
def test_serve_cli_refuses_a_port_outside_1_65535(capsys, port):
    code, err = _serve_cli(capsys, "--model", "tiny", "--port", port)
    assert code == 2 and "--port" in err and "Traceback" not in err


@pytest.mark.parametrize(
    "options",
    [
        ["--device", "tpu"],
        ["--max-queue", "0"],
        ["--max-connections", "-3"],
        ["--socket-timeout", "0"],
        ["--socket-timeout", "inf"],
        ["--max-context", "x"],
    ],
)
def test_serve_cli_refuses_bad_limits(capsys, options):
    code, err = _serve_cli(capsys, "--model", "tiny", *options)
    assert code == 2 and options[0] in err and "Traceback" not in err


@pytest.mark.parametrize("host", ["bad host!", "999.1.1.1", "192.0.2.1"])
def test_serve_cli_refuses_a_host_it_cannot_bind(capsys, host, tmp_path):
    code, err = _serve_cli(capsys, "--model", str(tmp_path), "--host", host, "--port", "18123")
    assert code == 2 and f"--host {host!r}" in err and len(err.splitlines()) == 1


def test_serve_cli_refuses_a_port_in_use(capsys, tmp_path):
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        code, err = _serve_cli(capsys, "--model", str(tmp_path), "--port", str(port))
    assert code == 2 and f"--port {port} is already in use" in err and len(err.splitlines()) == 1


def test_serve_cli_refuses_a_missing_model_before_loading(capsys, tmp_path):
    code, err = _serve_cli(capsys, "--model", str(tmp_path / "nope"), "--port", "18124")
    assert code == 2 and f"--model {tmp_path / 'nope'}" in err and "does not exist" in err
    assert len(err.splitlines()) == 1


def test_serve_constructor_refuses_bad_limits_and_addresses(tiny_model, qwen_tokenizer):
    from star_lib.agent.serve import ServerConfigError

    policy = TransformersPolicy(tiny_model, qwen_tokenizer, GREEDY)
    for kwargs, says in [
        ({"max_queue": 0}, "max_queue"),
        ({"max_connections": 2.5}, "max_connections"),
        ({"socket_timeout_s": float("inf")}, "socket_timeout_s"),
        ({"port": 70000}, "port"),
        ({"host": "bad host!"}, "host"),
    ]:
        with pytest.raises(ServerConfigError, match=says):
            ChatServer(policy, **kwargs)
    first = ChatServer(policy)
    try:
        with pytest.raises(ServerConfigError, match=f"port {first.port} is already in use"):
            ChatServer(policy, port=first.port)
    finally:
        first.stop()  # never started: returns at once


@pytest.mark.slow  # ~25 s: a fresh interpreter imports torch and loads the checkpoint
def test_serve_cli_serves_a_saved_checkpoint_until_interrupted(tiny_model, qwen_tokenizer, tmp_path):
    import signal
    import subprocess
    import sys

    tiny_model.save_pretrained(tmp_path / "model")
    qwen_tokenizer.save_pretrained(tmp_path / "model")
    with socket.socket() as free:
        free.bind(("127.0.0.1", 0))
        port = free.getsockname()[1]
    command = [
        sys.executable,
        "-c",
        "import sys; from star_lib.cli import main; sys.exit(main())",
        "serve",
        "--model",
        str(tmp_path / "model"),
        "--port",
        str(port),
        "--device",
        "cpu",
        "--max-queue",
        "2",
    ]
    process = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:

        def up():
            try:
                with urllib.request.urlopen(f"http://127.0.0.1:{port}/health", timeout=1) as response:
                    return response.status == 200
            except OSError:
                return process.poll() is not None

        assert _wait_for(up, seconds=120) and process.poll() is None, process.communicate()
        status, body = _post(
            f"http://127.0.0.1:{port}/v1/chat/completions", {"messages": HI, "max_tokens": 2}
        )
        assert status == 200 and body["usage"]["completion_tokens"] <= 2
        status, body = _post(f"http://127.0.0.1:{port}/v1/chat/completions", {"messages": HI, "seed": "abc"})
        assert status == 400 and body["error"]["param"] == "seed"
    finally:
        process.send_signal(signal.SIGINT)
        out, err = process.communicate(timeout=30)
    assert process.returncode == 0, err
    assert f"at http://127.0.0.1:{port}/v1" in out
