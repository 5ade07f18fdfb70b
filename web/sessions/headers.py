"""What crosses the proxy in headers, each way. The session's server is untrusted code:
it never sees the portal's credentials (its session, CSRF and language cookies, an API
token in ``Authorization``), and it cannot set the portal's cookies, place cookies on the
portal's other paths or widen a service worker's scope over the portal.

Headers are ASGI's: lists of ``(name, value)`` byte pairs, names lower case.
"""

from __future__ import annotations

from collections.abc import Iterable
from functools import lru_cache
from urllib.parse import urlsplit

from django.conf import settings
from django.http.request import split_domain_port, validate_host

Headers = list[tuple[bytes, bytes]]

#: RFC 9110 7.6.1's connection-specific fields (and ``proxy-connection``): for one hop only.
HOP_BY_HOP = frozenset(
    {
        b"connection",
        b"keep-alive",
        b"proxy-authenticate",
        b"proxy-authorization",
        b"proxy-connection",
        b"te",
        b"trailer",
        b"transfer-encoding",
        b"upgrade",
    }
)
#: Never forwarded to the session: credentials of the portal, and what the proxy sets itself.
REQUEST_DROPPED = frozenset(
    {b"authorization", b"expect", b"forwarded", b"x-forwarded-for", b"x-forwarded-host", b"x-forwarded-proto"}
)
#: Never passed back from the session: ``Service-Worker-Allowed`` would let a worker
#: registered under /sessions/<id>/ control every page of the portal; ``Clear-Site-Data``
#: would wipe the portal's own storage and cookies.
RESPONSE_DROPPED = frozenset({b"service-worker-allowed", b"clear-site-data"})
#: The WebSocket handshake's own fields: the client library makes its own.
WEBSOCKET_HANDSHAKE = frozenset(
    {b"sec-websocket-key", b"sec-websocket-version", b"sec-websocket-extensions", b"sec-websocket-protocol"}
)


def portal_cookie_names() -> frozenset[str]:
    """The cookies the portal itself sets: they stay between the browser and the portal."""
    return frozenset(
        {settings.SESSION_COOKIE_NAME, settings.CSRF_COOKIE_NAME, settings.LANGUAGE_COOKIE_NAME, "messages"}
    )


def connection_named(headers: Iterable[tuple[bytes, bytes]]) -> frozenset[bytes]:
    """The fields a ``Connection`` header names: hop-by-hop too (RFC 9110 7.6.1)."""
    named: set[bytes] = set()
    for name, value in headers:
        if name.lower() == b"connection":
            named.update(token.strip().lower() for token in value.split(b",") if token.strip())
    return frozenset(named)


def without_cookies(header: str, names: frozenset[str]) -> str:
    """A ``Cookie`` header's value without the cookies called ``names``."""
    kept = [pair.strip() for pair in header.split(";") if pair.split("=", 1)[0].strip() not in names and pair.strip()]
    return "; ".join(kept)


def upstream_request_headers(
    headers: Headers, *, secret: str | None, client: str, scheme: str, websocket: bool = False
) -> list[tuple[str, str]]:
    """The headers sent to the session's server for a request that came with ``headers``.

    Steps: 1. drop hop-by-hop fields, the portal's credentials and forwarding fields a
    client could forge (and a WebSocket handshake's own); 2. remove the portal's cookies;
    3. add ``Authorization: token <secret>`` when the app checks one; 4. say who asked
    (``X-Forwarded-For``/``-Proto``/``-Host``). ``Host`` and ``Origin`` pass unchanged, so
    a server that compares them (Jupyter's WebSocket check) sees the portal's origin.
    """
    dropped = HOP_BY_HOP | REQUEST_DROPPED | connection_named(headers) | (WEBSOCKET_HANDSHAKE if websocket else set())
    portal_cookies = portal_cookie_names()
    out: list[tuple[str, str]] = []
    host = ""
    for raw_name, raw_value in headers:
        name = raw_name.lower()
        if name in dropped:
            continue
        value = raw_value.decode("latin-1")
        if name == b"cookie":
            value = without_cookies(value, portal_cookies)
            if not value:
                continue
        if name == b"host":
            host = value
        out.append((name.decode("latin-1"), value))
    if secret is not None:
        out.append(("authorization", f"token {secret}"))
    out += [("x-forwarded-for", client), ("x-forwarded-proto", scheme)]
    if host:
        out.append(("x-forwarded-host", host))
    return out


