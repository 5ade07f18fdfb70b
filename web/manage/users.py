"""Staff's pages of people: every user with their accounts, cluster identity and quota,
and one user's quota to edit (Slurm's per-user association limits): the same form and
the same API validation as an account's quota, without the account-only guarantee."""

from __future__ import annotations

from typing import Any

from django.contrib import messages
from django.contrib.auth import get_user_model
from django.db.models import Prefetch
from django.http import HttpRequest, HttpResponse
from django.shortcuts import get_object_or_404, redirect, render

from people import services
from people.models import ClusterIdentity, Membership, Quota
from web.manage.access import staff_required
from web.manage.accounts import QuotaForm, quota_initial, save_quota


@staff_required
def users(request: HttpRequest) -> HttpResponse:
    """Every user (a handful of queries, however many there are)."""
    people = (
        get_user_model()
        .objects.order_by("username")
        .prefetch_related(Prefetch("memberships", queryset=Membership.objects.select_related("account")))
    )
    quotas = {q.user_id: q for q in Quota.objects.filter(user__isnull=False)}
    identities = dict(ClusterIdentity.objects.values_list("user_id", "username"))
    rows = [(person, identities.get(person.pk), quotas.get(person.pk)) for person in people]
    return render(request, "web/manage/users.html", {"rows": rows})


@staff_required
def user_quota(request: HttpRequest, user_id: int) -> HttpResponse:
    """One user's quota: set, change or remove it (audited)."""
    person: Any = get_object_or_404(get_user_model(), pk=user_id)
    quota = Quota.objects.filter(user=person).first()
    form = QuotaForm(initial=quota_initial(quota), quota=quota, for_user=True)
    if request.method == "POST":
        if request.POST.get("form") == "quota-delete" and quota is not None:
            services.delete_quota(request.user, quota)
            messages.success(request, f"Quota of {person.username} removed: only their accounts' limits apply.")
            return redirect("web:manage-user", user_id=person.pk)
        form = QuotaForm(request.POST, quota=quota, for_user=True)
        if form.is_valid() and save_quota(form, {"user": person.username}, quota, request.user):
            messages.success(request, f"Quota of {person.username} saved.")
            return redirect("web:manage-user", user_id=person.pk)
    return render(request, "web/manage/user_quota.html", {"person": person, "quota": quota, "quota_form": form})
