"""A local HTTP server speaking Anthropic's Messages API, scriptable per test.

The real ``anthropic`` SDK is pointed at it through ``base_url``, so tests
exercise the SDK's own retries, error mapping and parsing. Each request
consumes the next scripted behaviour (the model's own queue first, then the
shared one), falling back to a default. Behaviours are strings for the common
cases or :class:`Behaviour` values for the rest::

    server.script(["429", "ok"])                    # shared queue
    server.script(["529"] * 3, model="primary")     # only for requests naming "primary"
    server.set_default("500", model="primary")      # every later "primary" request
    server.script([Behaviour.reply("exact text"), "latency:0.2", "garbage"])

String forms: ``ok``, ``empty``, ``oversized``, ``garbage`` (2xx, broken JSON),
``malformed`` (2xx, JSON that is not a message), ``html`` (2xx, an HTML page),
``latency:<seconds>`` (then ok), ``text:<reply>``, and any HTTP error status
(``400``, ``401``, ``404``, ``429``, ``500``, ``503``, ``529`` …). Error replies
carry ``retry-after`` (``retry_after`` seconds, small by default) so the SDK's
retries stay fast. ``server.gather(4)`` holds the next four replies until all
four requests arrived, as a model answering a wave of calls at once.

Like API version 2026-10-21, a request carrying ``temperature``/``top_p``/``top_k``
is refused with 400 unless it asks for ``anthropic-version: 2023-06-01``.
"""

from __future__ import annotations

import contextlib
import json
import socket
import threading
import time
from collections import deque
from collections.abc import Iterable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, Self

from lcm.tokens import estimate_tokens
from tests.fakes.anthropic_script import (
    ERROR_TYPES,
    THOUGHT,
    Behaviour,
    RecordedRequest,
    reply_text,
    source_of,
    thinking_enabled,
    validate,
)


