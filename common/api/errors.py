"""Map domain errors to clear 4xx answers, and outages to 503s, instead of 500s."""

from __future__ import annotations

import logging
from typing import Any

from django.conf import settings
from django.core.exceptions import RequestDataTooBig
from django.core.exceptions import ValidationError as DjangoValidationError
from django.db.models import ProtectedError
from django.http import HttpRequest, HttpResponse, JsonResponse
from django.shortcuts import render
from rest_framework import exceptions, status
from rest_framework.response import Response
from rest_framework.views import exception_handler as drf_exception_handler

from common.outages import RETRY_AFTER_SECONDS, outage

log = logging.getLogger(__name__)


class StateConflict(Exception):
    """What a domain service raises when the thing asked of an object does not fit the
    state it is in (a job no longer pending, say): the API answers 409 with its message.
    The one base every app's conflicts derive from, so this layer knows none of them."""


class Conflict(exceptions.APIException):
    status_code = status.HTTP_409_CONFLICT
    default_code = "conflict"


class Unavailable(exceptions.APIException):
    """503: the database or the broker is unreachable (``common.outages``); ``wait``
    becomes DRF's ``Retry-After`` header."""

    status_code = status.HTTP_503_SERVICE_UNAVAILABLE
    default_code = "unavailable"
    wait = RETRY_AFTER_SECONDS


def exception_handler(exc: Exception, context: dict[str, Any]) -> Response | None:
    if isinstance(exc, RequestDataTooBig):  # the body, read as the view asked for request.data
        return Response(too_large(), status=status.HTTP_413_REQUEST_ENTITY_TOO_LARGE)
    if isinstance(exc, DjangoValidationError):
        detail = exc.message_dict if hasattr(exc, "error_dict") else {"non_field_errors": exc.messages}
        exc = exceptions.ValidationError(detail)
    elif isinstance(exc, StateConflict):
        exc = Conflict(str(exc))
    elif isinstance(exc, ProtectedError):
        exc = Conflict(f"Still in use by {len(exc.protected_objects)} other records; remove those first.")
    elif (found := outage(exc)) is not None:
        log.warning("%s unavailable: %s", found.what, exc)
        exc = Unavailable(found.detail)
    return drf_exception_handler(exc, context)


#: What each error page says: (title, what happened, what to do).
ERROR_PAGES = {
    400: (
        "Bad request",
        "The portal could not read what your browser sent.",
        "Go back, reload the page and try again.",
    ),
    403: (
        "Not allowed",
        "You are signed in, but this page or action is not open to you.",
        "If you need it, ask your account's coordinator or the cluster's staff for access.",
    ),
    404: (
        "Not found",
        "There is nothing here, or it belongs to someone else.",
        "Check the address, or find the job in your job list.",
    ),
    413: (
        "Too large",
        "What you sent is larger than the portal accepts ({limit}).",
        "Shorten the script or environment, or keep large files on the cluster and refer to them by path.",
    ),
}


def _limit() -> str:
    return f"{settings.DATA_UPLOAD_MAX_MEMORY_SIZE / 1_000_000:g} MB"


def too_large() -> dict[str, Any]:
    """The API's answer to a body over ``DATA_UPLOAD_MAX_MEMORY_SIZE`` (with a 413): the
    limit in words and in bytes. Which field made it too large cannot be known: the
    body is refused before it is parsed."""
    title, explanation, _ = ERROR_PAGES[413]
    return {
        "detail": f"{title}: {explanation.format(limit=_limit())}",
        "limit_bytes": settings.DATA_UPLOAD_MAX_MEMORY_SIZE,
    }


def error_page(request: HttpRequest, status_code: int) -> HttpResponse:
    """A styled error page that says what happened and what to do; JSON under ``/api/``."""
    title, explanation, what_to_do = ERROR_PAGES[status_code]
    explanation = explanation.format(limit=_limit())
    if request.path.startswith("/api/"):
        body = too_large() if status_code == 413 else {"detail": f"{title}: {explanation}"}
        return JsonResponse(body, status=status_code)
    context = {"title": title, "explanation": explanation, "what_to_do": what_to_do}
    return render(request, "error.html", context, status=status_code)


def bad_request_handler(request: HttpRequest, exception: Exception) -> HttpResponse:
    """Django's 400 handler. A body over ``DATA_UPLOAD_MAX_MEMORY_SIZE`` is a 413 saying
    the limit; anything else (too many fields, a bad header) a 400."""
    return error_page(request, 413 if isinstance(exception, RequestDataTooBig) else 400)


class BodyLimitMiddleware:
    """A body over ``DATA_UPLOAD_MAX_MEMORY_SIZE`` is a 413 (JSON under ``/api/``, the
    styled page elsewhere) however the portal runs.

    Why a middleware: Django raises ``RequestDataTooBig`` wherever the body is first
    read, and only its production 400 handler (:func:`bad_request_handler`) turns that
    into our 413; under DEBUG (the demo) its technical page answers instead. A form body
    is first read by the CSRF check, before any view, so this reads it first (placed
    before ``CsrfViewMiddleware``: the same parse the CSRF check would make, kept by
    the request); a view that reads a body itself (a JSON body, read by DRF as the view
    asks for it) raises in the view, which :meth:`process_exception` answers (DRF's
    views answer through :func:`exception_handler` before that)."""

    def __init__(self, get_response: Any) -> None:
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponse:
        response: HttpResponse = self.get_response(request)
        return response

    def process_view(self, request: HttpRequest, view: Any, *args: Any) -> HttpResponse | None:
        if request.method != "POST" or getattr(view, "reads_own_body", False):
            return None  # Django parses a form body only for POST; see reads_own_body
        try:
            request.POST  # noqa: B018  (parsed now: a form content type; others are not read)
        except RequestDataTooBig:
            return error_page(request, 413)
        return None

    def process_exception(self, request: HttpRequest, exception: Exception) -> HttpResponse | None:
        return error_page(request, 413) if isinstance(exception, RequestDataTooBig) else None


def reads_own_body(view: Any) -> Any:
    """Mark ``view`` as one that sets how its body is read before reading it (an upload
    streamed elsewhere, ``scheduler.files.uploads``): :class:`BodyLimitMiddleware` then
    leaves the body alone, and the view answers for its size."""
    view.reads_own_body = True
    return view


def forbidden(request: HttpRequest, exception: Exception) -> HttpResponse:
    """Django's 403 handler."""
    return error_page(request, 403)


def not_found(request: HttpRequest, exception: Exception) -> HttpResponse:
    """Django's 404 handler: JSON under ``/api/`` (a URL no route matches, such as an id
    that is not a number), the styled page elsewhere."""
    return error_page(request, 404)
