"""The REST API client of ``qm``: JSON over ``/api/v1/`` with a bearer token, standard
library only, never following a redirect (it would carry the token along).

While the portal restarts, or its database does, it answers 502/503/504 (with
``Retry-After``) or refuses connections. A call that may safely be sent twice is then
sent again, a bounded number of times within a bounded time, saying so on stderr:

- GET, HEAD, PUT and DELETE, and a POST the caller marks idempotent (the what-if
  estimate writes nothing). Other POSTs and PATCH are not: qm sends no idempotency key
  and the portal reads none, so a submission the portal stored before its answer was
  lost would be stored twice.
- Any call whose connection was refused: nothing reached the portal, so nothing can be
  done twice.
"""

from __future__ import annotations

import email.utils
import http.client
import json
import sys
import time
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, TextIO

#: Methods that may be sent again without doing twice what they do (RFC 9110 9.2.2).
IDEMPOTENT_METHODS = frozenset({"GET", "HEAD", "PUT", "DELETE", "OPTIONS"})
#: The portal (or its proxy) is there but cannot answer now.
UNAVAILABLE_STATUSES = frozenset({502, 503, 504})


@dataclass(frozen=True)
class Retry:
    """How hard to try: ``tries`` sends at most, ``seconds`` of waiting in all, and the
    wait when the portal names none (doubling from ``first_wait``)."""

    tries: int = 5
    seconds: float = 60.0
    first_wait: float = 1.0


class _Unavailable(Exception):
    """One try found the portal unavailable; ``wait`` is what it asked for, if anything."""

    def __init__(self, reason: str, wait: float | None, error: Exception) -> None:
        super().__init__(reason)
        self.reason, self.wait, self.error = reason, wait, error


def retry_after(value: str | None, now: float | None = None) -> float | None:
    """``Retry-After`` in seconds: a number of seconds or an HTTP date; ``None`` if absent
    or unreadable."""
    if not value:
        return None
    value = value.strip()
    if value.isdigit():
        return float(value)
    try:
        when = email.utils.parsedate_to_datetime(value)
    except (TypeError, ValueError):
        return None
    return max(0.0, when.timestamp() - (time.time() if now is None else now))


class ApiError(Exception):
    """The API answered with an error status; ``body`` is its JSON (or text)."""

    def __init__(self, status: int, body: Any) -> None:
        super().__init__(f"HTTP {status}")
        self.status = status
        self.body = body

    def describe(self) -> str:
        body = self.body
        if isinstance(body, dict):
            if set(body) == {"detail"}:
                return str(body["detail"])
            lines: list[str] = []
            for field, problems in body.items():
                items = problems if isinstance(problems, list) else [problems]
                lines.extend(f"{field}: {p}" for p in items)
            return "\n".join(lines)
        return str(body) or f"HTTP {self.status}"


class _NoRedirects(urllib.request.HTTPRedirectHandler):
    """Redirects are not followed: urllib would carry the bearer token along, to any
    host. A redirect comes back as an error naming where it pointed."""

    def redirect_request(self, req: Any, fp: Any, code: int, msg: str, headers: Any, newurl: str) -> None:
        return None


_OPENER = urllib.request.build_opener(_NoRedirects)


