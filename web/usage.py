"""``/usage/``: GPU-hours over a period (``sreport``) as a table, a stacked chart over time
and CSV, for whoever is signed in: staff see every job, coordinators their accounts',
researchers their own (``scheduler.reads.usage.usage_scope``, as the API does)."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any
from urllib.parse import urlencode

from django import forms
from django.contrib.auth.decorators import login_required
from django.http import HttpRequest, HttpResponse
from django.shortcuts import render
from django.views.decorators.http import require_GET

from monitoring import charts
from people.access import visible_accounts
from people.models import Account
from scheduler.reads.usage import (
    BUCKETS,
    GROUPS,
    attempts_in,
    day_span,
    usage,
    usage_over_time,
    usage_period,
    usage_scope,
)


class UsageForm(forms.Form):
    start = forms.DateField(required=False, help_text="First day (UTC); default: 30 days before the last.")
    end = forms.DateField(required=False, help_text="Last day, included; default: today.")
    group_by = forms.ChoiceField(label="By", choices=[(g, g.replace("_", " ")) for g in GROUPS], required=False)
    bucket = forms.ChoiceField(label="Per", choices=[(b, b) for b in BUCKETS], required=False)
    account = forms.ModelChoiceField(
        queryset=Account.objects.none(), required=False, to_field_name="name", help_text="With its subaccounts."
    )

    def __init__(self, *args: Any, user: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        field: Any = self.fields["account"]
        field.queryset = visible_accounts(user).order_by("name")

    def clean(self) -> dict[str, Any]:
        data = super().clean() or {}
        try:
            start, end = usage_period(data.get("start"), data.get("end"))
        except ValueError as exc:
            self.add_error("start", str(exc))
            return data
        return {**data, "start": start, "end": end}


@login_required
@require_GET
def usage_page(request: HttpRequest) -> HttpResponse:
    form = UsageForm(request.GET, user=request.user)  # bound even when empty: the defaults apply
    valid = form.is_valid()
    context: dict[str, Any] = {"form": form, "valid": valid}
    if valid:
        data = form.cleaned_data
        first, last, account = data["start"], data["end"], data.get("account")
        group_by, bucket = data.get("group_by") or "account", data.get("bucket") or "day"
        start, end = day_span(first, last)
        now = datetime.now(UTC)
        held = attempts_in(start, end, min(now, end), usage_scope(request.user, account))
        starts, series = usage_over_time(held, start, end, group_by, bucket)
        query = {"start": first.isoformat(), "end": last.isoformat(), "group_by": group_by, "output": "csv"}
        if account is not None:
            query["account"] = account.name
        context.update(
            rows=usage(held, start, end, group_by),
            group_by=group_by,
            first=first,
            last=last,
            figure=charts.usage_figure(starts, series, group_by, bucket) if series else None,
            csv_url="/api/v1/usage/?" + urlencode(query),
        )
    return render(request, "web/usage.html", context)
