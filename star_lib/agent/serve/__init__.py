"""A small OpenAI-compatible chat server for a transformers model (``POST /v1/chat/completions``).

It renders each request with the model's chat template (``messages`` and ``tools``), generates with a
:class:`~star_lib.agent.policies.TransformersPolicy` and answers in the OpenAI response shape, including
``logprobs`` when asked. It is meant for tests, demos and local teachers, and built so that no client can
block it (standard library HTTP only):

- one generation runs at a time, in a worker thread fed by a bounded FIFO queue; when the queue is full a
  request gets ``429`` with ``Retry-After`` at once (never a connection reset);
- a request is checked before it is queued: a body over ``max_body_bytes`` gets ``413`` (and up to
  ``MAX_DISCARD_BYTES``, 32 MiB, of it are drained so a client still sending reads the 413, not a reset), a
  prompt that does not fit the model's context gets ``413``, and every malformed field gets ``400`` naming
  the field;
- a request's line and headers must arrive within ``head_timeout_s`` (10 s) of its first byte and its body
  within ``body_timeout_s`` (60 s) of its headers, total time and not per read, else ``408`` and the
  connection closes: a client dripping bytes cannot hold a connection slot;
- each request samples with the settings it sends, the rest from the policy's at construction (one request's
  never reach another's);
- a client that disconnects cancels its request, queued or running (checked before each forward pass);
- idle or stalled sockets time out after ``socket_timeout_s``; at most ``max_connections`` connections are
  served at once, further ones get ``503`` with ``Retry-After``; the listen backlog is large.

One module per job: :mod:`~star_lib.agent.serve.request` (request limits and validation),
:mod:`~star_lib.agent.serve.server` (the model: queue, worker, responses), :mod:`~star_lib.agent.serve.httpd`
(HTTP: where to listen, the connection cap, the request handler).

Example:
    >>> server = ChatServer.from_pretrained("runs/sft/model", port=0).start()  # doctest: +SKIP
    >>> server.base_url  # doctest: +SKIP
    'http://127.0.0.1:43121/v1'
    >>> server.stop()  # doctest: +SKIP

"""

from star_lib.agent.serve.httpd import ServerConfigError, check_listen_address, resolve_listen_address
from star_lib.agent.serve.request import (
    MAX_BODY_BYTES,
    MAX_DISCARD_BYTES,
    MAX_JSON_DEPTH,
    ROLES,
    RequestError,
    parse_body,
)
from star_lib.agent.serve.server import ChatServer

__all__ = [
    "MAX_BODY_BYTES",
    "MAX_DISCARD_BYTES",
    "MAX_JSON_DEPTH",
    "ROLES",
    "ChatServer",
    "RequestError",
    "ServerConfigError",
    "check_listen_address",
    "parse_body",
    "resolve_listen_address",
]
