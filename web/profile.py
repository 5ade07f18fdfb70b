"""The user's own page: who they are on the clusters (their cluster identity), their
accounts and roles, the default account their submissions without one go to, what
they want to be told and how (``notifications``), and every message sent to them."""

from __future__ import annotations

from typing import Any

from django import forms
from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.http import HttpRequest, HttpResponse
from django.shortcuts import redirect, render

from notifications import outbound
from notifications.models import Delivery, Event, Preference
from people.access import default_account
from people.models import ClusterIdentity, Membership
from people.services import set_default_account


class DefaultAccountForm(forms.Form):
    default_account = forms.ModelChoiceField(
        queryset=Membership.objects.none(),
        label="Default account",
        help_text="Jobs that name no account (the API, qm, the submit form's first choice) are charged here.",
        empty_label=None,
    )

    def __init__(self, *args: Any, user: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        field: Any = self.fields["default_account"]
        field.queryset = Membership.objects.filter(user_id=user.pk).select_related("account").order_by("account__name")
        field.label_from_instance = lambda membership: membership.account.name


class NotifyForm(forms.ModelForm):
    events = forms.MultipleChoiceField(
        choices=Event.choices, widget=forms.CheckboxSelectMultiple, required=False, label="Tell me when"
    )
    # A URL typed without its scheme is https (Django 6's default, set here already).
    webhook_url = forms.URLField(required=False, max_length=500, assume_scheme="https", label="Webhook URL")

    class Meta:
        model = Preference
        fields = ["events", "email", "webhook_url", "webhook_format"]
        labels = {"email": "By e-mail", "webhook_url": "Webhook URL", "webhook_format": "Webhook format"}
        help_texts = {
            "email": "To the address of your account.",
            "webhook_url": "Each message is POSTed here, signed (X-Quartermaster-Signature, HMAC-SHA256).",
        }

    def clean_webhook_url(self) -> str:
        url: str = self.cleaned_data["webhook_url"]
        if url and (reason := outbound.refusal(url)):
            raise forms.ValidationError(reason)
        return url


def _notify_form(request: HttpRequest, user: Any) -> tuple[NotifyForm, Preference]:
    pref = Preference.of(user.pk)
    data = request.POST if request.method == "POST" and request.POST.get("form") == "notify" else None
    return NotifyForm(data, instance=pref), pref


def _account_form(request: HttpRequest, user: Any) -> DefaultAccountForm:
    if request.method == "POST" and request.POST.get("form") == "account":
        return DefaultAccountForm(request.POST, user=user)
    default = default_account(user)
    initial = Membership.objects.filter(user_id=user.pk, account=default).first() if default else None
    return DefaultAccountForm(initial={"default_account": initial}, user=user)


@login_required
def profile(request: HttpRequest) -> HttpResponse:
    """Two forms, told apart by their hidden ``form`` field."""
    user: Any = request.user
    notify_form, pref = _notify_form(request, user)
    form = _account_form(request, user)
    if notify_form.is_bound and notify_form.is_valid():
        notify_form.save()
        messages.success(request, "Notification settings saved.")
        return redirect("web:profile")
    if form.is_bound and form.is_valid():
        membership = form.cleaned_data["default_account"]
        set_default_account(user, membership)
        messages.success(request, f"Jobs without an account now go to {membership.account.name}.")
        return redirect("web:profile")
    memberships = Membership.objects.filter(user_id=user.pk).select_related("account").order_by("account__name")
    return render(
        request,
        "web/profile.html",
        {
            "form": form,
            "memberships": memberships,
            "identity": ClusterIdentity.objects.filter(user_id=user.pk).first(),
            "notify_form": notify_form,
            "webhook_secret": pref.webhook_secret if pref.pk else "",
            "deliveries": Delivery.objects.filter(user_id=user.pk).order_by("-id")[:50],
        },
    )
