"""The REST API client of ``qm``: JSON over ``/api/v1/`` with a bearer token, standard
library only, never following a redirect (it would carry the token along)."""

from __future__ import annotations

import json
import urllib.error
import urllib.parse
import urllib.request
from typing import Any


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

    def __init__(self, url: str, token: str, timeout: float = 30.0) -> None:
        self.base = url.rstrip("/") + "/api/v1/"
        self.token = token
        self.timeout = timeout

    def request(self, method: str, path: str, body: dict[str, Any] | None = None) -> Any:
        """Send one request; return the decoded JSON; raise ``ApiError`` on 4xx/5xx."""
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
            if 300 <= exc.code < 400:
                where = exc.headers.get("Location", "?")
                raise ApiError(exc.code, f"the server redirected to {where}; give that address with --url") from None
            raw = exc.read()
            try:
                parsed: Any = json.loads(raw)
            except ValueError:
                parsed = raw.decode(errors="replace")[:500]
            raise ApiError(exc.code, parsed) from None
        return json.loads(raw) if raw else None

    def get(self, path: str, **params: Any) -> Any:
        query = urllib.parse.urlencode([(k, v) for k, v in params.items() if v not in (None, "")], doseq=True)
        return self.request("GET", path + (f"?{query}" if query else ""))

    def post(self, path: str, body: dict[str, Any] | None = None) -> Any:
        return self.request("POST", path, body)

    def patch(self, path: str, body: dict[str, Any]) -> Any:
        return self.request("PATCH", path, body)
