"""``star serve`` against hostile or careless clients: drip-fed requests, oversized bodies, racing requests.

Each test runs a real server on a localhost port and talks to it over raw sockets (or ``http.client``).
"""

from __future__ import annotations

import http.client
import json
import socket
import threading
import time

import pytest

from star_lib.agent.policies import Conversation, SamplingParams, TransformersPolicy, render_prompt_ids
from star_lib.agent.serve import ChatServer

GREEDY = SamplingParams(temperature=0.0)
HI = [{"role": "user", "content": "hi"}]


def _post(port: int, body: bytes, timeout: float = 30) -> tuple[int, dict]:
    """POST raw bytes with http.client; return (status, parsed JSON body)."""
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=timeout)
    try:
        conn.request("POST", "/v1/chat/completions", body=body, headers={"Content-Type": "application/json"})
        response = conn.getresponse()
        return response.status, json.loads(response.read())
    finally:
        conn.close()


def _wait_for(condition, seconds: float = 10.0) -> bool:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if condition():
            return True
        time.sleep(0.02)
    return condition()


def _drip(sock: socket.socket, first: bytes, piece: bytes, stop: threading.Event) -> None:
    """Send ``first``, then one ``piece`` every 0.3 s until ``stop`` is set or the server closes."""
    try:
        sock.sendall(first)
        while not stop.wait(0.3):
            sock.sendall(piece)
    except OSError:
        return


def test_serve_drip_fed_requests_get_408_and_free_their_slots(tiny_model, qwen_tokenizer):
    """One client drips header lines, one drips its body: both hit a total deadline, not a per-read one."""
    policy = TransformersPolicy(tiny_model, qwen_tokenizer, GREEDY)
    with ChatServer(
        policy, max_connections=2, socket_timeout_s=5, head_timeout_s=1.0, body_timeout_s=1.0
    ) as srv:
        stop = threading.Event()
        drips = [socket.create_connection(("127.0.0.1", srv.port), timeout=10) for _ in range(2)]
        head = b"POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\n"
        threads = [
            threading.Thread(target=_drip, args=(drips[0], head, b"X-Drip: 1\r\n", stop), daemon=True),
            threading.Thread(
                target=_drip,
                args=(drips[1], head + b"Content-Length: 1000\r\n\r\n{", b" ", stop),
                daemon=True,
            ),
        ]
        for thread in threads:
            thread.start()
        try:
            assert _wait_for(lambda: srv.active_connections == 2, seconds=5)
            started = time.monotonic()
            answers = [sock.recv(65536) for sock in drips]  # each read would wait up to 10 s
            took = time.monotonic() - started
        finally:
            stop.set()
            for sock in drips:
                sock.close()
        # a per-read timeout of 5 s never fires on a drip every 0.3 s; the 1 s deadlines do
        assert all(answer.startswith(b"HTTP/1.1 408 ") for answer in answers), answers
        assert b"head" in answers[0] and b"body" in answers[1]
        assert took < 4.5, took
        assert _wait_for(lambda: srv.active_connections == 0, seconds=5)
        status, answer = _post(srv.port, json.dumps({"messages": HI, "max_tokens": 2}).encode())
        assert status == 200, answer
        assert srv.stats["too_slow"] == 2


@pytest.mark.parametrize("mib", [9, 30])
def test_serve_answers_413_not_a_broken_pipe_to_a_large_body(tiny_model, qwen_tokenizer, mib):
    """A client still sending a body of up to 32 MiB gets to read its 413 (the server drains the rest)."""
    policy = TransformersPolicy(tiny_model, qwen_tokenizer, GREEDY)
    with ChatServer(policy) as srv:  # max_body_bytes: 2 MiB
        body = json.dumps({"messages": [{"role": "user", "content": "x" * (mib * 1024 * 1024)}]}).encode()
        status, answer = _post(srv.port, body)  # a reset raises BrokenPipeError/ConnectionResetError here
        assert status == 413 and "at most 2097152" in answer["error"]["message"], answer
        assert _wait_for(lambda: srv.active_connections == 0, seconds=5)
        assert _post(srv.port, json.dumps({"messages": HI, "max_tokens": 2}).encode())[0] == 200
        assert srv.stats["too_large"] == 1


@pytest.fixture
def slow_model(tiny_model, qwen_tokenizer):
    """The tiny model at ~20 ms per forward pass that never ends a turn; counts its forward passes."""
    import torch

    calls = []
    stop_ids = [
        i
        for i in (qwen_tokenizer.convert_tokens_to_ids("<|im_end|>"), qwen_tokenizer.eos_token_id)
        if i is not None
    ]

    def hook(_module, _args, output):
        calls.append(1)
        time.sleep(0.02)
        output.logits[..., stop_ids] = -torch.inf
        return output

    handle = tiny_model.register_forward_hook(hook)
    try:
        yield tiny_model, calls
    finally:
        handle.remove()


def _send(port: int, body: dict) -> socket.socket:
    sock = socket.create_connection(("127.0.0.1", port), timeout=30)
    data = json.dumps(body).encode()
    head = f"POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nContent-Length: {len(data)}\r\n\r\n"
    sock.sendall(head.encode() + data)
    return sock


def _read_answer(sock: socket.socket) -> dict:
    data = b""
    while b"\r\n\r\n" not in data:
        data += sock.recv(65536)
    head, _, rest = data.partition(b"\r\n\r\n")
    length = next(
        int(line.split(b":", 1)[1])
        for line in head.split(b"\r\n")
        if line.lower().startswith(b"content-length")
    )
    while len(rest) < length:
        rest += sock.recv(65536)
    assert head.startswith(b"HTTP/1.1 200 "), head
    return json.loads(rest[:length])


def test_serve_a_request_sampling_does_not_leak_into_a_later_one(slow_model, qwen_tokenizer):
    """B, sent while A generates at temperature 2, still decodes with the server's default (greedy)."""
    model, calls = slow_model
    policy = TransformersPolicy(model, qwen_tokenizer, GREEDY)
    with ChatServer(policy) as srv:
        hot = {"messages": HI, "max_tokens": 4000, "temperature": 2.0, "top_p": 1.0, "seed": 3}
        running = _send(srv.port, hot)  # ~80 s of generation if nothing stops it
        assert _wait_for(lambda: len(calls) > 3)
        later = _send(srv.port, {"messages": HI, "max_tokens": 6})  # sets no sampling field
        assert _wait_for(lambda: srv.queued == 1)  # B is validated (its sampling fixed) while A runs
        running.close()  # cancels A; B runs next
        answer = _read_answer(later)
        later.close()
        assert policy.sampling == GREEDY  # the shared policy is never changed
    conversation = Conversation(messages=HI)
    conversation.prompt_ids = render_prompt_ids(qwen_tokenizer, conversation)
    local = TransformersPolicy(model, qwen_tokenizer, GREEDY).generate([conversation], max_new_tokens=6)[0]
    assert answer["choices"][0]["message"]["content"] == local.text
