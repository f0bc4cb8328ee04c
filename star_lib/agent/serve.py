"""A small OpenAI-compatible chat server for a transformers model (``POST /v1/chat/completions``).

It renders each request with the model's chat template (``messages`` and ``tools``), generates with a
:class:`~star_lib.agent.policies.TransformersPolicy` and answers in the OpenAI response shape, including
``logprobs`` when asked. Requests are served one generation at a time (a lock around the model); it is
meant for tests, demos and local teachers, not production traffic. Standard library HTTP only.

Example:
    >>> server = ChatServer.from_pretrained("runs/sft/model", port=0).start()  # doctest: +SKIP
    >>> server.base_url  # doctest: +SKIP
    'http://127.0.0.1:43121/v1'
    >>> server.stop()  # doctest: +SKIP

"""

from __future__ import annotations

import json
import secrets
import threading
import time
from dataclasses import replace
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from star_lib.agent.policies import Conversation, SamplingParams, TransformersPolicy, render_prompt_ids

MAX_BODY_BYTES = 32 * 1024 * 1024


class RequestError(ValueError):
    """A request the server rejects with HTTP 400 (the message says what to change)."""


class ChatServer:
    """Serve one model over HTTP in a background thread.

    Args:
        policy: The model, tokenizer and default sampling settings.
        model_name: Name reported by ``/v1/models`` and in responses.
        host: Interface to bind (loopback by default).
        port: TCP port; 0 picks a free one (see :attr:`port` after :meth:`start`).
        api_key: When set, requests must send ``Authorization: Bearer <api_key>``.
        max_new_tokens_limit: Upper bound on ``max_tokens`` per request.

    """

    def __init__(
        self,
        policy: TransformersPolicy,
        *,
        model_name: str = "star-local",
        host: str = "127.0.0.1",
        port: int = 0,
        api_key: str | None = None,
        max_new_tokens_limit: int = 4096,
    ) -> None:
        self.policy = policy
        self.model_name = model_name
        self.api_key = api_key
        self.max_new_tokens_limit = max_new_tokens_limit
        self._lock = threading.Lock()
        self._httpd = ThreadingHTTPServer((host, port), _handler_for(self))
        self._httpd.daemon_threads = True
        self._thread: threading.Thread | None = None

    @classmethod
    def from_pretrained(cls, path: str, **kwargs: Any) -> ChatServer:
        """Load a model folder and build a server for it (``kwargs`` go to the constructor)."""
        return cls(TransformersPolicy.from_pretrained(path, batch_size=1), model_name=path, **kwargs)

    @property
    def port(self) -> int:
        """The bound TCP port."""
        return int(self._httpd.server_address[1])

    @property
    def base_url(self) -> str:
        """The OpenAI ``base_url`` of this server."""
        host = self._httpd.server_address[0]
        return f"http://{host}:{self.port}/v1"

    def start(self) -> ChatServer:
        """Serve in a daemon thread; returns self."""
        self._thread = threading.Thread(target=self._httpd.serve_forever, name="star-serve", daemon=True)
        self._thread.start()
        return self

    def serve_forever(self) -> None:
        """Serve in the calling thread until interrupted."""
        try:
            self._httpd.serve_forever()
        finally:
            self._httpd.server_close()

    def stop(self) -> None:
        """Stop serving and close the socket."""
        self._httpd.shutdown()
        self._httpd.server_close()
        if self._thread is not None:
            self._thread.join(timeout=5)

    def __enter__(self) -> ChatServer:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    # ── request handling ──

    def complete(self, body: dict[str, Any]) -> dict[str, Any]:
        """Answer one chat-completions request body (raises :class:`RequestError` on a bad request)."""
        messages, tools, max_tokens, sampling = self._parse(body)
        seed = body.get("seed")
        conversation = Conversation(messages=messages, tools=tools)
        try:
            conversation.prompt_ids = render_prompt_ids(self.policy.tokenizer, conversation)
        except Exception as exc:  # noqa: BLE001 - a template error is the client's request
            raise RequestError(f"the chat template cannot render these messages: {exc}") from exc
        prompt_tokens = len(conversation.prompt_ids)
        with self._lock:
            old = self.policy.sampling
            self.policy.sampling = sampling
            try:
                generation = self.policy.generate(
                    [conversation], max_new_tokens=max_tokens, seed=seed if isinstance(seed, int) else None
                )[0]
            finally:
                self.policy.sampling = old
        choice: dict[str, Any] = {
            "index": 0,
            "message": {"role": "assistant", "content": generation.text},
            "finish_reason": generation.finish_reason,
            "logprobs": None,
        }
        if body.get("logprobs") and generation.token_ids is not None:
            choice["logprobs"] = {
                "content": self._logprob_items(generation.token_ids, generation.logprobs or [])
            }
        completion_tokens = len(generation.token_ids or [])
        return {
            "id": f"chatcmpl-{secrets.token_hex(8)}",
            "object": "chat.completion",
            "created": int(time.time()),
            "model": self.model_name,
            "choices": [choice],
            "usage": {
                "prompt_tokens": prompt_tokens,
                "completion_tokens": completion_tokens,
                "total_tokens": prompt_tokens + completion_tokens,
            },
        }

    def _parse(self, body: Any) -> tuple[list[dict[str, Any]], list[dict[str, Any]], int, SamplingParams]:
        if not isinstance(body, dict):
            raise RequestError("the request body must be a JSON object")
        messages = body.get("messages")
        if not isinstance(messages, list) or not messages:
            raise RequestError("'messages' must be a non-empty list of {role, content} objects")
        for m in messages:
            if not isinstance(m, dict) or m.get("role") not in ("system", "user", "assistant", "tool"):
                raise RequestError("each message needs a role among system, user, assistant, tool")
            if not isinstance(m.get("content", ""), str):
                raise RequestError("message content must be a string")
        tools = body.get("tools") or []
        if not isinstance(tools, list):
            raise RequestError("'tools' must be a list of function schemas")
        if body.get("n", 1) != 1:
            raise RequestError("only n=1 is supported")
        max_tokens = body.get("max_completion_tokens") or body.get("max_tokens") or 512
        if not isinstance(max_tokens, int) or not 0 < max_tokens <= self.max_new_tokens_limit:
            raise RequestError(f"max_tokens must be an integer in 1..{self.max_new_tokens_limit}")
        try:
            sampling = replace(
                self.policy.sampling,
                temperature=float(body.get("temperature", self.policy.sampling.temperature)),
                top_p=float(body.get("top_p", self.policy.sampling.top_p)),
                top_k=int(body.get("top_k", self.policy.sampling.top_k) or 0),
                seed=body.get("seed", self.policy.sampling.seed),
            )
        except (TypeError, ValueError) as exc:
            raise RequestError(f"bad sampling parameter: {exc}") from exc
        clean = [{"role": m["role"], "content": m.get("content") or ""} for m in messages]
        return clean, tools, max_tokens, sampling

    def _logprob_items(self, ids: list[int], logprobs: list[float]) -> list[dict[str, Any]]:
        tokenizer = self.policy.tokenizer
        return [
            {"token": tokenizer.decode([tok]), "logprob": float(lp), "bytes": None, "top_logprobs": []}
            for tok, lp in zip(ids, logprobs, strict=False)
        ]


