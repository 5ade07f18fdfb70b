"""The proxy to interactive sessions: ``/sessions/<job id>/...``, HTTP and WebSocket, an
ASGI application (``quartermaster.asgi`` routes the path here, everything else to Django).

Why aiohttp for the upstream side: one maintained client (aio-libs) does both halves a
notebook needs, streamed HTTP (request bodies from an async iterator, responses read in
chunks with back-pressure, no decompression so bytes and ``Content-Length`` pass as
they are) and WebSocket client connections (subprotocols, ping/pong, close codes), over
one connection pool; httpx would need a second library (websockets) with its own
connection handling for the WebSocket half. No socket code is written here.

For each request:
0. the ``Host`` is one of ``ALLOWED_HOSTS``, as Django requires of every page;
1. the path names a session (``/sessions/<digits>/``; ``/sessions/<id>`` is redirected
   to the slash form);
2. a WebSocket handshake must come from the portal's own origin (:func:`same_origin`);
3. the portal's session cookie is resolved to a decision (:mod:`web.sessions.access`),
   passes cached a few seconds: anonymous -> the login page (a WebSocket is refused),
   not the owner -> 403, starting -> 503, ended -> 410, the database unreachable -> 503;
4. the request is forwarded to ``http://host:port`` + the same path and query, with the
   app's secret and without the portal's cookies (:mod:`web.sessions.headers`), both
   bodies streamed; WebSocket messages are relayed both ways until either side closes,
   and the decision is re-checked every few seconds so a logout or an ended session
   also closes an open WebSocket;
5. the session's ``last_activity_at`` is written at most once a minute.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import re
from collections.abc import AsyncIterator, Awaitable, Callable, MutableMapping
from typing import Any
from urllib.parse import quote

import aiohttp
from asgiref.sync import sync_to_async
from django.conf import settings
from django.http.cookie import parse_cookie
from django.utils import timezone
from yarl import URL

from common.outages import outage
from web.sessions import access
from web.sessions.access import ActivityGate, Decision, DecisionCache, Upstream, Verdict
from web.sessions.answers import BAD_HOST, UNREACHABLE, login_url, send_page, send_redirect, send_verdict
from web.sessions.headers import allowed_host, downstream_response_headers, same_origin, upstream_request_headers

log = logging.getLogger(__name__)

Scope = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[MutableMapping[str, Any]]]
Send = Callable[[MutableMapping[str, Any]], Awaitable[None]]

_SESSION_PATH = re.compile(r"/sessions/(\d{1,18})(/.*)?", re.DOTALL)
#: Connecting to a session's server; once connected, a response may take as long as it takes
#: (long polls, big downloads).
UPSTREAM_TIMEOUT = aiohttp.ClientTimeout(total=None, connect=10, sock_read=None)
#: The largest WebSocket message relayed (uvicorn's own default for what it accepts).
WEBSOCKET_MAX_MESSAGE = 16 * 1024 * 1024
#: How much of a response body is read before it is handed on.
CHUNK = 64 * 1024


class ClientGone(Exception):
    """The browser went away while its request body was being read."""


class SessionProxy:
    """The ASGI application of ``/sessions/``. One per process; it holds the upstream
    connection pool (one per event loop), the decision cache and the activity gate."""

    def __init__(self, decisions: DecisionCache | None = None, activity: ActivityGate | None = None) -> None:
        self.decisions = DecisionCache() if decisions is None else decisions
        self.activity = ActivityGate() if activity is None else activity
        self._client: aiohttp.ClientSession | None = None
        self._client_loop: asyncio.AbstractEventLoop | None = None

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if not allowed_host(scope["headers"]):
            await _refuse_host(scope, receive, send)
        elif scope["type"] == "http":
            await self.http(scope, receive, send)
        elif scope["type"] == "websocket":
            await self.websocket(scope, receive, send)

    async def close(self) -> None:
        """Close the upstream connection pool (at the server's shutdown)."""
        if self._client is not None:
            await self._client.close()
            self._client = None

    # --- HTTP ------------------------------------------------------------------------

    async def http(self, scope: Scope, receive: Receive, send: Send) -> None:
        match = _SESSION_PATH.fullmatch(scope["path"])
        if match is None:
            await send_verdict(send, Verdict.NOT_FOUND)
            return
        job_id = int(match.group(1))
        if match.group(2) is None:
            await send_redirect(send, f"/sessions/{job_id}/" + _query_suffix(scope))
            return
        cookie = _session_cookie(scope)
        decision = await self.decide(cookie, job_id)
        if decision.verdict is Verdict.LOGIN:
            await send_redirect(send, login_url(scope["path"] + _query_suffix(scope)))
            return
        if decision.upstream is None:
            await send_verdict(send, decision.verdict)
            return
        await self.noted(job_id)
        try:
            await self.forward_http(scope, receive, send, job_id, decision.upstream)
        except ClientGone:
            return

    async def forward_http(self, scope: Scope, receive: Receive, send: Send, job_id: int, upstream: Upstream) -> None:
        """Steps: 1. open the upstream request, the body streamed from ``receive``; 2. pass
        its status and filtered headers; 3. pass its body chunk by chunk (ASGI's ``send``
        waits while the browser is slow, so memory stays flat), stopping early if the
        browser goes away. A server that does not answer: 502; one that fails half way
        through its answer: the answer is cut short."""
        headers = upstream_request_headers(
            scope["headers"], secret=upstream.secret, client=_client_address(scope), scheme=scope.get("scheme", "http")
        )
        body = _request_body(receive) if _has_body(scope["headers"]) else None
        origin = f"http://{_url_host(upstream.host)}:{upstream.port}"
        started = False
        try:
            async with self.client().request(
                scope["method"],
                _upstream_url(upstream, scope),
                headers=headers,
                data=body,
                allow_redirects=False,
                skip_auto_headers=("Accept-Encoding", "User-Agent", "Content-Type"),
            ) as response:
                await send(
                    {
                        "type": "http.response.start",
                        "status": response.status,
                        "headers": downstream_response_headers(
                            response.raw_headers, prefix=f"/sessions/{job_id}/", upstream_origin=origin
                        ),
                    }
                )
                started = True
                await _relay_body(response, receive if body is None else None, send)
        except (TimeoutError, aiohttp.ClientError):
            # Before the answer began: a page that says so. After: the body is cut short
            # (returning without its end makes the server close the connection).
            if not started:
                await send_page(send, *UNREACHABLE)

    # --- WebSocket -----------------------------------------------------------------

    async def websocket(self, scope: Scope, receive: Receive, send: Send) -> None:
        """Refused (closed before the handshake is accepted, which the browser sees as a
        failed connection, HTTP 403) unless it comes from the portal's origin and the
        decision is a pass; then relayed until either side closes."""
        if (await receive())["type"] != "websocket.connect":
            return
        match = _SESSION_PATH.fullmatch(scope["path"])
        cookie = _session_cookie(scope)
        if match is None or match.group(2) is None or not same_origin(scope["headers"]):
            await send({"type": "websocket.close", "code": 1008})
            return
        job_id = int(match.group(1))
        decision = await self.decide(cookie, job_id)
        if decision.upstream is None:
            await send({"type": "websocket.close", "code": 1008})
            return
        await self.noted(job_id)
        headers = upstream_request_headers(
            scope["headers"],
            secret=decision.upstream.secret,
            client=_client_address(scope),
            scheme={"wss": "https"}.get(scope.get("scheme", "ws"), "http"),
            websocket=True,
        )
        try:
            upstream = await self.client().ws_connect(
                _upstream_url(decision.upstream, scope),
                headers=headers,
                protocols=scope.get("subprotocols") or (),
                max_msg_size=WEBSOCKET_MAX_MESSAGE,
                autoclose=False,
            )
        except (TimeoutError, aiohttp.ClientError):
            await send({"type": "websocket.close", "code": 1011})
            return
        async with upstream:
            await send({"type": "websocket.accept", "subprotocol": upstream.protocol})
            await self.relay_websocket(receive, send, upstream, job_id, cookie)

    async def relay_websocket(
        self, receive: Receive, send: Send, upstream: aiohttp.ClientWebSocketResponse, job_id: int, cookie: str
    ) -> None:
        """Messages both ways until either side closes or the decision stops being a pass;
        then both sides are closed."""
        tasks = [
            asyncio.ensure_future(self._browser_to_server(receive, upstream, job_id)),
            asyncio.ensure_future(_server_to_browser(upstream, send)),
            asyncio.ensure_future(self._while_allowed(cookie, job_id)),
        ]
        try:
            done, _ = await asyncio.wait(tasks, return_when=asyncio.FIRST_COMPLETED)
        finally:
            for task in tasks:
                task.cancel()
            await asyncio.gather(*tasks, return_exceptions=True)
        close_code = _closable(upstream.close_code) if tasks[1] in done else 1008 if tasks[2] in done else 1000
        if not upstream.closed:
            with contextlib.suppress(Exception):
                await upstream.close(code=close_code)
        if tasks[0] not in done:  # the browser is still there
            with contextlib.suppress(Exception):
                await send({"type": "websocket.close", "code": close_code})

    async def _browser_to_server(
        self, receive: Receive, upstream: aiohttp.ClientWebSocketResponse, job_id: int
    ) -> None:
        while True:
            message = await receive()
            if message["type"] == "websocket.disconnect":
                return
            if message.get("text") is not None:
                await upstream.send_str(message["text"])
            else:
                await upstream.send_bytes(message.get("bytes") or b"")
            await self.noted(job_id)

    async def _while_allowed(self, cookie: str, job_id: int) -> None:
        """Returns once the browser may no longer reach the session (checked each time a
        cached pass expires)."""
        while True:
            await asyncio.sleep(self.decisions.seconds)
            if (await self.decide(cookie, job_id)).verdict is not Verdict.PASS:
                return

    # --- Shared ----------------------------------------------------------------------

    async def decide(self, cookie: str, job_id: int) -> Decision:
        """:func:`access.decide`, a pass reused for a few seconds (:class:`DecisionCache`)."""
        if not cookie:
            return Decision(Verdict.LOGIN)
        key = (cookie, job_id)
        decision = self.decisions.get(key)
        if decision is None:
            try:
                decision = await sync_to_async(access.decide)(cookie, job_id)
            except Exception as exc:
                if outage(exc) is None:
                    raise  # a defect: a 500, as on every page
                log.warning("session %s: the database is unavailable: %s", job_id, exc)
                return Decision(Verdict.UNAVAILABLE)
            if decision.verdict is Verdict.PASS:
                self.decisions.put(key, decision)
        return decision

    async def noted(self, job_id: int) -> None:
        """The session was used now: its ``last_activity_at``, at most once a minute."""
        if self.activity.due(job_id):
            try:
                await sync_to_async(access.touch_activity)(job_id, timezone.now())
            except Exception as exc:
                if outage(exc) is None:
                    raise
                log.warning("session %s: activity not recorded, the database is unavailable: %s", job_id, exc)

    def client(self) -> aiohttp.ClientSession:
        """The upstream connection pool of the running event loop (made on first use)."""
        loop = asyncio.get_running_loop()
        if self._client is None or self._client.closed or self._client_loop is not loop:
            self._client_loop = loop
            self._client = aiohttp.ClientSession(
                timeout=UPSTREAM_TIMEOUT,
                auto_decompress=False,
                cookie_jar=aiohttp.DummyCookieJar(),  # the browser keeps cookies, never the proxy
                connector=aiohttp.TCPConnector(limit=0, ttl_dns_cache=60),
            )
        return self._client


async def _relay_body(response: aiohttp.ClientResponse, receive: Receive | None, send: Send) -> None:
    """The upstream body to the browser in chunks; with ``receive`` (the request body
    already read), stops as soon as the browser disconnects. A body of at most one
    chunk, by its ``Content-Length`` (most of a notebook's requests), goes in one message
    without the watch: it costs no more memory and saves two tasks per request."""
    if response.content_length is not None and response.content_length <= CHUNK:
        await send({"type": "http.response.body", "body": await response.read(), "more_body": False})
        return
    relay = asyncio.ensure_future(_send_chunks(response, send))
    if receive is None:
        await relay
        return
    gone = asyncio.ensure_future(_disconnected(receive))
    try:
        await asyncio.wait([relay, gone], return_when=asyncio.FIRST_COMPLETED)
    finally:
        gone.cancel()
        if not relay.done():
            relay.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await gone
        with contextlib.suppress(asyncio.CancelledError):
            await relay
    if relay.done() and not relay.cancelled() and relay.exception() is not None:
        raise relay.exception()  # type: ignore[misc]


async def _send_chunks(response: aiohttp.ClientResponse, send: Send) -> None:
    async for chunk in response.content.iter_chunked(CHUNK):
        await send({"type": "http.response.body", "body": chunk, "more_body": True})
    await send({"type": "http.response.body", "body": b"", "more_body": False})


async def _disconnected(receive: Receive) -> None:
    while (await receive())["type"] != "http.disconnect":
        pass


async def _request_body(receive: Receive) -> AsyncIterator[bytes]:
    while True:
        message = await receive()
        if message["type"] == "http.disconnect":
            raise ClientGone
        chunk = message.get("body", b"")
        if chunk:
            yield chunk
        if not message.get("more_body", False):
            return


async def _server_to_browser(upstream: aiohttp.ClientWebSocketResponse, send: Send) -> None:
    async for message in upstream:
        if message.type is aiohttp.WSMsgType.TEXT:
            await send({"type": "websocket.send", "text": message.data})
        elif message.type is aiohttp.WSMsgType.BINARY:
            await send({"type": "websocket.send", "bytes": message.data})
        elif message.type in (aiohttp.WSMsgType.CLOSE, aiohttp.WSMsgType.ERROR):
            return


async def _refuse_host(scope: Scope, receive: Receive, send: Send) -> None:
    if scope["type"] == "websocket":
        await receive()
        await send({"type": "websocket.close", "code": 1008})
    else:
        await send_page(send, *BAD_HOST)


def _closable(code: int | None) -> int:
    """A close code the browser may be sent (1005/1006 and friends are reserved)."""
    if code is not None and (code in (1000, 1001, 1002, 1003, 1007, 1008, 1009, 1010, 1011) or 3000 <= code <= 4999):
        return code
    return 1000


def _has_body(headers: list[tuple[bytes, bytes]]) -> bool:
    """HTTP/1.1: a request has a body only if it says so (RFC 9112 6.3)."""
    return any(name.lower() in (b"content-length", b"transfer-encoding") for name, _ in headers)


def _session_cookie(scope: Scope) -> str:
    for name, value in scope["headers"]:
        if name.lower() == b"cookie":
            found = parse_cookie(value.decode("latin-1")).get(settings.SESSION_COOKIE_NAME)
            if found:
                return found
    return ""


def _query_suffix(scope: Scope) -> str:
    query = scope.get("query_string", b"").decode("latin-1")
    return f"?{query}" if query else ""


def _client_address(scope: Scope) -> str:
    client = scope.get("client")
    return str(client[0]) if client else ""


def _url_host(host: str) -> str:
    return f"[{host}]" if ":" in host else host


def _upstream_url(upstream: Upstream, scope: Scope) -> URL:
    """``http://host:port`` + the request's path and query exactly as the browser sent
    them (``raw_path``: percent-escapes kept, so the server decodes them itself)."""
    raw_path = scope.get("raw_path") or b""
    if not raw_path.startswith(b"/sessions/"):  # a server that gave none, or another form of target
        raw_path = quote(scope["path"]).encode()
    target = raw_path.decode("latin-1") + _query_suffix(scope)
    return URL(f"http://{_url_host(upstream.host)}:{upstream.port}{target}", encoded=True)
