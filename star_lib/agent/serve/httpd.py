"""HTTP handling of the chat server: where it listens, the connection cap, and the request handler.

Built so that no client can block the server (standard library HTTP only): a body over ``max_body_bytes``
gets ``413`` before it is read, and up to :data:`~star_lib.agent.serve.request.MAX_DISCARD_BYTES` of it are
then read and discarded so that a client still sending reads the 413, not a reset; idle or stalled sockets
time out after ``socket_timeout_s``; a request's head must arrive within ``head_timeout_s`` of its first byte
and its body within ``body_timeout_s`` of its head (total time, not per read), else ``408`` and the
connection closes; at most ``max_connections`` connections are served at once, further ones get ``503``
with ``Retry-After`` (never a connection reset); the listen backlog is large.
"""

from __future__ import annotations

import errno
import io
import json
import queue
import select
import selectors
import socket
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, Protocol

from star_lib.agent.serve.request import MAX_DISCARD_BYTES, Job, PreparedRequest, RequestError, parse_body


class ServerConfigError(ValueError):
    """The server cannot start as configured (address cannot be resolved or bound, bad limit)."""


# ───────────────────────────── where to listen ─────────────────────────────


def resolve_listen_address(
    host: str, port: int, *, host_option: str = "host", port_option: str = "port"
) -> tuple[int, tuple[Any, ...]]:
    """Resolve where to listen, checking the host and port without binding.

    Args:
        host: Interface name or address (``127.0.0.1``, ``::1``, ``localhost``, ``0.0.0.0``).
        port: TCP port, 0..65535 (0 picks a free one).
        host_option: How error messages name the host (``--host`` on the command line).
        port_option: How error messages name the port.

    Returns:
        ``(address_family, sockaddr)`` for the socket.

    Raises:
        ServerConfigError: The port is out of range or the host does not resolve to a local address family.

    """
    if isinstance(port, bool) or not isinstance(port, int) or not 0 <= port <= 65535:
        raise ServerConfigError(
            f"{port_option} must be an integer in 1..65535 (0 = any free port), got {port!r}"
        )
    if not isinstance(host, str) or not host.strip():
        raise ServerConfigError(f"{host_option} must be an interface name or address, got {host!r}")
    try:
        infos = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE)
    except (OSError, UnicodeError) as exc:
        raise ServerConfigError(
            f"{host_option} {host!r} is not an address or a name this machine resolves ({exc}); "
            "use e.g. 127.0.0.1, ::1 or 0.0.0.0"
        ) from None
    families = [info for info in infos if info[0] in (socket.AF_INET, socket.AF_INET6)]
    if not families:
        raise ServerConfigError(f"{host_option} {host!r} resolves to no IPv4/IPv6 address")
    family, _, _, _, sockaddr = families[0]
    return int(family), tuple(sockaddr)


def check_listen_address(
    host: str, port: int, *, host_option: str = "host", port_option: str = "port"
) -> None:
    """Check that ``host:port`` can be bound now (before loading a model for minutes), then release it.

    Args:
        host: Interface name or address.
        port: TCP port (0 picks a free one).
        host_option: How error messages name the host.
        port_option: How error messages name the port.

    Raises:
        ServerConfigError: The address does not resolve, is not on this machine, or the port is in use.

    """
    family, sockaddr = resolve_listen_address(host, port, host_option=host_option, port_option=port_option)
    with socket.socket(family, socket.SOCK_STREAM) as probe:
        probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)  # as the HTTP server binds
        _bind(probe, sockaddr, host, port, host_option, port_option)


def _bind(
    sock: socket.socket, sockaddr: tuple[Any, ...], host: str, port: int, host_option: str, port_option: str
) -> None:
    try:
        sock.bind(sockaddr)
    except PermissionError:
        raise ServerConfigError(
            f"{port_option} {port}: binding a port below 1024 needs privileges; use e.g. 8000"
        ) from None
    except OSError as exc:
        if exc.errno == errno.EADDRINUSE:
            raise ServerConfigError(
                f"{port_option} {port} is already in use on {host}; stop the other server or pick another"
            ) from None
        raise ServerConfigError(
            f"{host_option} {host!r} cannot be bound on this machine: {exc.strerror}"
        ) from None


