"""uvicorn's HTTP protocol with a response's writes sent to the socket together.

uvicorn writes a response's status line and headers to the transport as the
app sends ``http.response.start``, and its body as it sends
``http.response.body``: two ``send`` system calls, and two TCP segments on
the way to the client, for the answer of every request (a gateway turn
makes three). The transport writes each at once (``uvloop``'s write tries
the socket before it returns), with the interpreter's lock held: the
``send`` calls were ~5% of ``lcm serve``'s lock-holding time under a
gateway's load.

:class:`CoalescingHttpToolsProtocol` gives uvicorn a transport whose
``write`` gathers what is written in one step of the event loop and hands
it to the real transport once, at the end of that step (``call_soon``):
the headers and body of a response go out in one call. The bytes and their
order are the same; anything that ends the connection (``close``,
``write_eof``, ``abort`` drops what is pending as a transport does) sends
what is pending first.
"""

from __future__ import annotations

import asyncio
from typing import Any

from uvicorn.protocols.http.httptools_impl import HttpToolsProtocol


class CoalescingTransport:
    """A transport whose writes within one event-loop step reach the socket in one call."""

    def __init__(self, transport: asyncio.Transport, loop: asyncio.AbstractEventLoop) -> None:
        self._transport = transport
        self._loop = loop
        self._pending: list[bytes] = []

    def write(self, data: bytes | bytearray | memoryview) -> None:
        if not self._pending:
            self._loop.call_soon(self.flush)
        self._pending.append(bytes(data))

    def writelines(self, lines: Any) -> None:
        for data in lines:
            self.write(data)

    def flush(self) -> None:
        """Hand what is pending to the real transport (it drops it once closing, as before)."""
        if not self._pending:
            return
        data = self._pending[0] if len(self._pending) == 1 else b"".join(self._pending)
        self._pending.clear()
        if not self._transport.is_closing():
            self._transport.write(data)

    def close(self) -> None:
        self.flush()
        self._transport.close()

    def write_eof(self) -> None:
        self.flush()
        self._transport.write_eof()

    def abort(self) -> None:
        self._pending.clear()
        self._transport.abort()

    def get_write_buffer_size(self) -> int:
        return sum(map(len, self._pending)) + self._transport.get_write_buffer_size()

    def __getattr__(self, name: str) -> Any:
        # Everything else (extra info, reading, flow control) is the real transport's.
        return getattr(self._transport, name)


class CoalescingHttpToolsProtocol(HttpToolsProtocol):
    """uvicorn's ``httptools`` protocol on a :class:`CoalescingTransport` (``http=`` of uvicorn)."""

    def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
        coalescing: Any = CoalescingTransport(transport, self.loop)
        super().connection_made(coalescing)
