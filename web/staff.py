"""Admin pages (staff only; anyone else gets 403): accounts and fair-share, quotas and
members in forms, nodes with drain/resume, the cluster overview with GPU-hours by
account (and its CSV), and the audit log of every change made here.

Forms are validated by the API's serializers (``people.api.serializers``), so a page
accepts exactly what the API accepts; every change goes through a service of
:mod:`people.services` (or ``scheduler.clusters.nodes``) that records its audit entry.
"""

from __future__ import annotations

from collections import Counter, defaultdict
from collections.abc import Callable
from datetime import UTC, date, datetime, time, timedelta
from functools import wraps
from typing import Any

from django import forms
from django.conf import settings
from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.core.exceptions import PermissionDenied
from django.http import HttpRequest, HttpResponse
from django.shortcuts import get_object_or_404, redirect, render
from django.utils import timezone
from django.views.decorators.http import require_GET, require_POST
from rest_framework import serializers

from common.forms import NulFreeCharField
from monitoring import charts, readings
from monitoring.queue import queue_history
from monitoring.series import series
from people import services
from people.api.serializers import AccountSerializer, MembershipSerializer, QuotaSerializer
from people.choices import Role
from people.limits import USER_LIMITS, WHOLE_LIMITS, quota_limit
from people.models import Account, AuditEntry, Membership, Quota
from scheduler.choices import JobState
from scheduler.clusters.nodes import drain_node, resume_node
from scheduler.models import Node, TickState
from scheduler.reads import reports
from scheduler.reads.inventory import load_inventory
from scheduler.reads.occupancy import Occupancy, read_occupancy
from scheduler.reads.reservations import ahead, by_node
from web import figures
from web.jobform import flatten_errors
from web.simulation_forms import PreviewForm

AUDIT_PAGE = 100


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
        if isinstance(form, QuotaForm) and name == "max_gpus_per_model" and isinstance(problems, dict):
            for model, problem in problems.items():
                form.add_error(form.model_field(str(model)), flatten_errors(problem))
            continue
        form.add_error(name if name in form.fields else None, flatten_errors(problems))
    return False


def _blank_none(value: Any) -> Any:
    return None if value in (None, "") else value


# --- Accounts, quotas, members --------------------------------------------------------------------


def account_tree() -> list[tuple[Account, int]]:
    """Every account with its depth, parents before children, siblings by name."""
    accounts = list(Account.objects.order_by("name"))
    children: dict[int | None, list[Account]] = defaultdict(list)
    for account in accounts:
        children[account.parent_id].append(account)
    ordered: list[tuple[Account, int]] = []
    seen: set[int] = set()

    def walk(parent: int | None, depth: int) -> None:
        for account in children[parent]:
            if account.pk not in seen:
                seen.add(account.pk)
                ordered.append((account, depth))
                walk(account.pk, depth + 1)

    walk(None, 0)
    return ordered


@staff_required
@require_GET
def accounts(request: HttpRequest) -> HttpResponse:
    """The account tree with shares, members and quotas; the ``sshare`` table."""
    members: dict[int, list[Membership]] = defaultdict(list)
    for membership in Membership.objects.select_related("user").order_by("user__username"):
        members[membership.account_id].append(membership)
    quotas = {q.account_id: q for q in Quota.objects.filter(account__isnull=False)}
    rows = [(a, depth, members[a.pk], quotas.get(a.pk)) for a, depth in account_tree()]
    shares = reports.fairshare_report(timezone.now())
    return render(
        request,
        "portal/manage/accounts.html",
        {"rows": rows, "shares": shares, "fairshare_figure": charts.fairshare_figure(shares) if shares else None},
    )


