"""Staff pages for previews of account changes: the account page asks for one
(``POST /manage/accounts/<id>/preview/``) and ``/manage/previews/<id>/`` follows it (a
progress bar polling the API) to its figures: per account, as it is and with the change,
as a table and a chart. Nothing about the account changes here."""

from __future__ import annotations

from django.contrib import messages
from django.http import HttpRequest, HttpResponse
from django.shortcuts import get_object_or_404, redirect, render
from django.views.decorators.http import require_POST

from monitoring import charts
from portal.models import Account
from portal.web.preview_form import PreviewForm
from portal.web.staff import staff_required, validated
from scheduler.api.previews import PreviewRequestSerializer
from scheduler.models import AccountPreview
from scheduler.previews import start_preview


@staff_required
@require_POST
def preview_start(request: HttpRequest, account_id: int) -> HttpResponse:
    account = get_object_or_404(Account, pk=account_id)
    form = PreviewForm(request.POST)
    if form.is_valid():
        serializer = PreviewRequestSerializer(data=form.body())
        if validated(form, serializer):
            data = serializer.validated_data
            row = start_preview(
                request.user, account, days=data["days"], shares=data.get("shares"), limits=data.get("limits")
            )
            return redirect("web:manage-preview", preview_id=row.pk)
    for field, problems in form.errors.items():
        messages.error(request, f"Preview: {field}: {' '.join(str(p) for p in problems)}")
    return redirect("web:manage-account", account_id=account.pk)


@staff_required
def preview_page(request: HttpRequest, preview_id: int) -> HttpResponse:
    row = get_object_or_404(AccountPreview.objects.select_related("account"), pk=preview_id)
    result = row.result if row.state == AccountPreview.State.DONE else None
    return render(
        request,
        "portal/manage/preview.html",
        {
            "preview": row,
            "result": result,
            "figure": charts.preview_figure(result["rows"]) if result and result["rows"] else None,
            "proposal": row.proposal or {},
        },
    )
