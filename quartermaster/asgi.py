"""ASGI entry point: the whole portal, served by uvicorn (``make demo``; gunicorn's
uvicorn workers in production).

``/sessions/<job id>/...``, HTTP and WebSocket, goes to the interactive sessions' proxy
(``web.sessions.proxy``); every other HTTP request to Django. A WebSocket anywhere else is
refused: the portal has none of its own. The lifespan protocol closes the proxy's upstream
connection pool at shutdown.
"""

from __future__ import annotations

import os
from collections.abc import Awaitable, Callable, Mapping, MutableMapping
from typing import Any

from django.core.asgi import get_asgi_application

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "quartermaster.settings")
django_application = get_asgi_application()  # sets Django up before the proxy's imports

from web.sessions.proxy import SessionProxy  # noqa: E402

Scope = dict[str, Any]
Receive = Callable[[], Awaitable[MutableMapping[str, Any]]]
Send = Callable[[Mapping[str, Any]], Awaitable[None]]

session_proxy = SessionProxy()


def is_session_path(path: str) -> bool:
    return path == "/sessions" or path.startswith("/sessions/")


async def application(scope: Scope, receive: Receive, send: Send) -> None:
    if scope["type"] == "lifespan":
        await lifespan(receive, send)
    elif scope["type"] in ("http", "websocket") and is_session_path(scope["path"]):
        await session_proxy(scope, receive, send)
    elif scope["type"] == "websocket":
        await receive()
        await send({"type": "websocket.close", "code": 1008})
    else:
        await django_application(scope, receive, send)


async def lifespan(receive: Receive, send: Send) -> None:
    while True:
        message = await receive()
        if message["type"] == "lifespan.startup":
            await send({"type": "lifespan.startup.complete"})
        elif message["type"] == "lifespan.shutdown":
            await session_proxy.close()
            await send({"type": "lifespan.shutdown.complete"})
            return
