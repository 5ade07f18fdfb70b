"""What crosses the proxy in headers: table-driven, no servers."""

from __future__ import annotations

import pytest

from web.sessions.headers import (
    allowed_host,
    confined_set_cookie,
    downstream_response_headers,
    same_origin,
    upstream_request_headers,
    without_cookies,
)

PREFIX = "/sessions/7/"
PORTAL = frozenset({"sessionid", "csrftoken"})


@pytest.mark.parametrize(
    ("set_cookie", "expected"),
    [
        ("_xsrf=abc; Path=/sessions/7/; HttpOnly", "_xsrf=abc; Path=/sessions/7/; HttpOnly"),
        ("_xsrf=abc", "_xsrf=abc; Path=/sessions/7/"),
        ("a=1; Path=/", "a=1; Path=/sessions/7/"),
        ("a=1; path=/sessions/77/", "a=1; Path=/sessions/7/"),
        ("a=1; Path=/sessions/7", "a=1; Path=/sessions/7/"),
        ("a=1; Path=/sessions/7/../../api/", "a=1; Path=/sessions/7/"),
        ("a=1; Domain=.example.org; Secure", "a=1; Secure; Path=/sessions/7/"),
        ("sessionid=evil; Path=/sessions/7/", None),
        ("csrftoken=evil", None),
        (" sessionid =evil", None),
        ("no-equals-sign", None),
    ],
    ids=[
        "inside its path",
        "no path: its path",
        "the whole portal",
        "another session",
        "no trailing slash",
        "dot-dot",
        "a domain",
        "the portal's session",
        "the portal's csrf",
        "spaced name",
        "not a cookie",
    ],
)
def test_a_cookie_the_app_sets_stays_within_its_session(set_cookie: str, expected: str | None) -> None:
    assert confined_set_cookie(set_cookie, prefix=PREFIX, forbidden=PORTAL) == expected


def test_the_portals_cookies_are_taken_out_of_the_cookie_header() -> None:
    assert without_cookies("sessionid=s; theme=dark;csrftoken=c; _xsrf=x", PORTAL) == "theme=dark; _xsrf=x"
    assert without_cookies("sessionid=s", PORTAL) == ""


def test_the_request_keeps_host_and_origin_and_loses_hop_by_hop_and_forged_forwarding() -> None:
    headers = upstream_request_headers(
        [
            (b"host", b"portal.example"),
            (b"origin", b"https://portal.example"),
            (b"connection", b"keep-alive, X-Secret-Hop"),
            (b"x-secret-hop", b"1"),
            (b"keep-alive", b"timeout=5"),
            (b"x-forwarded-for", b"6.6.6.6"),
            (b"proxy-authorization", b"Basic abc"),
            (b"authorization", b"Token portal-api-token"),
            (b"accept", b"text/html"),
        ],
        secret="s3cret",
        client="10.0.0.5",
        scheme="https",
    )

    assert headers == [
        ("host", "portal.example"),
        ("origin", "https://portal.example"),
        ("accept", "text/html"),
        ("authorization", "token s3cret"),
        ("x-forwarded-for", "10.0.0.5"),
        ("x-forwarded-proto", "https"),
        ("x-forwarded-host", "portal.example"),
    ]


def test_the_response_loses_hop_by_hop_and_what_would_reach_beyond_the_session() -> None:
    headers = downstream_response_headers(
        [
            (b"Content-Type", b"text/html"),
            (b"Transfer-Encoding", b"chunked"),
            (b"Service-Worker-Allowed", b"/"),
            (b"Clear-Site-Data", b'"*"'),
            (b"Location", b"http://10.1.2.3:20001/sessions/7/lab"),
            (b"Set-Cookie", b"sessionid=evil; Path=/"),
        ],
        prefix=PREFIX,
        upstream_origin="http://10.1.2.3:20001",
    )

    assert headers == [(b"content-type", b"text/html"), (b"location", b"/sessions/7/lab")]


@pytest.mark.parametrize(
    ("origin", "host", "allowed"),
    [
        ("https://portal.example", "portal.example", True),
        ("http://127.0.0.1:8000", "127.0.0.1:8000", True),
        ("https://PORTAL.example", "portal.example", True),
        ("https://evil.example", "portal.example", False),
        ("https://portal.example.evil.example", "portal.example", False),
        ("http://127.0.0.1:9999", "127.0.0.1:8000", False),
        ("null", "portal.example", False),
        (None, "portal.example", True),
    ],
    ids=["same", "same with port", "case", "cross-site", "suffix", "other port", "opaque", "no origin: not a browser"],
)
def test_a_websocket_handshake_must_come_from_the_portals_origin(origin: str | None, host: str, allowed: bool) -> None:
    headers = [(b"host", host.encode())] + ([(b"origin", origin.encode())] if origin else [])

    assert same_origin(headers) is allowed


def test_a_trusted_origin_is_accepted_as_the_portals_forms_accept_it(settings: object) -> None:
    settings.CSRF_TRUSTED_ORIGINS = ["https://portal.example"]  # type: ignore[attr-defined]

    assert same_origin([(b"host", b"internal:8000"), (b"origin", b"https://portal.example")])


@pytest.mark.parametrize(
    ("host", "allowed"),
    [("portal.example", True), ("portal.example:8443", True), ("evil.example", False), ("", False)],
)
def test_the_host_must_be_one_the_portal_answers_to(settings: object, host: str, allowed: bool) -> None:
    settings.ALLOWED_HOSTS = ["portal.example"]  # type: ignore[attr-defined]

    assert allowed_host([(b"host", host.encode())] if host else []) is allowed


def test_two_host_headers_are_refused_even_when_the_first_is_the_portals(settings: object) -> None:
    settings.ALLOWED_HOSTS = ["portal.example"]  # type: ignore[attr-defined]

    assert not allowed_host([(b"host", b"portal.example"), (b"host", b"evil.example")])
