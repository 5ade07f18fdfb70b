"""A session's server for ``benchmarks/proxy.py``, in a process of its own: a small GET
(``/sessions/<id>/small``, 2 bytes) and a WebSocket echo (``/sessions/<id>/ws``), on aiohttp.

Usage: ``python benchmarks/_session_app.py PORT``; it prints ``ready`` once it listens.
"""

from __future__ import annotations

import sys

from aiohttp import WSMsgType, web


async def small(request: web.Request) -> web.Response:
    return web.Response(body=b"ok", content_type="text/plain")


async def echo(request: web.Request) -> web.WebSocketResponse:
    ws = web.WebSocketResponse()
    await ws.prepare(request)
    async for message in ws:
        if message.type is WSMsgType.TEXT:
            await ws.send_str(message.data)
        elif message.type is WSMsgType.BINARY:
            await ws.send_bytes(message.data)
    return ws


def main() -> None:
    app = web.Application()
    app.router.add_get("/sessions/{job}/small", small)
    app.router.add_get("/sessions/{job}/ws", echo)
    web.run_app(app, host="127.0.0.1", port=int(sys.argv[1]), print=lambda *_: print("ready", flush=True))


if __name__ == "__main__":
    main()
