"""The audit log of every change made through the pages and the API."""

from __future__ import annotations

from django.http import HttpRequest, HttpResponse
from django.shortcuts import render
from django.views.decorators.http import require_GET

from people.models import AuditEntry
from web.manage.access import staff_required

AUDIT_PAGE = 100


@staff_required
@require_GET
def audit_log(request: HttpRequest) -> HttpResponse:
    raw = request.GET.get("page", "1")
    page = int(raw) if raw.isascii() and raw.isdigit() and 0 < int(raw) < 100_000 else 1
    offset = (page - 1) * AUDIT_PAGE
    entries = list(AuditEntry.objects.all()[offset : offset + AUDIT_PAGE + 1])
    return render(
        request,
        "web/manage/audit.html",
        {"entries": entries[:AUDIT_PAGE], "page": page, "has_next": len(entries) > AUDIT_PAGE},
    )
