"""The proxy's own short answers (a session starting, ended, not the visitor's...), as
ASGI responses: one small page each, and the redirect to the login page."""

from __future__ import annotations

from collections.abc import Awaitable, Callable, MutableMapping
from typing import Any
from urllib.parse import urlencode

from django.conf import settings
from django.template.loader import render_to_string

from web.sessions.access import Verdict

Send = Callable[[MutableMapping[str, Any]], Awaitable[None]]

#: The researcher's pages of sessions (issue 28's design: ``/interactive/``).
SESSIONS_PAGE = "/interactive/"

#: status, title, explanation; for every verdict but PASS and LOGIN.
ANSWERS: dict[Verdict, tuple[int, str, str]] = {
    Verdict.FORBIDDEN: (403, "Not your session", "This session belongs to another user: only its owner can open it."),
    Verdict.NOT_FOUND: (404, "No such session", "There is no interactive session at this address."),
    Verdict.STARTING: (
        503,
        "The session is starting",
        "Its job is queued or its server is not ready yet. This page can be reloaded in a few seconds.",
    ),
    Verdict.ENDED: (410, "The session has ended", "Its job has ended, and its server with it. Launch a new session."),
    Verdict.REFUSED: (
        502,
        "The session cannot be reached",
        "Its server reported an address the portal does not connect to. An administrator can tell why.",
    ),
    Verdict.UNAVAILABLE: (
        503,
        "Unavailable for a moment",
        "The portal cannot reach its database right now (a restart, most likely). "
        "This page can be reloaded in a few seconds.",
    ),
}
BAD_HOST = (400, "Bad request", "This host name is not one the portal answers to.")
UNREACHABLE = (502, "The session's server does not answer", "It may have stopped or be restarting. Try again shortly.")


async def send_page(send: Send, status: int, title: str, explanation: str) -> None:
    """A short HTML page with ``status``; a 503 says when to try again."""
    body = render_to_string(
        "web/sessions/answer.html", {"title": title, "explanation": explanation, "back_url": SESSIONS_PAGE}
    ).encode()
    headers = [
        (b"content-type", b"text/html; charset=utf-8"),
        (b"content-length", str(len(body)).encode()),
        (b"cache-control", b"no-store"),
    ]
    if status == 503:
        headers.append((b"retry-after", b"5"))
    await send({"type": "http.response.start", "status": status, "headers": headers})
    await send({"type": "http.response.body", "body": body})


async def send_verdict(send: Send, verdict: Verdict) -> None:
    await send_page(send, *ANSWERS[verdict])


async def send_redirect(send: Send, location: str) -> None:
    await send(
        {
            "type": "http.response.start",
            "status": 302,
            "headers": [
                (b"location", location.encode("latin-1")),
                (b"content-length", b"0"),
                (b"cache-control", b"no-store"),
            ],
        }
    )
    await send({"type": "http.response.body", "body": b""})


def login_url(next_path: str) -> str:
    """The login page, coming back to ``next_path`` after."""
    return f"{settings.LOGIN_URL}?{urlencode({'next': next_path})}"