class AccountForm(forms.Form):
    name = forms.CharField(max_length=64, help_text="Letters, digits, - and _.")
    parent = forms.ChoiceField(required=False, help_text="Empty: a top-level account.")
    shares = forms.CharField(max_length=12, initial="1", help_text="Weight among its siblings (Slurm's Fairshare=).")
    description = forms.CharField(max_length=200, required=False)
    idle_below_pct = forms.CharField(
        required=False, label="Idle under (%)", help_text="Empty: the site's default (IDLE_BELOW_PCT)."
    )
    idle_minutes = forms.CharField(required=False, label="Idle for (minutes)", help_text="Empty: IDLE_MINUTES.")
    idle_action = forms.ChoiceField(
        required=False,
        label="Then",
        choices=[
            ("", "the site's default"),
            ("none", "only tell the owner"),
            ("requeue", "requeue"),
            ("cancel", "cancel"),
        ],
    )
    idle_action_minutes = forms.CharField(
        required=False, label="After (minutes)", help_text="How long after it was flagged. Empty: IDLE_ACTION_MINUTES."
    )

    def __init__(self, *args: Any, instance: Account | None = None, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        others = Account.objects.exclude(pk=instance.pk) if instance is not None else Account.objects.all()
        names = others.values_list("name", flat=True)
        parent: Any = self.fields["parent"]
        parent.choices = [("", "(none)")] + [(n, n) for n in names]


class QuotaForm(forms.Form):
    """An account's or a user's quota: one field per whole-number limit of
    :data:`people.limits.QUOTA_LIMITS`, and one per GPU model for ``max_gpus_per_model``
    (no JSON). A user's has no guarantee or borrowing limit (accounts only)."""

    def __init__(self, *args: Any, quota: Quota | None = None, for_user: bool = False, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        for name in WHOLE_LIMITS:
            if name in USER_LIMITS or not for_user:
                limit = quota_limit(name)
                self.fields[name] = forms.CharField(required=False, label=limit.label, help_text=limit.meaning)
        stored = dict(quota.max_gpus_per_model or {}) if quota else {}
        self.models = sorted(set(load_inventory().models) | set(stored))
        for i, model in enumerate(self.models):
            self.fields[f"model_{i}"] = forms.CharField(
                required=False, label=f"Max {model} GPUs", initial=stored.get(model, "")
            )

    def api_data(self, subject: dict[str, str]) -> dict[str, Any]:
        """The quota API's body for ``subject`` (``{"account": name}`` or ``{"user": name}``)."""
        data = self.cleaned_data
        body: dict[str, Any] = dict(subject)
        for name in WHOLE_LIMITS:
            if name in self.fields:
                body[name] = _blank_none(data.get(name))
        body["max_gpus_per_model"] = {
            model: data[f"model_{i}"] for i, model in enumerate(self.models) if data.get(f"model_{i}") not in (None, "")
        }
        return body

    def model_field(self, model: str) -> str | None:
        """The form field of one GPU model's limit (``None``: not on the form)."""
        return f"model_{self.models.index(model)}" if model in self.models else None


class MemberForm(forms.Form):
    user = forms.CharField(max_length=150, label="Username")
    role = forms.ChoiceField(choices=Role.choices, initial=Role.MEMBER)


def quota_initial(quota: Quota | None) -> dict[str, Any]:
    if quota is None:
        return {}
    return {name: getattr(quota, name) if getattr(quota, name) is not None else "" for name in WHOLE_LIMITS}


def save_quota(form: QuotaForm, subject: dict[str, str], quota: Quota | None, actor: Any) -> bool:
    """Validate the form's quota with the API's serializer and save it (audited)."""
    serializer = QuotaSerializer(instance=quota, data=form.api_data(subject))
    if not validated(form, serializer):
        return False
    services.save_quota(actor, quota, **serializer.validated_data)
    return True


@staff_required
def account_edit(request: HttpRequest, account_id: int | None = None) -> HttpResponse:
    """Create or edit an account; on an existing one also its quota and members.

    A POST names its form in ``form``: ``account``, ``quota``, ``quota-delete``,
    ``member-add``, ``member-role`` or ``member-remove``.
    """
    account = get_object_or_404(Account, pk=account_id) if account_id is not None else None
    quota = Quota.objects.filter(account=account).first() if account else None
    account_form = AccountForm(
        initial={
            "name": account.name,
            "parent": account.parent.name if account.parent else "",
            "shares": account.shares,
            "description": account.description,
            **{
                name: "" if getattr(account, name) is None else getattr(account, name)
                for name in ("idle_below_pct", "idle_minutes", "idle_action", "idle_action_minutes")
            },
        }
        if account
        else {},
        instance=account,
    )
    quota_form = QuotaForm(initial=quota_initial(quota), quota=quota)
    member_form = MemberForm()
    if request.method == "POST":
        which = request.POST.get("form", "account")
        actor = request.user
        if which == "account":
            account_form = AccountForm(request.POST, instance=account)
            if account_form.is_valid():
                saved = _save_account(account_form, account, actor)
                if saved is not None:
                    messages.success(request, f"Account {saved.name} saved.")
                    return redirect("web:manage-account", account_id=saved.pk)
        elif account is None:
            raise PermissionDenied("Create the account first.")
        elif which == "quota":
            quota_form = QuotaForm(request.POST, quota=quota)
            if quota_form.is_valid() and save_quota(quota_form, {"account": account.name}, quota, actor):
                messages.success(request, f"Quota of {account.name} saved.")
                return redirect("web:manage-account", account_id=account.pk)
        elif which == "quota-delete" and quota is not None:
            services.delete_quota(actor, quota)
            messages.success(request, f"Quota of {account.name} removed: no limits.")
            return redirect("web:manage-account", account_id=account.pk)
        elif which == "member-add":
            member_form = MemberForm(request.POST)
            if member_form.is_valid():
                body = {**member_form.cleaned_data, "account": account.name}
                serializer = MembershipSerializer(data=body)
                if validated(member_form, serializer):
                    membership = services.save_membership(actor, **serializer.validated_data)
                    messages.success(request, f"{membership.user} added to {account.name}.")
                    return redirect("web:manage-account", account_id=account.pk)
        elif which in ("member-role", "member-remove"):
            _change_member(request, account, which)
            return redirect("web:manage-account", account_id=account.pk)
    return render(
        request,
        "portal/manage/account_edit.html",
        {
            "account": account,
            "account_form": account_form,
            "quota": quota,
            "quota_form": quota_form,
            "member_form": member_form,
            "preview_form": PreviewForm(),
            "previews": account.previews.all()[:5] if account else [],
            "members": Membership.objects.filter(account=account).select_related("user") if account else [],
            "roles": Role.choices,
            "audit": AuditEntry.objects.filter(target_type__in=("account", "quota", "membership")).filter(
                target_repr__contains=account.name
            )[:20]
            if account
            else [],
        },
    )


def _save_account(form: AccountForm, account: Account | None, actor: Any) -> Account | None:
    data = form.cleaned_data
    body = {**data, "parent": _blank_none(data["parent"])}
    for name in ("idle_below_pct", "idle_minutes", "idle_action_minutes"):
        body[name] = _blank_none(data[name])
    serializer = AccountSerializer(instance=account, data=body)
    if not validated(form, serializer):
        return None
    return services.save_account(actor, account, **serializer.validated_data)


def _change_member(request: HttpRequest, account: Account, which: str) -> None:
    raw_id = str(request.POST.get("membership", ""))
    membership = Membership.objects.filter(account=account, pk=int(raw_id)).first() if raw_id.isdigit() else None
    if membership is None:
        messages.error(request, "No such member.")
        return
    if which == "member-remove":
        services.delete_membership(request.user, membership)
        messages.success(request, f"{membership.user} removed from {account.name}.")
        return
    role = request.POST.get("role", "")
    if role not in Role.values:
        messages.error(request, f"Unknown role {role[:20]!r}.")
        return
    if role != membership.role:
        services.save_membership(request.user, membership, role=role)
    messages.success(request, f"{membership.user} is a {role} of {account.name}.")


# --- Audit log ----------------------------------------------------------------------------------------


@staff_required
@require_GET
def audit_log(request: HttpRequest) -> HttpResponse:
    raw = request.GET.get("page", "1")
    page = int(raw) if raw.isascii() and raw.isdigit() and 0 < int(raw) < 100_000 else 1
    offset = (page - 1) * AUDIT_PAGE
    entries = list(AuditEntry.objects.all()[offset : offset + AUDIT_PAGE + 1])
    return render(
        request,
        "portal/manage/audit.html",
        {"entries": entries[:AUDIT_PAGE], "page": page, "has_next": len(entries) > AUDIT_PAGE},
    )


# --- Nodes ----------------------------------------------------------------------------------------------


class DrainForm(forms.Form):
    reason = NulFreeCharField(max_length=200, help_text="Shown to users whose jobs wait for this node.")


@staff_required
def nodes(request: HttpRequest) -> HttpResponse:
    now = timezone.now()
    reserved = by_node(now)
    return render(
        request,
        "portal/manage/nodes.html",
        {
            "rows": [(row, reserved.get(row.node.name, [])) for row in figures.node_rows()],
            "drain_form": DrainForm(),
            "now": now,
        },
    )


@staff_required
@require_POST
def node_drain(request: HttpRequest, node_id: int) -> HttpResponse:
    node = get_object_or_404(Node, pk=node_id)
    form = DrainForm(request.POST)
    if not form.is_valid():
        for problem in form.errors.get("reason", []):
            messages.error(request, f"Drain {node.name}: {problem}")
        return redirect("web:manage-nodes")
    reason = form.cleaned_data["reason"]
    drain_node(node, reason=reason, by=request.user)
    messages.success(request, f"{node.name} drained: {reason}")
    return redirect("web:manage-nodes")


@staff_required
@require_POST
def node_resume(request: HttpRequest, node_id: int) -> HttpResponse:
    node = get_object_or_404(Node, pk=node_id)
    resume_node(node, by=request.user)
    messages.success(request, f"{node.name} resumed.")
    return redirect("web:manage-nodes")


# --- Cluster overview, GPU-hours --------------------------------------------------------------------------


#: Dates a range may use: far enough for any cluster's history, and clear of the
#: calendar's ends (a default start 6 days before 0001-01-03 would overflow).
EARLIEST_DAY = date(2000, 1, 1)
LATEST_DAY = date(9999, 12, 1)


class RangeForm(forms.Form):
    start = forms.DateField(required=False, widget=forms.DateInput(attrs={"type": "date"}))
    end = forms.DateField(required=False, widget=forms.DateInput(attrs={"type": "date"}), help_text="Inclusive.")

    def clean(self) -> dict[str, Any]:
        data = super().clean() or {}
        for field in ("start", "end"):
            day = data.get(field)
            if day is not None and not EARLIEST_DAY <= day <= LATEST_DAY:
                self.add_error(field, f"Give a date between {EARLIEST_DAY} and {LATEST_DAY}.")
                data.pop(field, None)
        start, end = data.get("start"), data.get("end")
        if start and end and end < start:
            self.add_error("end", "The end is before the start.")
        return data

    def bounds(self, now: datetime) -> tuple[datetime, datetime]:
        """``[start 00:00, end+1 00:00)`` in UTC; by default the last 7 days."""
        data = self.cleaned_data if self.is_valid() else {}
        today = now.astimezone(UTC).date()
        end_day = data.get("end") or today
        start_day = data.get("start") or end_day - timedelta(days=6)
        try:
            end = datetime.combine(end_day + timedelta(days=1), time(), tzinfo=UTC)
        except OverflowError:
            end = datetime.max.replace(tzinfo=UTC)
        return datetime.combine(start_day, time(), tzinfo=UTC), end


#: Allocated-but-idle GPUs listed under the charts (the heatmap shows them all).
IDLE_LISTED = 20


def cluster_charts(
    start: datetime, end: datetime, now: datetime, jobs: figures.JobsInRange, occupancy: Occupancy
) -> dict[str, Any]:
    """The overview's figures over ``[start, end)`` (clipped to ``now``) and the idle
    allocated GPUs, the GPU ones from the page's ``occupancy``. A fixed number of
    queries; no raw samples beyond the last minutes."""
    until = max(min(end, now), start + timedelta(minutes=1))
    nodes, cells = readings.gpu_grid(now, occupancy)
    window = readings.recent_window()
    utilization = series(None, start, until, "utilization")  # every GPU: no filter on them
    built = {
        "gpu-heatmap": charts.allocation_heatmap(cells, nodes),
        "allocated-utilization": charts.allocated_utilization_figure(
            cells, readings.IDLE_BELOW_PCT, f"last {window.total_seconds() / 60:g} min"
        ),
        "utilization": charts.band_figure(utilization, "GPU utilization, all GPUs", span=(start, until)),
        "queue": charts.queue_figure(queue_history(start, until, settings.MONITORING_CHART_MAX_POINTS), (start, until)),
        "waits": charts.wait_figure(jobs.waits),
        "gpu-hours": charts.gpu_hours_figure([(h.account, h.gpu_hours) for h in jobs.hours]),
    }
    idle = [charts.GpuCell._make(cell) for cell in cells if cell[2] == "allocated, idle"]  # [2]: its state
    return {
        "charts": [(name, figure, f"figure-{name}") for name, figure in built.items()],
        "idle_gpus": idle[:IDLE_LISTED],
        "idle_count": len(idle),
        "idle_below": readings.IDLE_BELOW_PCT,
    }


@staff_required
@require_GET
def cluster_overview(request: HttpRequest) -> HttpResponse:
    """Charts (GPU heatmap, utilization, queue over time, waits, GPU-hours), capacity and
    queue summary, GPU-hours by account."""
    now = timezone.now()
    form = RangeForm(request.GET or None)
    start, end = form.bounds(now)
    jobs = figures.jobs_in_range(start, end, now) if not form.errors else figures.JobsInRange([], [])
    hours = jobs.hours
    by_state = figures.jobs_by_state()
    # The GPUs and their holders, read once for the capacity table and the GPU charts.
    occupancy = read_occupancy()
    node_states = Counter(state for _, state in occupancy.nodes)
    tick = TickState.objects.filter(pk=1).only("stranded", "stranded_at").first()
    return render(
        request,
        "portal/manage/cluster.html",
        {
            "form": form,
            "start": start,
            "end": end,
            "hours": hours,
            "total_hours": sum(h.gpu_hours for h in hours),
            "capacity": figures.free_gpus_by_model(occupancy),
            "stranded": tick.stranded if tick and tick.stranded_at else None,
            # by model name: PostgreSQL's jsonb keeps an object's keys in its own order
            "stranded_rows": sorted((tick.stranded.get("models") or {}).items()) if tick else [],
            "stranded_at": tick.stranded_at if tick else None,
            "reservations": ahead(now),
            "jobs_by_state": [(s.label, by_state[s.value]) for s in JobState if by_state[s.value]],
            "node_states": sorted(node_states.items()),
            "csv_query": request.GET.urlencode(),
            **cluster_charts(start, end, now, jobs, occupancy),
        },
    )


@staff_required
@require_GET
def gpu_hours_csv(request: HttpRequest) -> HttpResponse:
    now = timezone.now()
    form = RangeForm(request.GET or None)
    if form.errors:
        return HttpResponse("; ".join(str(e) for errs in form.errors.values() for e in errs), status=400)
    start, end = form.bounds(now)
    body = figures.gpu_hours_csv(figures.gpu_hours_by_account(start, end, now), start, end)
    response = HttpResponse(body, content_type="text/csv")
    response["Content-Disposition"] = f'attachment; filename="gpu-hours-{start:%Y%m%d}-{end:%Y%m%d}.csv"'
    return response
