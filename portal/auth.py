"""Personal API tokens for scripts: ``Authorization: Bearer qm_<prefix>_<secret>``."""

from __future__ import annotations

import hmac
from datetime import timedelta
from typing import Any

from django.utils import timezone
from rest_framework import authentication, exceptions
from rest_framework.request import Request

from portal.models import ApiToken

LAST_USED_RESOLUTION = timedelta(minutes=1)


class ApiTokenAuthentication(authentication.BaseAuthentication):
    """Look the token up by its public prefix, then compare digests in constant time."""

    keywords = ("bearer", "token")

    def authenticate(self, request: Request) -> tuple[Any, ApiToken] | None:
        header = authentication.get_authorization_header(request).decode("latin-1").split()
        if not header or header[0].lower() not in self.keywords:
            return None
        if len(header) != 2:
            raise exceptions.AuthenticationFailed("Authorization header must be '<Bearer> <token>'.")
        token = header[1]
        if not token.startswith(ApiToken.PREFIX) or token.count("_") < 2:
            raise exceptions.AuthenticationFailed("Malformed API token.")
        prefix = token[len(ApiToken.PREFIX) :].split("_", 1)[0]
        record = ApiToken.objects.select_related("user").filter(key_prefix=prefix, revoked_at__isnull=True).first()
        if record is None or not hmac.compare_digest(record.digest, ApiToken.hash(token)):
            raise exceptions.AuthenticationFailed("Invalid or revoked API token.")
        if not record.user.is_active:
            raise exceptions.AuthenticationFailed("User inactive.")
        now = timezone.now()
        if record.last_used_at is None or now - record.last_used_at > LAST_USED_RESOLUTION:
            # At most one write a minute per token: a busy script must not turn every
            # read into a database write.
            ApiToken.objects.filter(pk=record.pk).update(last_used_at=now)
        return record.user, record

    def authenticate_header(self, request: Request) -> str:
        return 'Bearer realm="api"'