def _error_payload(status: int, message: str, param: str | None = None) -> dict[str, Any]:
    kind = {401: "authentication_error", 429: "rate_limit_error", 500: "server_error", 503: "server_error"}
    return {
        "error": {
            "message": message,
            "type": kind.get(status, "invalid_request_error"),
            "param": param,
            "code": status,
        }
    }


def _closing_response(status: int, reason: str, message: str, extra_headers: str = "") -> bytes:
    """Build a whole error response that closes the connection (for sockets no handler answers on)."""
    body = json.dumps(_error_payload(status, message)).encode()
    head = (
        f"HTTP/1.1 {status} {reason}\r\nContent-Type: application/json\r\n{extra_headers}"
        f"Connection: close\r\nContent-Length: {len(body)}\r\n\r\n"
    )
    return head.encode() + body


def _busy_response() -> bytes:
    return _closing_response(
        503, "Service Unavailable", "too many open connections; retry later", "Retry-After: 1\r\n"
    )


class Rejector:
    """Answers connections over the cap with 503 from one thread, then closes them without a reset.

    The response is sent at once and the write side shut; the socket is kept (reading and discarding what
    the client sends) until the client closes or two seconds pass, so the kernel never answers the client's
    request bytes with a reset before it has read the 503.
    """

    LINGER_S = 2.0

    def __init__(self) -> None:
        self._incoming: queue.SimpleQueue[socket.socket] = queue.SimpleQueue()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._start_lock = threading.Lock()
        self._response = _busy_response()

    def reject(self, sock: socket.socket) -> None:
        """Send 503 on a freshly accepted socket and hand it to the lingering thread."""
        try:
            sock.setblocking(False)
            sock.send(self._response)  # a few hundred bytes into an empty send buffer
            sock.shutdown(socket.SHUT_WR)
        except OSError:
            sock.close()
            return
        with self._start_lock:
            if self._thread is None:
                self._thread = threading.Thread(target=self._loop, name="star-serve-reject", daemon=True)
                self._thread.start()
        self._incoming.put(sock)

    def stop(self) -> None:
        """Close every lingering socket and end the thread."""
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=5)

    def _loop(self) -> None:
        selector = selectors.DefaultSelector()
        deadlines: dict[socket.socket, float] = {}
        while not self._stop.is_set():
            while not self._incoming.empty():
                sock = self._incoming.get()
                deadlines[sock] = time.monotonic() + self.LINGER_S
                selector.register(sock, selectors.EVENT_READ)
            for key, _ in selector.select(timeout=0.05) if deadlines else []:
                sock = key.fileobj  # type: ignore[assignment]
                try:
                    data = sock.recv(65536)
                except BlockingIOError:
                    continue
                except OSError:
                    data = b""
                if not data:
                    deadlines[sock] = 0.0
            now = time.monotonic()
            for sock in [s for s, t in deadlines.items() if t <= now]:
                selector.unregister(sock)
                sock.close()
                del deadlines[sock]
            if not deadlines:
                self._stop.wait(0.05)
        for sock in deadlines:
            sock.close()
        selector.close()


