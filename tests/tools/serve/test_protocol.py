"""The worker's HTTP protocol: an answer's head and body leave in one write (ragspine_tools/serve/protocol.py)."""

from __future__ import annotations

import asyncio

import pytest

pytest.importorskip("httptools", reason="the coalescing protocol is uvicorn's httptools one")

from ragspine_tools.serve.protocol import CoalescingHttpToolsProtocol, CoalescingTransport  # noqa: E402


class Recorder:
    """A transport's write side, as the loop's own would see it: each write, and whether it is closed."""

    def __init__(self) -> None:
        self.writes: list[bytes] = []
        self.closed = False

    def write(self, data: bytes) -> None:
        assert not self.closed, "written after close"
        self.writes.append(data)

    def close(self) -> None:
        self.closed = True

    def is_closing(self) -> bool:
        return self.closed

    def get_extra_info(self, name: str, default=None):
        return {"peername": ("127.0.0.1", 5)}.get(name, default)


def test_writes_of_one_turn_leave_as_one_in_order():
    async def go():
        rec = Recorder()
        t = CoalescingTransport(rec, asyncio.get_running_loop())
        t.write(b"HTTP/1.1 200 OK\r\ncontent-length: 2\r\n\r\n")
        t.write(memoryview(b"{}"))
        assert rec.writes == []  # nothing sent within the turn
        await asyncio.sleep(0)
        first = list(rec.writes)
        t.write(b"next")
        await asyncio.sleep(0)
        return rec, first, t

    rec, first, t = asyncio.run(go())
    assert first == [b"HTTP/1.1 200 OK\r\ncontent-length: 2\r\n\r\n{}"]
    assert rec.writes == [first[0], b"next"]
    assert t.get_extra_info("peername") == ("127.0.0.1", 5)  # the rest is the transport's own


def test_close_sends_what_is_pending_first_and_nothing_after():
    async def go():
        rec = Recorder()
        t = CoalescingTransport(rec, asyncio.get_running_loop())
        t.write(b"head")
        t.write(b"body")
        t.close()
        t.write(b"late")  # e.g. a write racing a close: never reaches a closed transport
        await asyncio.sleep(0)
        return rec

    rec = asyncio.run(go())
    assert rec.writes == [b"headbody"] and rec.closed


def test_the_service_runs_on_it():
    from ragspine_tools.serve.cli import _http_protocol

    assert _http_protocol() is CoalescingHttpToolsProtocol


def test_without_it_serve_falls_back_to_uvicorns_own_protocol():
    """If a uvicorn release moves the class :mod:`ragspine_tools.serve.protocol` subclasses, the
    import fails and ``ragspine serve`` runs on uvicorn's own protocol: a real server answers."""
    import subprocess
    import sys
    import textwrap

    code = textwrap.dedent('''
        import http.client, socket, sys, threading, time
        sys.modules["ragspine_tools.serve.protocol"] = None  # the import of the subclass fails
        from ragspine_tools.serve.cli import _http_protocol
        choice = _http_protocol()
        import uvicorn
        from starlette.applications import Starlette
        from starlette.responses import PlainTextResponse
        from starlette.routing import Route

        async def hello(request):
            return PlainTextResponse("ok")

        sock = socket.socket()
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
        sock.close()
        server = uvicorn.Server(uvicorn.Config(Starlette(routes=[Route("/", hello)]), host="127.0.0.1", port=port,
                                               http=choice, log_level="warning", lifespan="off"))
        thread = threading.Thread(target=server.run, daemon=True)
        thread.start()
        deadline = time.monotonic() + 20
        while not server.started and time.monotonic() < deadline:
            time.sleep(0.05)
        conn = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
        conn.request("GET", "/")
        answer = conn.getresponse()
        print(choice, answer.status, answer.read().decode())
        server.should_exit = True
        thread.join(10)
    ''')
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=90)
    assert out.stdout.split() == ["auto", "200", "ok"], out.stderr[-2000:]
