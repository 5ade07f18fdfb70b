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


def error_page(request: HttpRequest, status_code: int) -> HttpResponse:
    """A styled error page that says what happened and what to do; JSON under ``/api/``."""
    title, explanation, what_to_do = ERROR_PAGES[status_code]
    explanation = explanation.format(limit=_limit())
    if request.path.startswith("/api/"):
        return JsonResponse({"detail": f"{title}: {explanation}"}, status=status_code)
    context = {"title": title, "explanation": explanation, "what_to_do": what_to_do}
    return render(request, "error.html", context, status=status_code)


def bad_request_handler(request: HttpRequest, exception: Exception) -> HttpResponse:
    """Django's 400 handler. A body over ``DATA_UPLOAD_MAX_MEMORY_SIZE`` is a 413 saying
    the limit; anything else (too many fields, a bad header) a 400."""
    return error_page(request, 413 if isinstance(exception, RequestDataTooBig) else 400)


def forbidden(request: HttpRequest, exception: Exception) -> HttpResponse:
    """Django's 403 handler."""
    return error_page(request, 403)


def not_found(request: HttpRequest, exception: Exception) -> HttpResponse:
    """Django's 404 handler: JSON under ``/api/`` (a URL no route matches, such as an id
    that is not a number), the styled page elsewhere."""
    return error_page(request, 404)
