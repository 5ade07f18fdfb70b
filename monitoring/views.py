"""``GET /metrics`` for Prometheus (text exposition format)."""

from __future__ import annotations

import hmac

from django.conf import settings
from django.http import HttpRequest, HttpResponse
from django.views.decorators.http import require_GET
from prometheus_client import CONTENT_TYPE_LATEST, CollectorRegistry, generate_latest

from monitoring.metrics import PortalCollector


@require_GET
def metrics(request: HttpRequest) -> HttpResponse:
    """The portal's figures. With ``MONITORING_METRICS_TOKEN`` set, the scraper must send
    ``Authorization: Bearer <token>`` (Prometheus' ``authorization`` scrape option).
    Without one, only DEBUG or ``MONITORING_METRICS_PUBLIC=1`` serve it: account names
    and queue sizes are not for the open internet by default."""
    token = settings.MONITORING_METRICS_TOKEN
    if not token and not (settings.DEBUG or settings.MONITORING_METRICS_PUBLIC):
        return HttpResponse(
            "Set MONITORING_METRICS_TOKEN (or MONITORING_METRICS_PUBLIC=1) to expose /metrics.\n",
            status=403,
            content_type="text/plain",
        )
    if token:
        given = request.headers.get("Authorization", "")
        if not hmac.compare_digest(given.encode(), f"Bearer {token}".encode()):
            return HttpResponse("A bearer token is required.\n", status=401, content_type="text/plain")
    registry = CollectorRegistry(auto_describe=False)
    registry.register(PortalCollector())
    return HttpResponse(generate_latest(registry), content_type=CONTENT_TYPE_LATEST)
