"""The user's own page: who they are on the clusters (their cluster identity), their
accounts and roles, and the default account their submissions without one go to."""

from __future__ import annotations

from typing import Any

from django import forms
from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.http import HttpRequest, HttpResponse
from django.shortcuts import redirect, render

from portal.access import default_account
from portal.models import ClusterIdentity, Membership
from portal.services import set_default_account


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


@login_required
def profile(request: HttpRequest) -> HttpResponse:
    user: Any = request.user
    if request.method == "POST":
        form = DefaultAccountForm(request.POST, user=user)
        if form.is_valid():
            membership = form.cleaned_data["default_account"]
            set_default_account(user, membership)
            messages.success(request, f"Jobs without an account now go to {membership.account.name}.")
            return redirect("web:profile")
    else:
        default = default_account(user)
        initial = Membership.objects.filter(user_id=user.pk, account=default).first() if default else None
        form = DefaultAccountForm(initial={"default_account": initial}, user=user)
    memberships = Membership.objects.filter(user_id=user.pk).select_related("account").order_by("account__name")
    return render(
        request,
        "portal/profile.html",
        {
            "form": form,
            "memberships": memberships,
            "identity": ClusterIdentity.objects.filter(user_id=user.pk).first(),
        },
    )