class CappedHTTPServer(ThreadingHTTPServer):
    """A threading HTTP server with a large backlog and a cap on connections served at once."""

    daemon_threads = True
    request_queue_size = 1024  # the kernel caps it at net.core.somaxconn

    def __init__(
        self,
        family: int,
        sockaddr: tuple[Any, ...],
        handler: type[BaseHTTPRequestHandler],
        max_connections: int,
        rejector: Rejector,
        count: Any,
        requested: tuple[str, int],
    ) -> None:
        self.address_family = family
        self.max_connections = max_connections
        self.active = 0
        self._active_lock = threading.Lock()
        self._rejector = rejector
        self._count = count
        self._requested = requested
        super().__init__(sockaddr, handler, bind_and_activate=False)
        try:
            self.server_bind()
            self.server_activate()
        except OSError as exc:
            self.server_close()
            raise ServerConfigError(f"cannot listen on {requested[0]}:{requested[1]}: {exc}") from None
        except BaseException:
            self.server_close()
            raise

    def server_bind(self) -> None:
        """Bind with the same checks and messages as :func:`check_listen_address`."""
        if self.allow_reuse_address:
            self.socket.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        _bind(self.socket, self.server_address, *self._requested, "host", "port")
        self.server_address = self.socket.getsockname()
        self.server_name = str(self.server_address[0])  # no reverse DNS lookup (HTTPServer does one)
        self.server_port = int(self.server_address[1])

    def process_request(self, request: Any, client_address: Any) -> None:
        """Serve in a thread, or answer 503 when ``max_connections`` are already being served."""
        with self._active_lock:
            full = self.active >= self.max_connections
            if not full:
                self.active += 1
        if full:
            self._count("busy")
            self._rejector.reject(request)
            return
        try:
            super().process_request(request, client_address)
        except BaseException:
            self._release()
            raise

    def process_request_thread(self, request: Any, client_address: Any) -> None:
        """Serve one connection, then free its slot."""
        try:
            super().process_request_thread(request, client_address)
        finally:
            self._release()

    def _release(self) -> None:
        with self._active_lock:
            self.active -= 1

    def handle_error(self, request: Any, client_address: Any) -> None:
        """Stay quiet about clients that went away; other errors are already answered with 500."""


def _client_gone(sock: socket.socket) -> bool:
    """Whether the peer closed its side (readable with zero bytes) or the socket broke."""
    try:
        readable, _, _ = select.select([sock], [], [], 0)
        if not readable:
            return False
        return sock.recv(1, socket.MSG_PEEK) == b""
    except (OSError, ValueError):
        return True


class RequestOverdue(Exception):
    """A client sent a request's head or body slower than its deadline allows (answered ``408``).

    Not an :class:`OSError`: ``http.server`` closes a connection silently on a socket timeout, while this
    one is answered.
    """

    def __init__(self, part: str, seconds: float) -> None:
        super().__init__(f"the request {part} took longer than {seconds:g} s to arrive; send it at once")


class DeadlineReader(io.RawIOBase):
    """A socket's read side with one deadline over many reads (the handler's ``rfile`` reads through it).

    The socket timeout bounds each read; the deadline bounds their sum, so a client that drips a byte now
    and then cannot hold its connection (a slot of ``max_connections``) for long.

    Args:
        sock: The connection.
        timeout: The per-read socket timeout, restored after each read (writes use it too).

    """

    def __init__(self, sock: socket.socket, timeout: float) -> None:
        super().__init__()
        self._sock = sock
        self._timeout = timeout
        self._deadline: float | None = None
        self._pending: float | None = None  # a deadline that starts with the next byte received
        self._part = "head"
        self._seconds = 0.0

    def readable(self) -> bool:
        """Return True: this is a reader."""
        return True

    def arm(self, part: str, seconds: float, *, from_first_byte: bool = False) -> None:
        """Give the reads of ``part`` (``head``, ``body``) ``seconds`` from now, or from the next byte."""
        self._part, self._seconds = part, seconds
        self._deadline = None if from_first_byte else time.monotonic() + seconds
        self._pending = seconds if from_first_byte else None

    def disarm(self) -> None:
        """Drop the deadline (reads are bounded by the socket timeout alone)."""
        self._deadline = self._pending = None

    def readinto(self, buffer: Any) -> int:
        """Receive into ``buffer``; raise :class:`RequestOverdue` once the deadline has passed."""
        timeout = self._timeout
        if self._deadline is not None:
            left = self._deadline - time.monotonic()
            if left <= 0:
                raise RequestOverdue(self._part, self._seconds)
            timeout = min(timeout, left)
        self._sock.settimeout(timeout)
        try:
            received = self._sock.recv_into(buffer)
        except TimeoutError:
            if self._deadline is not None and time.monotonic() >= self._deadline:
                raise RequestOverdue(self._part, self._seconds) from None
            raise  # the per-read timeout: http.server closes the connection
        finally:
            self._sock.settimeout(self._timeout)
        if received and self._pending is not None:
            self._deadline, self._pending = time.monotonic() + self._pending, None
        return received


