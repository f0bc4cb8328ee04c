"""The model side of the chat server: :class:`ChatServer` queues prepared requests, generates one at a time.

One generation runs at a time, in a worker thread fed by a bounded FIFO queue; a full queue answers 429 at
once. A client that disconnects cancels its request, queued or running (checked before each forward pass),
and a generation running past ``generation_timeout_s`` stops with 503.
"""

from __future__ import annotations

import copy
import math
import queue
import secrets
import threading
import time
from collections import Counter
from typing import Any

from star_lib.agent.policies import Conversation, TransformersPolicy, render_prompt_ids
from star_lib.agent.serve.httpd import (
    CappedHTTPServer,
    Rejector,
    ServerConfigError,
    handler_for,
    resolve_listen_address,
)
from star_lib.agent.serve.request import MAX_BODY_BYTES, Job, PreparedRequest, RequestError, parse_request


class _Aborted(Exception):
    """Raised inside the model's forward pass to stop a cancelled or overdue generation."""


class ChatServer:
    """Serve one model over HTTP in a background thread.

    Args:
        policy: The model, tokenizer and default sampling settings.
        model_name: Name reported by ``/v1/models`` and in responses.
        host: Interface to bind (loopback by default).
        port: TCP port; 0 picks a free one (see :attr:`port` after :meth:`start`).
        api_key: When set, requests must send ``Authorization: Bearer <api_key>``.
        max_new_tokens_limit: Upper bound on ``max_tokens`` per request.
        max_context_tokens: Prompt plus completion tokens allowed; defaults to the model's
            ``max_position_embeddings`` (a longer prompt gets 413).
        max_queue: Requests waiting for the model beyond the one generating; more get 429.
        max_connections: Connections served at once; more get 503 (bounds the server's threads).
        socket_timeout_s: A connection idle (or stalled mid-request) this long is closed.
        head_timeout_s: Deadline for a request's line and headers, counted from its first byte (total
            time, not per read): a client dripping them slower gets 408 and its connection closed.
        body_timeout_s: Deadline for a request's body, counted from the end of its headers (408 past it);
            also the most time spent draining a refused body so its client reads the answer.
        max_body_bytes: Largest request body; larger gets 413.
        generation_timeout_s: Stop a generation running longer than this (503); None = no limit.

    Raises:
        ServerConfigError: A limit is not positive, or the address cannot be resolved or bound.

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
        max_context_tokens: int | None = None,
        max_queue: int = 32,
        max_connections: int = 128,
        socket_timeout_s: float = 30.0,
        head_timeout_s: float = 10.0,
        body_timeout_s: float = 60.0,
        max_body_bytes: int = MAX_BODY_BYTES,
        generation_timeout_s: float | None = None,
    ) -> None:
        counts = {
            "max_new_tokens_limit": max_new_tokens_limit,
            "max_queue": max_queue,
            "max_connections": max_connections,
            "max_body_bytes": max_body_bytes,
            "max_context_tokens": 1 if max_context_tokens is None else max_context_tokens,
        }
        seconds = {
            "socket_timeout_s": socket_timeout_s,
            "head_timeout_s": head_timeout_s,
            "body_timeout_s": body_timeout_s,
            "generation_timeout_s": 1 if generation_timeout_s is None else generation_timeout_s,
        }
        for name, value in counts.items():
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise ServerConfigError(f"{name} must be an integer >= 1, got {value!r}")
        for name, value in seconds.items():
            if isinstance(value, bool) or not isinstance(value, int | float) or not 0 < value < math.inf:
                raise ServerConfigError(f"{name} must be a positive number of seconds, got {value!r}")
        self.policy = policy
        self.sampling = policy.sampling
        """Sampling defaults of a request that sets no ``temperature``/``top_p``/``top_k``/``seed``."""
        self.model_name = model_name
        self.api_key = api_key
        self.max_new_tokens_limit = max_new_tokens_limit
        self.max_context_tokens = max_context_tokens or _model_context(policy)
        self.max_body_bytes = max_body_bytes
        self.socket_timeout_s = socket_timeout_s
        self.head_timeout_s = head_timeout_s
        self.body_timeout_s = body_timeout_s
        self.generation_timeout_s = generation_timeout_s
        self.stats: Counter[str] = Counter()
        """Outcome counts: ``ok``, ``bad_request``, ``too_large``, ``too_slow``, ``queue_full``, ``busy``…"""
        self._stats_lock = threading.Lock()
        self._lock = threading.Lock()  # one generation at a time
        self._render_lock = threading.Lock()  # a fast tokenizer is not safe to share across threads
        self._jobs: queue.Queue[Job] = queue.Queue(maxsize=max_queue)
        self._current: Job | None = None
        self._seconds_per_job = 1.0  # running mean, for Retry-After
        self._generations = 0  # offsets the default seed of requests that send none
        self._stopping = threading.Event()
        family, sockaddr = resolve_listen_address(host, port)
        self._rejector = Rejector()
        self._httpd = CappedHTTPServer(
            family, sockaddr, handler_for(self), max_connections, self._rejector, self.count, (host, port)
        )
        self._worker = threading.Thread(target=self._work, name="star-serve-model", daemon=True)
        self._worker.start()
        self._thread: threading.Thread | None = None
        self._serving = False

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
        host = str(self._httpd.server_address[0])
        return f"http://{f'[{host}]' if ':' in host else host}:{self.port}/v1"

    @property
    def active_connections(self) -> int:
        """Connections being served now (not counting ones refused with 503)."""
        return self._httpd.active

    def start(self) -> ChatServer:
        """Serve in a daemon thread; returns self."""
        self._serving = True
        self._thread = threading.Thread(target=self._httpd.serve_forever, name="star-serve", daemon=True)
        self._thread.start()
        return self

    def serve_forever(self) -> None:
        """Serve in the calling thread until interrupted."""
        self._serving = True
        try:
            self._httpd.serve_forever()
        finally:
            self._shutdown_workers()
            self._httpd.server_close()

    def stop(self) -> None:
        """Stop serving, cancel queued and running work, and close the socket (safe if never started)."""
        if self._serving:
            self._serving = False
            self._httpd.shutdown()  # waits for the serve loop, which only exists once started
        self._shutdown_workers()
        self._httpd.server_close()
        if self._thread is not None:
            self._thread.join(timeout=5)

    def __enter__(self) -> ChatServer:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    # ── request handling ──

    def complete(self, body: Any) -> dict[str, Any]:
        """Answer one chat-completions request body now, bypassing the queue.

        Raises:
            RequestError: A malformed body (400) or a prompt too long for the model (413).

        """
        return self._generate(self.prepare(body), threading.Event())

    def prepare(self, body: Any) -> PreparedRequest:
        """Validate a request body and render its prompt (raises :class:`RequestError`)."""
        messages, tools, max_tokens, sampling, seed = parse_request(
            body, self.sampling, self.max_new_tokens_limit
        )
        conversation = Conversation(messages=messages, tools=tools)
        with self._render_lock:
            try:
                conversation.prompt_ids = render_prompt_ids(self.policy.tokenizer, conversation)
            except Exception as exc:  # noqa: BLE001 - a template error is the client's request
                raise RequestError(
                    f"the chat template cannot render these messages/tools: {exc}", param="messages"
                ) from exc
        prompt_tokens = len(conversation.prompt_ids)
        room = self.max_context_tokens - prompt_tokens
        if room < 1:
            raise RequestError(
                f"the prompt is {prompt_tokens} tokens but this model's context is "
                f"{self.max_context_tokens} tokens; shorten 'messages'",
                status=413,
                param="messages",
            )
        if max_tokens is None:
            max_tokens = min(512, room, self.max_new_tokens_limit)
        elif max_tokens > room:
            raise RequestError(
                f"max_tokens {max_tokens} plus the {prompt_tokens}-token prompt exceeds this model's "
                f"context of {self.max_context_tokens} tokens; ask for at most {room}",
                param="max_tokens",
            )
        logprobs = bool(body.get("logprobs"))
        return PreparedRequest(conversation, max_tokens, sampling, seed, logprobs)

    def submit(self, request: PreparedRequest) -> Job:
        """Queue a prepared request for the model (:class:`RequestError` 429 when the queue is full)."""
        if self._stopping.is_set():
            raise RequestError("the server is shutting down", status=503)
        job = Job(request)
        try:
            self._jobs.put_nowait(job)
        except queue.Full:
            raise self.queue_full_error() from None
        return job

    def queue_full_error(self) -> RequestError:
        """Build the 429 answered when ``max_queue`` requests are already waiting."""
        return RequestError(
            f"the server is busy ({self._jobs.maxsize} requests already waiting); retry later", status=429
        )

    def retry_after_s(self) -> int:
        """Seconds a refused client should wait: the expected time to drain the queue (at least 1)."""
        return max(1, math.ceil(self._seconds_per_job * (self._jobs.qsize() + 1)))

    @property
    def queued(self) -> int:
        """Requests waiting for the model (not counting the one generating)."""
        return self._jobs.qsize()

    @property
    def stopping(self) -> bool:
        """Whether :meth:`stop` has begun: queued and running work is being cancelled."""
        return self._stopping.is_set()

    def queue_is_full(self) -> bool:
        """Whether ``max_queue`` requests are already waiting (a new one would get 429)."""
        return self._jobs.full()

    def count(self, outcome: str) -> None:
        """Add one to the :attr:`stats` count of ``outcome``."""
        with self._stats_lock:
            self.stats[outcome] += 1

    def _work(self) -> None:
        while not self._stopping.is_set():
            try:
                job = self._jobs.get(timeout=0.1)
            except queue.Empty:
                continue
            self._current = job
            started = time.monotonic()
            try:
                if not job.cancel.is_set():
                    job.result = self._generate(job.request, job.cancel)
            except Exception as exc:  # noqa: BLE001 - handed to the waiting handler thread
                job.error = exc
            finally:
                self._current = None
                if job.cancel.is_set():
                    self.count("cancelled")
                else:
                    elapsed = time.monotonic() - started
                    self._seconds_per_job = 0.8 * self._seconds_per_job + 0.2 * elapsed
                job.done.set()

    def _shutdown_workers(self) -> None:
        self._stopping.set()
        current = self._current
        if current is not None:
            current.cancel.set()
        while True:
            try:
                job = self._jobs.get_nowait()
            except queue.Empty:
                break
            job.cancel.set()
            job.done.set()
        self._worker.join(timeout=5)
        self._rejector.stop()

    def _generate(self, request: PreparedRequest, cancel: threading.Event) -> dict[str, Any]:
        deadline = None if self.generation_timeout_s is None else time.monotonic() + self.generation_timeout_s

        def check(_module: Any, _args: Any) -> None:  # a forward pre-hook: runs before every token
            if cancel.is_set():
                raise _Aborted("cancelled")
            if deadline is not None and time.monotonic() > deadline:
                raise _Aborted("timeout")

        with self._lock:
            # this request's sampling goes on a shallow copy (same model and tokenizer): requests validated
            # meanwhile, in handler threads, read the server's defaults, never this request's
            policy = copy.copy(self.policy)
            policy.sampling = request.sampling
            seed = request.seed
            if seed is None and request.sampling.seed is not None:
                seed = request.sampling.seed + self._generations
            self._generations += 1
            hook = self.policy.model.register_forward_pre_hook(check)
            try:
                generation = policy.generate(
                    [request.conversation], max_new_tokens=request.max_tokens, seed=seed
                )[0]
            except _Aborted as exc:
                if str(exc) == "timeout":
                    raise RequestError(
                        f"generation ran past the server's {self.generation_timeout_s} s limit; "
                        "ask for fewer max_tokens",
                        status=503,
                    ) from None
                raise
            finally:
                hook.remove()
        return self._response(request, generation)

    def _response(self, request: PreparedRequest, generation: Any) -> dict[str, Any]:
        choice: dict[str, Any] = {
            "index": 0,
            "message": {"role": "assistant", "content": generation.text},
            "finish_reason": generation.finish_reason,
            "logprobs": None,
        }
        if request.logprobs and generation.token_ids is not None:
            choice["logprobs"] = {
                "content": self._logprob_items(generation.token_ids, generation.logprobs or [])
            }
        prompt_tokens = len(request.conversation.prompt_ids or [])
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

    def _logprob_items(self, ids: list[int], logprobs: list[float]) -> list[dict[str, Any]]:
        tokenizer = self.policy.tokenizer
        return [
            {"token": tokenizer.decode([tok]), "logprob": float(lp), "bytes": None, "top_logprobs": []}
            for tok, lp in zip(ids, logprobs, strict=False)
        ]


def _model_context(policy: TransformersPolicy) -> int:
    """Return the model's context length (``max_position_embeddings``), else 32768."""
    config = getattr(policy.model, "config", None)
    value = getattr(config, "max_position_embeddings", None)
    return int(value) if isinstance(value, int) and value > 0 else 32768