def _handler_for(server: ChatServer) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def log_message(self, format: str, *args: Any) -> None:  # noqa: A002 - stdlib signature
            pass  # quiet: never log request headers (they carry the API key)

        def do_GET(self) -> None:  # noqa: N802 - stdlib name
            if self.path.rstrip("/") in ("/v1/models", "/models"):
                data = [{"id": server.model_name, "object": "model", "owned_by": "star"}]
                self._send(200, {"object": "list", "data": data})
            elif self.path.rstrip("/") in ("/health", "/v1/health"):
                self._send(200, {"status": "ok"})
            else:
                self._error(404, f"no route {self.path}; use POST /v1/chat/completions")

        def do_POST(self) -> None:  # noqa: N802 - stdlib name
            if self.path.rstrip("/") not in ("/v1/chat/completions", "/chat/completions"):
                self._error(404, f"no route {self.path}; use POST /v1/chat/completions")
                return
            if server.api_key and self.headers.get("Authorization") != f"Bearer {server.api_key}":
                self._error(401, "missing or wrong API key", "authentication_error")
                return
            try:
                length = int(self.headers.get("Content-Length") or 0)
                if not 0 < length <= MAX_BODY_BYTES:
                    raise RequestError(f"the body must be 1..{MAX_BODY_BYTES} bytes of JSON")
                body = json.loads(self.rfile.read(length))
                self._send(200, server.complete(body))
            except (RequestError, ValueError) as exc:
                self._error(400, str(exc))
            except Exception as exc:  # noqa: BLE001 - report, keep serving
                self._error(500, f"generation failed: {type(exc).__name__}: {exc}", "server_error")

        def _error(self, status: int, message: str, kind: str = "invalid_request_error") -> None:
            self._send(status, {"error": {"message": message, "type": kind, "code": status}})

        def _send(self, status: int, payload: dict[str, Any]) -> None:
            data = json.dumps(payload).encode()
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

    return Handler