# ───────────────────────────── the request handler ─────────────────────────────


class ChatBackend(Protocol):
    """What the request handler asks of the server behind it (:class:`~star_lib.agent.serve.ChatServer`)."""

    model_name: str
    api_key: str | None
    max_body_bytes: int
    socket_timeout_s: float
    head_timeout_s: float
    body_timeout_s: float

    @property
    def queued(self) -> int:
        """Requests waiting for the model."""
        ...

    @property
    def stopping(self) -> bool:
        """Whether the server is shutting down."""
        ...

    def queue_is_full(self) -> bool:
        """Whether a new request would get 429."""
        ...

    def queue_full_error(self) -> RequestError:
        """Build the 429 answered when the queue is full."""
        ...

    def prepare(self, body: Any) -> PreparedRequest:
        """Validate a body and render its prompt (raises :class:`RequestError`)."""
        ...

    def submit(self, request: PreparedRequest) -> Job:
        """Queue a prepared request (raises :class:`RequestError`)."""
        ...

    def count(self, outcome: str) -> None:
        """Count one outcome."""
        ...

    def retry_after_s(self) -> int:
        """Seconds a refused client should wait."""
        ...


def handler_for(server: ChatBackend) -> type[ChatHandler]:
    """Return a :class:`ChatHandler` class answering for ``server`` (its sockets time out as configured)."""
    # `timeout` is applied to the socket in setup(): idle/stalled sockets close
    return type("Handler", (ChatHandler,), {"chat": server, "timeout": server.socket_timeout_s})


