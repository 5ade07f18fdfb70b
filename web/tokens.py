"""API tokens: create one (shown once) and revoke."""

from __future__ import annotations

from typing import Any

from django import forms
from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.http import HttpRequest, HttpResponse
from django.shortcuts import get_object_or_404, redirect, render
from django.views.decorators.http import require_POST

from common.api.validators import plain_name
from people.models import ApiToken
from people.services import create_api_token, revoke_api_token


class TokenForm(forms.Form):
    name = forms.CharField(
        max_length=64, help_text="Where you will use it, for example 'laptop'.", validators=[plain_name]
    )
    expires_in_days = forms.IntegerField(
        label="Expires after (days)",
        min_value=1,
        max_value=3650,
        required=False,
        help_text="Empty: until you revoke it.",
    )
    read_only = forms.BooleanField(label="Read-only", required=False, help_text="It can read, never submit or change.")


@login_required
def tokens(request: HttpRequest) -> HttpResponse:
    """List, create (the secret is shown once, in this response only) and revoke tokens."""
    user: Any = request.user
    secret = ""
    if request.method == "POST":
        form = TokenForm(request.POST)
        if form.is_valid():
            data = form.cleaned_data
            _, secret = create_api_token(
                request.user, data["name"], expires_in_days=data["expires_in_days"], read_only=data["read_only"]
            )
            form = TokenForm()
    else:
        form = TokenForm()
    return render(
        request,
        "web/tokens.html",
        {
            "form": form,
            "secret": secret,
            "tokens": ApiToken.objects.filter(user_id=user.pk),
            "api_url": request.build_absolute_uri("/").rstrip("/"),
        },
    )


@login_required
@require_POST
def revoke_token(request: HttpRequest, token_id: int) -> HttpResponse:
    token = get_object_or_404(ApiToken, pk=token_id, user_id=request.user.pk)
    revoke_api_token(token)
    messages.success(request, f"Token {token.name!r} revoked.")
    return redirect("web:tokens")
