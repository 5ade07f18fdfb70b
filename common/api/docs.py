"""The API's description: the OpenAPI schema (``/api/schema/``) and Swagger UI
(``/api/docs/``), for signed-in users (a session or an API token) unless
``API_SCHEMA_PUBLIC`` opens them to anyone.

Why closed by default: the schema lists every operation, filter and field, the admin
ones included, which tells an anonymous visitor more about the site than it needs.
"""

from __future__ import annotations

from typing import Any

from django.conf import settings
from django.contrib.auth.views import redirect_to_login
from django.http import HttpRequest, HttpResponseBase
from drf_spectacular.views import SpectacularAPIView, SpectacularSwaggerView
from rest_framework.permissions import BasePermission
from rest_framework.renderers import JSONRenderer
from rest_framework.response import Response


class SchemaAccess(BasePermission):
    """Anyone when ``settings.API_SCHEMA_PUBLIC`` (read per request), else the signed-in."""

    def has_permission(self, request: Any, view: Any) -> bool:
        return bool(settings.API_SCHEMA_PUBLIC or (request.user and request.user.is_authenticated))


class SchemaView(SpectacularAPIView):
    """``GET /api/schema/``: anonymous callers get the API's 401 (JSON, Bearer challenge)."""

    permission_classes = [SchemaAccess]

    def handle_exception(self, exc: Exception) -> Response:
        # The schema's renderers (YAML, OpenAPI JSON) would dress a refusal up as a
        # schema document; it is answered in JSON like every other refusal of the API.
        self.request.accepted_renderer = JSONRenderer()
        self.request.accepted_media_type = JSONRenderer.media_type
        return super().handle_exception(exc)


class SwaggerView(SpectacularSwaggerView):
    """``GET /api/docs/``: a page for people, so a visitor without a session is sent to
    sign in and comes back here, rather than shown a JSON refusal."""

    permission_classes = [SchemaAccess]

    def dispatch(self, request: HttpRequest, *args: Any, **kwargs: Any) -> HttpResponseBase:
        if not (settings.API_SCHEMA_PUBLIC or request.user.is_authenticated):
            return redirect_to_login(request.get_full_path())
        return super().dispatch(request, *args, **kwargs)