class ChatHandler(BaseHTTPRequestHandler):
    """Answers ``GET /v1/models``, ``GET /health`` and ``POST /v1/chat/completions`` for :attr:`chat`.

    ``http.server`` builds one per connection from the class :func:`handler_for` returns.
    """

    protocol_version = "HTTP/1.1"
    chat: ChatBackend
    """The server whose model answers."""

    def setup(self) -> None:
        """Read the connection through a :class:`DeadlineReader` (``http.server``'s own file is closed)."""
        super().setup()
        self.rfile.close()
        self.reader = DeadlineReader(self.connection, self.chat.socket_timeout_s)
        self.rfile = io.BufferedReader(self.reader)

    def handle_one_request(self) -> None:
        """Serve one request; its head must arrive within ``head_timeout_s`` of its first byte, else 408."""
        self.reader.arm("head", self.chat.head_timeout_s, from_first_byte=True)
        try:
            super().handle_one_request()
        except RequestOverdue as exc:
            self.chat.count("too_slow")
            self.close_connection = True
            try:  # whatever was sent so far, no answer has been: reads come before any write
                self.connection.sendall(_closing_response(408, "Request Timeout", str(exc)))
            except OSError:
                return
            _linger(self.connection, seconds=self.chat.body_timeout_s)
        finally:
            self.reader.disarm()

    def log_message(self, format: str, *args: Any) -> None:  # noqa: A002 - stdlib signature
        """Log nothing: request headers carry the API key."""

    def do_GET(self) -> None:  # noqa: N802 - stdlib name
        """List the model, or report health."""
        if self.path.rstrip("/") in ("/v1/models", "/models"):
            data = [{"id": self.chat.model_name, "object": "model", "owned_by": "star"}]
            self._send(200, {"object": "list", "data": data})
        elif self.path.rstrip("/") in ("/health", "/v1/health"):
            self._send(200, {"status": "ok", "queued": self.chat.queued})
        else:
            self._error(404, f"no route {self.path}; use POST /v1/chat/completions")

    def do_POST(self) -> None:  # noqa: N802 - stdlib name
        """Check, queue and answer one chat-completions request."""
        chat = self.chat
        try:
            body = self._read_body()
            if self.path.rstrip("/") not in ("/v1/chat/completions", "/chat/completions"):
                raise RequestError(f"no route {self.path}; use POST /v1/chat/completions", status=404)
            if chat.api_key and self.headers.get("Authorization") != f"Bearer {chat.api_key}":
                raise RequestError("missing or wrong API key", status=401)
            if chat.queue_is_full():  # refuse before spending time on the template
                raise chat.queue_full_error()
            job = chat.submit(chat.prepare(body))
        except RequestError as exc:
            chat.count({413: "too_large", 429: "queue_full"}.get(exc.status, "bad_request"))
            self._error(exc.status, str(exc), exc.param)
            return
        self._wait(job)

    def _read_body(self) -> Any:
        length_header = self.headers.get("Content-Length")
        if self.headers.get("Transfer-Encoding") or length_header is None:
            self.close_connection = True
            raise RequestError(
                "send the JSON body with a Content-Length header (no chunked encoding)", status=411
            )
        try:
            length = int(length_header)
        except ValueError:
            length = -1
        if length < 0:
            self.close_connection = True
            raise RequestError(f"Content-Length must be a byte count, got {length_header!r}")
        if length > self.chat.max_body_bytes:
            self.close_connection = True  # the body stays unread; _error lingers so no reset
            raise RequestError(
                f"the body is {length} bytes; this server accepts at most {self.chat.max_body_bytes}",
                status=413,
            )
        self.reader.arm("body", self.chat.body_timeout_s)
        raw = self.rfile.read(length)
        self.reader.disarm()
        if len(raw) < length:
            self.close_connection = True
            raise RequestError(f"the body ended after {len(raw)} of {length} bytes")
        return parse_body(raw)

    def _wait(self, job: Job) -> None:
        while not job.done.wait(0.05):
            if _client_gone(self.connection):
                job.cancel.set()
                self.close_connection = True
                return
        if job.cancel.is_set():
            self.close_connection = True
            if self.chat.stopping:
                self._error(503, "the server is shutting down")
            return
        if isinstance(job.error, RequestError):
            self._error(job.error.status, str(job.error), job.error.param)
        elif job.error is not None:
            self.chat.count("error")
            message = f"generation failed: {type(job.error).__name__}: {job.error}"
            self._error(500, message)
        else:
            self.chat.count("ok")
            self._send(200, job.result or {})

    def _error(self, status: int, message: str, param: str | None = None) -> None:
        headers = {}
        if status in (429, 503):
            headers["Retry-After"] = str(self.chat.retry_after_s())
        self._send(status, _error_payload(status, message, param), headers)

    def _send(self, status: int, payload: dict[str, Any], headers: dict[str, str] | None = None) -> None:
        data = json.dumps(payload).encode()
        try:
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            for name, value in (headers or {}).items():
                self.send_header(name, value)
            if self.close_connection:
                self.send_header("Connection", "close")
            self.end_headers()
            self.wfile.write(data)
            self.wfile.flush()
            if self.close_connection:
                _linger(self.connection, seconds=self.chat.body_timeout_s)
        except OSError:
            self.close_connection = True  # the client went away mid-answer


def _linger(
    sock: socket.socket, *, seconds: float, quiet_s: float = 1.0, most_bytes: int = MAX_DISCARD_BYTES
) -> None:
    """Shut the write side and discard what the client still sends, so closing does not reset the answer.

    A client still sending a refused body (a 413) reads its answer once it is done sending, so the body is
    drained until the client closes, sends nothing for ``quiet_s``, has sent ``most_bytes`` or ``seconds``
    have passed.
    """
    try:
        sock.shutdown(socket.SHUT_WR)
        deadline = time.monotonic() + seconds
        drained = 0
        while drained < most_bytes:
            left = deadline - time.monotonic()
            if left <= 0:
                break
            sock.settimeout(min(quiet_s, left))
            chunk = sock.recv(65536)
            if not chunk:
                break
            drained += len(chunk)
    except OSError:  # a timeout included
        pass
