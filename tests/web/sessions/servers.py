"""The real servers of the proxy's tests: a session's app server (aiohttp, with the
endpoints the tests need) and the portal itself (``quartermaster.asgi`` under uvicorn),
each on a free port of 127.0.0.1, each in a thread with its own event loop."""

from __future__ import annotations

import asyncio
import hashlib
import socket
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import uvicorn
from aiohttp import WSMsgType, web

CHUNK = 1024 * 1024


def wait_for(condition: Callable[[], bool], *, timeout: float = 30.0, what: str) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        time.sleep(0.01)


@dataclass
class AppServer:
    """A session's server. ``requests`` holds each request's headers as it saw them;
    ``received`` counts the bytes of the upload being read; ``release`` lets a held
    download go on, and ``held_out`` says a download went on without it (after a minute)."""

    port: int = 0
    requests: list[dict[str, Any]] = field(default_factory=list)
    received: int = 0
    release: threading.Event = field(default_factory=threading.Event)
    held_out: bool = False

    def routes(self) -> web.Application:
        app = web.Application(client_max_size=0)
        app.router.add_route("*", "/sessions/{job}/echo", self.echo)
        app.router.add_post("/sessions/{job}/upload", self.upload)
        app.router.add_get("/sessions/{job}/download", self.download)
        app.router.add_get("/sessions/{job}/cookies", self.cookies)
        app.router.add_get("/sessions/{job}/redirect", self.redirect)
        app.router.add_get("/sessions/{job}/ws", self.websocket)
        app.router.add_get("/sessions/{job}/ws-once", self.websocket_once)
        return app

    def record(self, request: web.Request) -> None:
        self.requests.append({"path": request.path_qs, "headers": request.headers.copy()})

    async def echo(self, request: web.Request) -> web.Response:
        self.record(request)
        body = await request.read()
        return web.json_response({"method": request.method, "path": request.path_qs, "body": body.decode()})

    async def upload(self, request: web.Request) -> web.Response:
        """Reads the body as it comes: ``received`` grows while the client still sends."""
        self.record(request)
        digest, self.received = hashlib.sha256(), 0
        async for chunk in request.content.iter_chunked(64 * 1024):
            digest.update(chunk)
            self.received += len(chunk)
        return web.json_response({"bytes": self.received, "sha256": digest.hexdigest()})

    async def download(self, request: web.Request) -> web.StreamResponse:
        """``chunks`` MiB of ``x``: the first at once, the rest once ``release`` is set."""
        self.record(request)
        response = web.StreamResponse(headers={"Content-Type": "application/octet-stream"})
        await response.prepare(request)
        await response.write(b"x" * CHUNK)
        deadline = time.monotonic() + 60
        while not self.release.is_set() and time.monotonic() < deadline:
            await asyncio.sleep(0.01)
        self.held_out = not self.release.is_set()
        for _ in range(int(request.query["chunks"]) - 1):
            await response.write(b"x" * CHUNK)
        await response.write_eof()
        return response

    async def cookies(self, request: web.Request) -> web.Response:
        job = request.match_info["job"]
        response = web.Response(text="cookies")
        for value in (
            "sessionid=from-the-app; Path=/",
            "csrftoken=from-the-app; Path=/",
            "everywhere=1; Path=/",
            "nopath=1",
            f"scoped=1; Path=/sessions/{job}/lab",
            f"domain=1; Domain=example.org; Path=/sessions/{job}/",
            f"sneaky=1; Path=/sessions/{job}/../../",
        ):
            response.headers.add("Set-Cookie", value)
        response.headers["Service-Worker-Allowed"] = "/"
        return response

    async def redirect(self, request: web.Request) -> web.Response:
        job = request.match_info["job"]
        raise web.HTTPFound(f"http://127.0.0.1:{self.port}/sessions/{job}/lab")

    async def websocket(self, request: web.Request) -> web.WebSocketResponse:
        self.record(request)
        ws = web.WebSocketResponse(protocols=("v1.kernel.websocket.jupyter.org",))
        await ws.prepare(request)
        async for message in ws:
            if message.type is WSMsgType.TEXT:
                await ws.send_str(message.data)
            elif message.type is WSMsgType.BINARY:
                await ws.send_bytes(message.data)
        return ws

    async def websocket_once(self, request: web.Request) -> web.WebSocketResponse:
        """Answers one message, then closes with code 4001 (a kernel that shut down)."""
        ws = web.WebSocketResponse()
        await ws.prepare(request)
        message = await ws.receive()
        await ws.send_str(f"bye {message.data}")
        await ws.close(code=4001, message=b"kernel shut down")
        return ws


class Background:
    """An event loop in a daemon thread, for a server to run on."""

    def __init__(self) -> None:
        self.loop = asyncio.new_event_loop()
        self.thread = threading.Thread(target=self.loop.run_forever, daemon=True)
        self.thread.start()

    def run(self, coroutine: Any) -> Any:
        return asyncio.run_coroutine_threadsafe(coroutine, self.loop).result(timeout=60)

    def stop(self) -> None:
        self.loop.call_soon_threadsafe(self.loop.stop)
        self.thread.join(timeout=30)


def free_socket() -> socket.socket:
    sock = socket.socket()
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind(("127.0.0.1", 0))
    return sock


def start_app_server(server: AppServer, background: Background) -> web.AppRunner:
    async def start() -> web.AppRunner:
        runner = web.AppRunner(server.routes())
        await runner.setup()
        sock = free_socket()
        server.port = sock.getsockname()[1]
        await web.SockSite(runner, sock).start()
        return runner

    return background.run(start())


class Portal:
    """``quartermaster.asgi.application`` under a real uvicorn, in a thread."""

    def __init__(self) -> None:
        sock = free_socket()
        self.port = sock.getsockname()[1]
        self.url = f"http://127.0.0.1:{self.port}"
        self.server = uvicorn.Server(
            uvicorn.Config("quartermaster.asgi:application", lifespan="on", log_level="warning", ws="websockets-sansio")
        )
        self.thread = threading.Thread(target=self.server.run, kwargs={"sockets": [sock]}, daemon=True)
        self.thread.start()
        wait_for(lambda: self.server.started, what="uvicorn to start")

    def stop(self) -> None:
        self.server.should_exit = True
        self.thread.join(timeout=30)