class Api:
    """A minimal JSON client for ``/api/v1/`` with a bearer token (stdlib only)."""

    def __init__(
        self,
        url: str,
        token: str,
        timeout: float = 30.0,
        *,
        retry: Retry = Retry(),
        err: TextIO | None = None,
        sleep: Callable[[float], None] = time.sleep,
    ) -> None:
        self.base = url.rstrip("/") + "/api/v1/"
        self.token = token
        self.timeout = timeout
        self.retry, self.err, self.sleep = retry, err, sleep

    def request(self, method: str, path: str, body: dict[str, Any] | None = None, *, idempotent: bool = False) -> Any:
        """Send one request, again while the portal is unavailable if that is safe (see the
        module docstring); return the decoded JSON; raise ``ApiError`` on 4xx/5xx and
        ``urllib.error.URLError`` when the portal cannot be reached."""
        safe = idempotent or method in IDEMPOTENT_METHODS
        waited = 0.0
        for attempt in range(1, self.retry.tries + 1):
            try:
                return self._send(method, path, body, may_retry=safe)
            except _Unavailable as unavailable:
                wait = self._wait(unavailable.wait, attempt)
                if attempt == self.retry.tries or waited + wait > self.retry.seconds:
                    raise unavailable.error from None
                then = f"attempt {attempt + 1} of {self.retry.tries}"
                self._say(f"qm: portal {unavailable.reason}, retrying in {wait:g} s ({then})")
                self.sleep(wait)
                waited += wait
        raise AssertionError("unreachable")  # the last try returns or raises

    def _wait(self, asked: float | None, attempt: int) -> float:
        return asked if asked is not None else self.retry.first_wait * 2 ** (attempt - 1)

    def _say(self, line: str) -> None:
        print(line, file=self.err if self.err is not None else sys.stderr, flush=True)

    def _send(self, method: str, path: str, body: dict[str, Any] | None, *, may_retry: bool) -> Any:
        """One try. Raises ``_Unavailable`` when another may help: a refused connection
        always, an unavailable status or a lost connection only when ``may_retry``."""
        data = json.dumps(body).encode() if body is not None else None
        request = urllib.request.Request(self.base + path.lstrip("/"), data=data, method=method)
        request.add_header("Accept", "application/json")
        if data is not None:
            request.add_header("Content-Type", "application/json")
        if self.token:
            request.add_header("Authorization", f"Bearer {self.token}")
        try:
            with _OPENER.open(request, timeout=self.timeout) as response:
                raw = response.read()
        except urllib.error.HTTPError as exc:
            if may_retry and exc.code in UNAVAILABLE_STATUSES:
                error = _api_error(exc)
                raise _Unavailable(
                    f"unavailable ({exc.code})", retry_after(exc.headers.get("Retry-After")), error
                ) from None
            raise _api_error(exc) from None
        except urllib.error.URLError as exc:
            if isinstance(exc.reason, ConnectionRefusedError) or (may_retry and _lost(exc.reason)):
                raise _Unavailable(f"unreachable ({_words(exc.reason)})", None, exc) from None
            raise
        except (http.client.RemoteDisconnected, ConnectionResetError, TimeoutError) as exc:
            if may_retry:
                raise _Unavailable(f"unreachable ({_words(exc)})", None, urllib.error.URLError(exc)) from None
            raise urllib.error.URLError(exc) from None
        return json.loads(raw) if raw else None

    def get(self, path: str, **params: Any) -> Any:
        query = urllib.parse.urlencode([(k, v) for k, v in params.items() if v not in (None, "")], doseq=True)
        return self.request("GET", path + (f"?{query}" if query else ""))

    def post(self, path: str, body: dict[str, Any] | None = None, *, idempotent: bool = False) -> Any:
        """``idempotent``: sending it twice does no more than once (a what-if), so it may
        be sent again while the portal is unavailable."""
        return self.request("POST", path, body, idempotent=idempotent)

    def patch(self, path: str, body: dict[str, Any]) -> Any:
        return self.request("PATCH", path, body)


def _api_error(exc: urllib.error.HTTPError) -> ApiError:
    if 300 <= exc.code < 400:
        where = exc.headers.get("Location", "?")
        return ApiError(exc.code, f"the server redirected to {where}; give that address with --url")
    raw = exc.read()
    try:
        parsed: Any = json.loads(raw)
    except ValueError:
        parsed = raw.decode(errors="replace")[:500]
    return ApiError(exc.code, parsed)


def _lost(reason: object) -> bool:
    """The connection broke or timed out after the request may have been sent."""
    return isinstance(reason, (ConnectionResetError, http.client.RemoteDisconnected, TimeoutError))


def _words(reason: object) -> str:
    if isinstance(reason, ConnectionRefusedError):
        return "connection refused"
    if isinstance(reason, TimeoutError):
        return "timed out"
    return str(reason) or type(reason).__name__
