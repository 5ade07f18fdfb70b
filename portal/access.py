"""Who may see what. Every API view and page builds its queryset from these.

- A researcher sees their own jobs.
- An account coordinator also sees (and may act on) every job of the accounts they
  coordinate.
- Staff see everything.
Anything not visible answers 404, so ids of other people's jobs leak nothing.
"""

from __future__ import annotations

from typing import Any

from django.db.models import Q, QuerySet

from portal.choices import Role
from portal.models import Account, Membership, Quota


def member_account_ids(user: Any) -> list[int]:
    return list(Membership.objects.filter(user_id=user.pk).values_list("account_id", flat=True))


def coordinated_account_ids(user: Any) -> list[int]:
    return list(Membership.objects.filter(user_id=user.pk, role=Role.COORDINATOR).values_list("account_id", flat=True))


def visible_jobs(user: Any, queryset: QuerySet[Any]) -> QuerySet[Any]:
    if user.is_staff:
        return queryset
    return queryset.filter(Q(owner_id=user.pk) | Q(account_id__in=coordinated_account_ids(user)))


def visible_accounts(user: Any) -> QuerySet[Account]:
    if user.is_staff:
        return Account.objects.all()
    return Account.objects.filter(pk__in=member_account_ids(user))


def visible_quotas(user: Any) -> QuerySet[Quota]:
    if user.is_staff:
        return Quota.objects.all()
    return Quota.objects.filter(Q(user_id=user.pk) | Q(account_id__in=member_account_ids(user)))


def may_submit_to(user: Any, account: Account) -> bool:
    return bool(user.is_staff) or Membership.objects.filter(user_id=user.pk, account=account).exists()
