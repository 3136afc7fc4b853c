"""A TCP proxy in front of a real server that can be told to hang.

In ``forward`` mode each connection is piped to the server; in ``hang`` mode
connections are accepted and never answered: a hung server, which is worse
for a client than a down one (a refused connection fails at once, a hung one
costs the client its whole timeout). Switching modes drops the connections
open at that moment, so a kept-alive connection cannot slip past the new mode.
"""

from __future__ import annotations

import contextlib
import socket
import threading
from typing import Literal

Mode = Literal["forward", "hang"]


class HangingProxy:
    def __init__(self, upstream_host: str, upstream_port: int) -> None:
        self._upstream = (upstream_host, upstream_port)
        self._listener = socket.create_server(("127.0.0.1", 0))
        self._mode: Mode = "forward"
        self._sockets: set[socket.socket] = set()
        self._lock = threading.Lock()  # guards _sockets and _mode against the accept thread
        self._closed = False
        self._thread = threading.Thread(target=self._accept, name="hanging-proxy", daemon=True)
        self._thread.start()

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self._listener.getsockname()[1]}"

    def set_mode(self, mode: Mode) -> None:
        with self._lock:
            self._mode = mode
            doomed, self._sockets = self._sockets, set()
        for sock in doomed:
            _close(sock)

    def close(self) -> None:
        self._closed = True
        self.set_mode("hang")
        _close(self._listener)

    def __enter__(self) -> HangingProxy:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def _accept(self) -> None:
        while not self._closed:
            try:
                client, _ = self._listener.accept()
            except OSError:
                return
            with self._lock:
                self._sockets.add(client)
                mode = self._mode
            if mode == "hang":
                continue  # held open, never read from or answered
            try:
                upstream = socket.create_connection(self._upstream, timeout=5)
            except OSError:
                _close(client)
                continue
            upstream.settimeout(None)
            with self._lock:
                self._sockets.add(upstream)
            for source, sink in ((client, upstream), (upstream, client)):
                threading.Thread(target=_pipe, args=(source, sink), daemon=True).start()


def _pipe(source: socket.socket, sink: socket.socket) -> None:
    try:
        while chunk := source.recv(65536):
            sink.sendall(chunk)
    except OSError:
        pass
    finally:
        _close(source)
        _close(sink)


def _close(sock: socket.socket) -> None:
    with contextlib.suppress(OSError):
        sock.shutdown(socket.SHUT_RDWR)
    sock.close()