class FakeAnthropicServer:
    """The fake server; use as a context manager and point the SDK at :attr:`base_url`."""

    route = "/v1/messages"
    thread_name = "fake-anthropic"

    def __init__(self, *, retry_after: float = 0.01, default: str | Behaviour = "ok") -> None:
        self.retry_after = retry_after
        # Handler threads and the test thread share the queues and the log.
        self._lock = threading.Lock()
        self._queue: deque[Behaviour] = deque()
        self._model_queues: dict[str, deque[Behaviour]] = {}
        self._default = Behaviour.parse(default)
        self._model_defaults: dict[str, Behaviour] = {}
        self._requests: list[RecordedRequest] = []
        self._counter = 0
        self._in_flight = 0
        self._peak_in_flight = 0
        # Requests arriving is what releases gathered replies (``gather``).
        self._arrived = threading.Condition(self._lock)
        self._gathering = 0
        self._gather_timeout = 30.0
        self._httpd: _QuietServer | None = None
        self._thread: threading.Thread | None = None

    # --- scripting -----------------------------------------------------------

    def script(self, behaviours: Iterable[str | Behaviour], *, model: str | None = None) -> None:
        """Queue behaviours, consumed one per request (for ``model`` only, if given)."""
        parsed = [Behaviour.parse(b) for b in behaviours]
        with self._lock:
            queue = self._queue if model is None else self._model_queues.setdefault(model, deque())
            queue.extend(parsed)

    def set_default(self, behaviour: str | Behaviour, *, model: str | None = None) -> None:
        """What to do once the queues are empty (for ``model`` only, if given)."""
        parsed = Behaviour.parse(behaviour)
        with self._lock:
            if model is None:
                self._default = parsed
            else:
                self._model_defaults[model] = parsed

    def gather(self, count: int, timeout: float = 30.0) -> None:
        """Hold the next ``count`` requests' replies until all arrived, then answer them together.

        As a model answering a wave of calls at the same moment does. Once;
        a request arriving after them is answered as usual. After
        ``timeout`` seconds the held replies go out anyway.
        """
        with self._lock:
            self._gathering = count
            self._gather_timeout = timeout

    @property
    def requests(self) -> list[RecordedRequest]:
        """Every request received so far, in arrival order."""
        with self._lock:
            return list(self._requests)

    @property
    def peak_in_flight(self) -> int:
        """The most requests the server held at once (a reply's delay included)."""
        with self._lock:
            return self._peak_in_flight

    def requests_for(self, model: str) -> list[RecordedRequest]:
        return [r for r in self.requests if r.model == model]

    def _next_behaviour(self, model: str) -> Behaviour:
        with self._lock:
            own = self._model_queues.get(model)
            if own:
                return own.popleft()
            if self._queue:
                return self._queue.popleft()
            return self._model_defaults.get(model, self._default)

    def _record(self, body: dict[str, Any], headers: dict[str, str]) -> int:
        messages = body.get("messages")
        recorded = RecordedRequest(
            model=body.get("model"),
            temperature=body.get("temperature"),
            system=body.get("system"),
            messages=messages if isinstance(messages, list) else [],
            max_tokens=body.get("max_tokens"),
            headers=headers,
            body=body,
        )
        with self._lock:
            self._requests.append(recorded)
            self._counter += 1
            return self._counter

    # --- lifecycle -------------------------------------------------------------

    @property
    def base_url(self) -> str:
        if self._httpd is None:
            raise RuntimeError("fake Anthropic server not started")
        host, port = self._httpd.server_address[:2]
        return f"http://{host!s}:{port}"

    def start(self) -> Self:
        self._httpd = _QuietServer(("127.0.0.1", 0), _make_handler(self))
        # A short poll interval keeps stop() (and so each test's teardown) quick.
        self._thread = threading.Thread(
            target=self._httpd.serve_forever,
            kwargs={"poll_interval": 0.02},
            name=self.thread_name,
            daemon=True,
        )
        self._thread.start()
        return self

    def stop(self) -> None:
        if self._httpd is not None:
            self._httpd.shutdown()
            self._httpd.server_close()
            # Kept-alive connections end with the server, as a real one's do:
            # a client must not be served by a stopped server.
            self._httpd.close_connections()
        if self._thread is not None:
            self._thread.join(timeout=5)
        self._httpd = None
        self._thread = None

    def __enter__(self) -> Self:
        return self.start()

    def __exit__(self, *exc_info: object) -> None:
        self.stop()

    # --- replies -------------------------------------------------------------------

    def respond(
        self, body: dict[str, Any], headers: dict[str, str]
    ) -> tuple[int, dict[str, str], bytes]:
        """Status, headers and body for one request (called from handler threads)."""
        with self._lock:
            self._in_flight += 1
            self._peak_in_flight = max(self._peak_in_flight, self._in_flight)
            if self._gathering:
                self._gathering -= 1
                self._arrived.notify_all()
                self._arrived.wait_for(lambda: self._gathering == 0, self._gather_timeout)
        try:
            return self._reply(body, headers)
        finally:
            with self._lock:
                self._in_flight -= 1

    def _reply(
        self, body: dict[str, Any], headers: dict[str, str]
    ) -> tuple[int, dict[str, str], bytes]:
        number = self._record(body, headers)
        problem = validate(body, headers)
        if problem is not None:
            return self.error_reply(400, problem)
        model = str(body["model"])
        behaviour = self._next_behaviour(model)
        if behaviour.delay:
            time.sleep(behaviour.delay)
        if behaviour.kind == "error":
            return self.error_reply(behaviour.status, f"scripted {behaviour.status} for {model}")
        json_headers = {"content-type": "application/json", "request-id": f"req_fake_{number}"}
        if behaviour.kind == "garbage":
            return 200, json_headers, b'{"id": "msg_garbage", "type": "message", "content": [{'
        if behaviour.kind == "malformed":
            return 200, json_headers, json.dumps({"type": "message", "content": "??"}).encode()
        if behaviour.kind == "html":
            return 200, {"content-type": "text/html"}, b"<html><body>502 Bad Gateway</body></html>"
        source = source_of(body)
        content: list[dict[str, Any]]
        stop_reason = "end_turn"
        if behaviour.kind == "tool_use":
            content = [
                {
                    "type": "tool_use",
                    "id": f"toolu_fake_{number}",
                    "name": behaviour.tool_name,
                    "input": behaviour.tool_input,
                }
            ]
            stop_reason = "tool_use"
        else:
            content = [{"type": "text", "text": reply_text(behaviour, source)}]
        if thinking_enabled(body):
            # As the API does: the thinking block first, billed as output.
            content.insert(0, {"type": "thinking", "thinking": THOUGHT, "signature": "c2ln"})
        message = {
            "id": f"msg_fake_{number}",
            "type": "message",
            "role": "assistant",
            "model": model,
            "content": content,
            "stop_reason": stop_reason,
            "stop_sequence": None,
            "usage": {
                "input_tokens": estimate_tokens(json.dumps(body.get("messages"))),
                "output_tokens": sum(estimate_tokens(json.dumps(block)) for block in content),
            },
        }
        if body.get("stream") is True:
            return 200, {"content-type": "text/event-stream"}, stream_events(message)
        return 200, json_headers, json.dumps(message).encode()

    def error_reply(self, status: int, message: str) -> tuple[int, dict[str, str], bytes]:
        error_type = ERROR_TYPES.get(status, "api_error")
        body = {"type": "error", "error": {"type": error_type, "message": message}}
        headers = {"content-type": "application/json"}
        if status == 429 or status >= 500:
            headers["retry-after"] = str(self.retry_after)
        return status, headers, json.dumps(body).encode()


