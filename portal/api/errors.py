"""Map domain errors to clear 4xx answers instead of 500s."""

from __future__ import annotations

from typing import Any

from django.core.exceptions import RequestDataTooBig
from django.core.exceptions import ValidationError as DjangoValidationError
from django.db.models import ProtectedError
from django.http import HttpRequest, HttpResponse, JsonResponse
from django.views.defaults import bad_request, page_not_found
from rest_framework import exceptions, status
from rest_framework.response import Response
from rest_framework.views import exception_handler as drf_exception_handler


class Conflict(exceptions.APIException):
    status_code = status.HTTP_409_CONFLICT
    default_code = "conflict"


def exception_handler(exc: Exception, context: dict[str, Any]) -> Response | None:
    from scheduler.jobs.transitions import JobStateConflict

    if isinstance(exc, DjangoValidationError):
        detail = exc.message_dict if hasattr(exc, "error_dict") else {"non_field_errors": exc.messages}
        exc = exceptions.ValidationError(detail)
    elif isinstance(exc, JobStateConflict):
        exc = Conflict(str(exc))
    elif isinstance(exc, ProtectedError):
        exc = Conflict(f"Still in use by {len(exc.protected_objects)} other records; remove those first.")
    return drf_exception_handler(exc, context)


def bad_request_handler(request: HttpRequest, exception: Exception) -> HttpResponse:
    """Django's 400 handler (a body over ``DATA_UPLOAD_MAX_MEMORY_SIZE``, too many fields):
    JSON under ``/api/``, as DRF's own 400s, the HTML page elsewhere."""
    if request.path.startswith("/api/"):
        detail = "Request body too large." if isinstance(exception, RequestDataTooBig) else "Bad request."
        return JsonResponse({"detail": detail}, status=400)
    return bad_request(request, exception)


def not_found(request: HttpRequest, exception: Exception) -> HttpResponse:
    """Django's 404 handler: JSON under ``/api/`` (a URL no route matches, such as an id
    that is not a number), the HTML page elsewhere."""
    if request.path.startswith("/api/"):
        return JsonResponse({"detail": "Not found."}, status=404)
    return page_not_found(request, exception)