def downstream_response_headers(
    headers: Iterable[tuple[bytes, bytes]], *, prefix: str, upstream_origin: str
) -> Headers:
    """The headers passed back to the browser from the session's server's ``headers``.

    Hop-by-hop fields and :data:`RESPONSE_DROPPED` are dropped, each ``Set-Cookie`` goes
    through :func:`confined_set_cookie` (``prefix`` is the session's ``/sessions/<id>/``),
    and a ``Location`` on the server's own address becomes a path on the portal's origin.
    """
    headers = list(headers)
    dropped = HOP_BY_HOP | RESPONSE_DROPPED | connection_named(headers)
    portal_cookies = portal_cookie_names()
    out: Headers = []
    for raw_name, value in headers:
        name = raw_name.lower()
        if name in dropped:
            continue
        if name == b"set-cookie":
            confined = confined_set_cookie(value.decode("latin-1"), prefix=prefix, forbidden=portal_cookies)
            if confined is None:
                continue
            value = confined.encode("latin-1")
        elif name == b"location" and value.decode("latin-1").startswith(upstream_origin + "/"):
            value = value[len(upstream_origin) :]
        out.append((name, value))
    return out


def confined_set_cookie(header: str, *, prefix: str, forbidden: frozenset[str]) -> str | None:
    """A ``Set-Cookie`` value kept within the session: ``None`` (dropped) for a cookie
    named as one of the portal's (``forbidden``); otherwise without ``Domain`` (host-only)
    and with its ``Path`` inside ``prefix`` (set to ``prefix`` when missing or outside)."""
    parts = [part.strip() for part in header.split(";")]
    name = parts[0].split("=", 1)[0].strip()
    if not name or "=" not in parts[0] or name in forbidden:
        return None
    attributes = []
    for attribute in parts[1:]:
        key = attribute.split("=", 1)[0].strip().lower()
        if key == "domain":
            continue
        if key == "path":
            path = attribute.split("=", 1)[1].strip() if "=" in attribute else ""
            if not path.startswith(prefix) or "/../" in path or path.endswith("/.."):
                continue
        attributes.append(attribute)
    if not any(attribute.split("=", 1)[0].strip().lower() == "path" for attribute in attributes):
        attributes.append(f"Path={prefix}")
    return "; ".join([parts[0], *attributes])


def same_origin(headers: Headers) -> bool:
    """Whether a WebSocket handshake comes from the portal's own pages (cross-site
    WebSocket hijacking: a browser sends the portal's cookie with a handshake any site
    starts, and only ``Origin`` tells them apart). No ``Origin`` at all: not a browser,
    so no hijacking; it still needs the login cookie. Also accepted: an origin in
    ``CSRF_TRUSTED_ORIGINS``, as the portal's forms accept it."""
    fields = {name.lower(): value.decode("latin-1") for name, value in headers}
    origin = fields.get(b"origin")
    if origin is None:
        return True
    if origin in settings.CSRF_TRUSTED_ORIGINS:
        return True
    host = fields.get(b"host", "")
    netloc = urlsplit(origin).netloc
    return bool(host) and netloc.lower() == host.lower()


def allowed_host(headers: Headers) -> bool:
    """Whether the ``Host`` header names one of ``ALLOWED_HOSTS``, with Django's own rules
    (``HttpRequest.get_host``: with ``DEBUG`` and none listed, localhost's names). A request
    with more than one ``Host`` is refused (RFC 9112, 3.2): httptools passes both on, and
    the proxy must not check one while the app reads the other."""
    hosts = [value.decode("latin-1") for name, value in headers if name.lower() == b"host"]
    return len(hosts) == 1 and _allowed_host(hosts[0], tuple(settings.ALLOWED_HOSTS), settings.DEBUG)


@lru_cache(maxsize=256)  # a browser sends one Host; Django's matching costs more than the proxy's own work
def _allowed_host(host: str, allowed: tuple[str, ...], debug: bool) -> bool:
    domain, _ = split_domain_port(host)
    if debug and not allowed:
        allowed = (".localhost", "127.0.0.1", "[::1]")
    return bool(domain) and validate_host(domain, allowed)