def stream_events(message: dict[str, Any]) -> bytes:
    """The message as the Messages API streams it (``stream: true``): SSE events."""

    def event(name: str, data: dict[str, Any]) -> str:
        return f"event: {name}\ndata: {json.dumps({'type': name, **data})}\n\n"

    start = {**message, "content": [], "stop_reason": None}
    start["usage"] = {**message["usage"], "output_tokens": 0}
    out = [event("message_start", {"message": start})]
    for index, block in enumerate(message["content"]):
        if block["type"] == "tool_use":
            out.append(
                event(
                    "content_block_start", {"index": index, "content_block": {**block, "input": {}}}
                )
            )
            delta = {"type": "input_json_delta", "partial_json": json.dumps(block["input"])}
        else:
            out.append(
                event(
                    "content_block_start",
                    {"index": index, "content_block": {"type": "text", "text": ""}},
                )
            )
            delta = {"type": "text_delta", "text": block["text"]}
        out.append(event("content_block_delta", {"index": index, "delta": delta}))
        out.append(event("content_block_stop", {"index": index}))
    stop = {"stop_reason": message["stop_reason"], "stop_sequence": None}
    out.append(
        event(
            "message_delta",
            {"delta": stop, "usage": {"output_tokens": message["usage"]["output_tokens"]}},
        )
    )
    out.append(event("message_stop", {}))
    return "".join(out).encode()


class _QuietServer(ThreadingHTTPServer):
    daemon_threads = True
    # The default listen backlog of 5 makes the kernel drop connection
    # attempts when many workers call at once; the client then retries its
    # SYN a second later, which would show up as fake LLM latency.
    request_queue_size = 256

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._open: set[socket.socket] = set()
        self._open_lock = threading.Lock()

    def process_request(self, request: Any, client_address: Any) -> None:
        with self._open_lock:
            self._open.add(request)
        super().process_request(request, client_address)

    def shutdown_request(self, request: Any) -> None:
        with self._open_lock:
            self._open.discard(request)
        super().shutdown_request(request)

    def close_connections(self) -> None:
        with self._open_lock:
            open_now = list(self._open)
        for connection in open_now:
            with contextlib.suppress(OSError):  # the client closed it already
                connection.shutdown(socket.SHUT_RDWR)

    def handle_error(self, request: Any, client_address: Any) -> None:
        # A client that timed out closes its socket before a delayed reply is
        # written; that broken pipe is expected, not worth a traceback.
        pass


def _make_handler(server: FakeAnthropicServer) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        # HTTP/1.1: connections stay open between calls, as the real API's
        # do, and the SDK's pool reuses them (every reply has a length).
        protocol_version = "HTTP/1.1"
        # TCP_NODELAY, as real servers set it: a reply's headers and body go
        # out in two writes, and on a kept-alive connection Nagle's algorithm
        # held the body back until the client's delayed ACK (40 ms a call).
        disable_nagle_algorithm = True

        def do_POST(self) -> None:
            length = int(self.headers.get("content-length") or 0)
            raw = self.rfile.read(length)
            headers = {k.lower(): v for k, v in self.headers.items()}
            if self.path.split("?")[0] != server.route:
                self._send(*server.error_reply(404, f"no route {self.path}"))
                return
            try:
                body = json.loads(raw)
            except ValueError:
                self._send(*server.error_reply(400, "body is not valid JSON"))
                return
            if not isinstance(body, dict):
                self._send(*server.error_reply(400, "body must be a JSON object"))
                return
            self._send(*server.respond(body, headers))

        def _send(self, status: int, headers: dict[str, str], payload: bytes) -> None:
            self.send_response(status)
            for name, value in headers.items():
                self.send_header(name, value)
            self.send_header("content-length", str(len(payload)))
            self.end_headers()
            self.wfile.write(payload)

        def log_message(self, format: str, *args: Any) -> None:
            pass  # keep test output clean

    return Handler
