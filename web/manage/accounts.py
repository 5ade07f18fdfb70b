"""Accounts and fair-share: the tree, an account's form with its quota and members.

Every change goes through a service of :mod:`people.services`, which records its audit entry."""

from __future__ import annotations

from collections import defaultdict
from typing import Any

from django import forms
from django.contrib import messages
from django.core.exceptions import PermissionDenied
from django.http import HttpRequest, HttpResponse
from django.shortcuts import get_object_or_404, redirect, render
from django.utils import timezone
from django.views.decorators.http import require_GET

from monitoring import charts
from people import services
from people.api.serializers import AccountSerializer, MembershipSerializer, QuotaSerializer
from people.choices import Role
from people.limits import USER_LIMITS, WHOLE_LIMITS, quota_limit
from people.models import Account, AuditEntry, Membership, Qos, Quota
from scheduler.reads import reports
from scheduler.reads.inventory import load_inventory
from web.manage.access import blank_none, staff_required, validated
from web.manage.simulation_forms import PreviewForm
from web.words import format_walltime, parse_walltime


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
        "web/manage/accounts.html",
        {"rows": rows, "shares": shares, "fairshare_figure": charts.fairshare_figure(shares) if shares else None},
    )


class AccountForm(forms.Form):
    name = forms.CharField(max_length=64, help_text="Letters, digits, - and _.")
    parent = forms.ChoiceField(required=False, help_text="Empty: a top-level account.")
    shares = forms.CharField(max_length=12, initial="1", help_text="Weight among its siblings (Slurm's Fairshare=).")
    description = forms.CharField(max_length=200, required=False)
    allowed_qos = forms.MultipleChoiceField(
        required=False,
        label="Allowed QOS",
        widget=forms.CheckboxSelectMultiple,
        help_text="None ticked: the parent's, and at the root the site's default QOS only.",
    )
    default_qos = forms.ChoiceField(required=False, label="Default QOS", help_text="The QOS of a job that names none.")
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
        qos = [(name, name) for name in Qos.objects.order_by("name").values_list("name", flat=True)]
        allowed: Any = self.fields["allowed_qos"]
        allowed.choices = qos
        default: Any = self.fields["default_qos"]
        default.choices = [("", "the parent's, then the site's"), *qos]


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
        if "max_walltime_seconds" in self.fields:  # typed as on the submit form, not in seconds
            walltime: Any = self.fields["max_walltime_seconds"]
            walltime.label = "Max walltime"
            walltime.help_text = f"{walltime.help_text} As 4h, 90m, 1:30:00 or seconds."
        stored = dict(quota.max_gpus_per_model or {}) if quota else {}
        self.models = sorted(set(load_inventory().models) | set(stored))
        for i, model in enumerate(self.models):
            self.fields[f"model_{i}"] = forms.CharField(
                required=False, label=f"Max {model} GPUs", initial=stored.get(model, "")
            )

    def clean_max_walltime_seconds(self) -> int | str:
        text = self.cleaned_data["max_walltime_seconds"].strip()
        if not text:
            return ""
        try:
            return parse_walltime(text)
        except ValueError as exc:
            raise forms.ValidationError(str(exc)) from None

    def api_data(self, subject: dict[str, str]) -> dict[str, Any]:
        """The quota API's body for ``subject`` (``{"account": name}`` or ``{"user": name}``)."""
        data = self.cleaned_data
        body: dict[str, Any] = dict(subject)
        for name in WHOLE_LIMITS:
            if name in self.fields:
                body[name] = blank_none(data.get(name))
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
    shown = {name: getattr(quota, name) if getattr(quota, name) is not None else "" for name in WHOLE_LIMITS}
    if quota.max_walltime_seconds is not None:
        shown["max_walltime_seconds"] = format_walltime(quota.max_walltime_seconds)
    return shown


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
            "allowed_qos": [q.name for q in account.allowed_qos.all()],
            "default_qos": account.default_qos.name if account.default_qos else "",
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
        "web/manage/account_edit.html",
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
    body = {**data, "parent": blank_none(data["parent"]), "default_qos": blank_none(data["default_qos"])}
    for name in ("idle_below_pct", "idle_minutes", "idle_action_minutes"):
        body[name] = blank_none(data[name])
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
