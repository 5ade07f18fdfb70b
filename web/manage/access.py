"""Who may use the admin pages (staff; anyone else gets 403), and the one way their forms
are validated: by the API's serializers, so a page accepts exactly what the API accepts."""

from __future__ import annotations

from collections.abc import Callable
from functools import wraps
from typing import Any

from django import forms
from django.contrib.auth.decorators import login_required
from django.core.exceptions import PermissionDenied
from django.http import HttpRequest, HttpResponse
from rest_framework import serializers

from web.jobs.form import flatten_errors


def staff_required(view: Callable[..., HttpResponse]) -> Callable[..., HttpResponse]:
    """Log in first; then staff only (403 for everyone else, not a login loop)."""

    @wraps(view)
    @login_required
    def wrapped(request: HttpRequest, *args: Any, **kwargs: Any) -> HttpResponse:
        if not request.user.is_staff:
            raise PermissionDenied("Admins only.")
        return view(request, *args, **kwargs)

    return wrapped


def validated(form: forms.Form, serializer: serializers.Serializer) -> bool:
    """Run the API serializer; put its errors on the form's fields. True when valid."""
    if serializer.is_valid():
        return True
    for name, problems in serializer.errors.items():
        if name == "max_gpus_per_model" and hasattr(form, "model_field") and isinstance(problems, dict):
            for model, problem in problems.items():
                form.add_error(form.model_field(str(model)), flatten_errors(problem))
            continue
        form.add_error(name if name in form.fields else None, flatten_errors(problems))
    return False


def blank_none(value: Any) -> Any:
    """A form's empty text is the API's null."""
    return None if value in (None, "") else value
