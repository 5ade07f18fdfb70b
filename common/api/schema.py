"""OpenAPI additions: our token authentication, and the error answers of every operation."""

from __future__ import annotations

from typing import Any

from drf_spectacular import openapi
from drf_spectacular.extensions import OpenApiAuthenticationExtension
from drf_spectacular.plumbing import ResolvedComponent
from rest_framework import serializers
from rest_framework.permissions import SAFE_METHODS, AllowAny, IsAuthenticated


class ApiTokenScheme(OpenApiAuthenticationExtension):
    target_class = "people.auth.ApiTokenAuthentication"
    name = "apiToken"

    def get_security_definition(self, auto_schema: Any) -> dict[str, str]:
        return {"type": "http", "scheme": "bearer", "bearerFormat": "qm_<prefix>_<secret>"}


class ErrorSerializer(serializers.Serializer):
    """Every error but a validation error: one human-readable message."""

    detail = serializers.CharField()


VALIDATION_ERROR = ResolvedComponent(
    name="ValidationError",
    type=ResolvedComponent.SCHEMA,
    object="ValidationError",
    schema={
        "type": "object",
        "description": "What is wrong, per field: field name (or `non_field_errors`, or `detail` for a body "
        "that is not valid JSON) -> messages.",
        "additionalProperties": {},
    },
)


class AutoSchema(openapi.AutoSchema):
    """drf-spectacular's schema, plus the 4xx answers an operation can give.

    DRF produces these itself (authentication, permissions, lookups, pagination,
    validation, ``common.api.errors``), so no serializer names them; documenting them lets
    clients and the contract tests tell a documented refusal from a broken endpoint.
    Responses an operation declares with ``@extend_schema`` win.
    """

    def get_operation(self, *args: Any, **kwargs: Any) -> dict[str, Any] | None:
        operation = super().get_operation(*args, **kwargs)
        if operation is None:
            return None
        for code, description in self._error_responses(operation).items():
            if code == "400":
                self.registry.register_on_missing(VALIDATION_ERROR)
                schema = VALIDATION_ERROR.ref
            else:
                schema = self.resolve_serializer(ErrorSerializer, "response").ref
            operation["responses"].setdefault(
                code, {"description": description, "content": {"application/json": {"schema": schema}}}
            )
        return operation

    def _error_responses(self, operation: dict[str, Any]) -> dict[str, str]:
        permissions = self.view.get_permissions()
        parameters = operation.get("parameters", [])
        query = {p["name"] for p in parameters if p["in"] == "query"}
        writes = self.method not in SAFE_METHODS
        errors: dict[str, str] = {}
        if writes or query:
            errors["400"] = "Invalid request body or query parameter."
        if not all(isinstance(p, AllowAny) for p in permissions):
            errors["401"] = "No valid credentials (session or API token)."
        # Writes through a session also need a CSRF token.
        if writes or any(type(p) not in (AllowAny, IsAuthenticated) for p in permissions):
            errors["403"] = "Not allowed for this user."
        if any(p["in"] == "path" for p in parameters) or "page" in query:
            errors["404"] = "No such object visible to you (or no such page)."
        if self.method == "DELETE":
            errors["409"] = "Still in use by other records."
        if "requestBody" in operation:
            errors["413"] = "Request body over the portal's limit (DATA_UPLOAD_MAX_MEMORY_SIZE)."
            errors["415"] = "Unsupported request media type."
        return errors
