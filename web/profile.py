"""The user's own page: who they are on the clusters (their cluster identity), their
accounts and roles, the default account their submissions without one go to, their
e-mail address (or where their directory's comes from), what they want to be told and
how (``notifications``), and every message sent to them. The page says when e-mail
cannot reach them: no address, or a site whose mail goes to no inbox."""

from __future__ import annotations

from typing import Any

from django import forms
from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.http import HttpRequest, HttpResponse
from django.shortcuts import redirect, render

from common.forms import NulFreeCharField
from notifications import outbound
from notifications.models import Channel, Delivery, Preference, Status, offered
from notifications.send import mail_kept_elsewhere
from people.access import default_account
from people.email import address_directory, clean_address
from people.models import ClusterIdentity, Membership
from people.services import set_default_account, set_email


class DefaultAccountForm(forms.Form):
    default_account = forms.ModelChoiceField(
        queryset=Membership.objects.none(),
        label="Default account",
        help_text=(
            'Jobs that name no account are charged here: the submit form\'s "default" choice, '
            "the API and qm without an account, a script without #SBATCH -A."
        ),
        empty_label=None,
    )

    def __init__(self, *args: Any, user: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        field: Any = self.fields["default_account"]
        field.queryset = Membership.objects.filter(user_id=user.pk).select_related("account").order_by("account__name")
        field.label_from_instance = lambda membership: membership.account.name


#: The "By e-mail" box's help when the user has no address.
NO_ADDRESS = "Inactive: you have no e-mail address, so no e-mail is sent."


class EmailForm(forms.Form):
    address = NulFreeCharField(
        required=False,
        max_length=254,
        label="E-mail address",
        widget=forms.EmailInput,
        help_text="Where your notifications by e-mail go. Leave it empty to get no e-mail.",
    )

    def __init__(self, *args: Any, user: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.user = user

    def clean_address(self) -> str:
        return clean_address(self.user, self.cleaned_data["address"])


class NotifyForm(forms.ModelForm):
    events = forms.MultipleChoiceField(
        choices=offered(staff=False),
        widget=forms.CheckboxSelectMultiple,
        required=False,
        label="Tell me when",
    )
    # A URL typed without its scheme is https (Django 6's default, set here already).
    webhook_url = forms.URLField(required=False, max_length=500, assume_scheme="https", label="Webhook URL")

    class Meta:
        model = Preference
        fields = ["events", "email", "webhook_url", "webhook_format"]
        labels = {"email": "By e-mail", "webhook_url": "Webhook URL", "webhook_format": "Webhook format"}
        help_texts = {
            "webhook_url": "Each message is POSTed here, signed (X-Quartermaster-Signature, HMAC-SHA256).",
        }

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        events = self.fields["events"]
        assert isinstance(events, forms.MultipleChoiceField)
        events.choices = offered(staff=self.instance.user.is_staff)  # staff's events for staff only
        address = self.instance.user.email
        self.fields["email"].help_text = f"To {address}." if address else NO_ADDRESS
        # Ticking it would send nothing: the outbox makes no e-mail for a user without an address.
        self.fields["email"].disabled = not address

    def clean_webhook_url(self) -> str:
        url: str = self.cleaned_data["webhook_url"]
        if url and (reason := outbound.refusal(url)):
            raise forms.ValidationError(reason)
        return url


def _notify_form(request: HttpRequest, user: Any) -> tuple[NotifyForm, Preference]:
    pref = Preference.of(user.pk, staff=user.is_staff)
    data = request.POST if request.method == "POST" and request.POST.get("form") == "notify" else None
    return NotifyForm(data, instance=pref), pref


def _email_form(request: HttpRequest, user: Any) -> EmailForm:
    if request.method == "POST" and request.POST.get("form") == "email":
        return EmailForm(request.POST, user=user)
    return EmailForm(initial={"address": user.email}, user=user)


def _email_saved(address: str) -> str:
    return f"Your notifications by e-mail now go to {address}." if address else "Your e-mail address is removed."


def _last_mail_error(user: Any) -> str:
    """Why the latest e-mail to ``user`` could not be sent yet (a mail server that is
    down, an address it refuses), or "" when it went or none was tried."""
    latest = Delivery.objects.filter(user_id=user.pk, channel=Channel.EMAIL).order_by("-id").first()
    return latest.last_error if latest is not None and latest.status != Status.SENT else ""


def _account_form(request: HttpRequest, user: Any) -> DefaultAccountForm:
    if request.method == "POST" and request.POST.get("form") == "account":
        return DefaultAccountForm(request.POST, user=user)
    default = default_account(user)
    initial = Membership.objects.filter(user_id=user.pk, account=default).first() if default else None
    return DefaultAccountForm(initial={"default_account": initial}, user=user)


@login_required
def profile(request: HttpRequest) -> HttpResponse:
    """Three forms, told apart by their hidden ``form`` field."""
    user: Any = request.user
    email_form = _email_form(request, user)
    if email_form.is_bound and email_form.is_valid():
        set_email(user, user, email_form.cleaned_data["address"])
        messages.success(request, _email_saved(user.email))
        return redirect("web:profile")
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
            "email_form": email_form,
            "email_directory": address_directory(user),
            "mail_kept_elsewhere": mail_kept_elsewhere(),
            "last_mail_error": _last_mail_error(user),
            "notify_form": notify_form,
            "webhook_secret": pref.webhook_secret if pref.pk else "",
            "deliveries": Delivery.objects.filter(user_id=user.pk).order_by("-id")[:50],
        },
    )
