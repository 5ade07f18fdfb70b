"""Who may see what. Every API view and page builds its queryset from these.

- A researcher sees their own jobs.
- An account coordinator also sees (and may act on) every job of the accounts they
  coordinate.
- Staff see everything.
Anything not visible answers 404, so ids of other people's jobs leak nothing.

Also here: which QOS an account's jobs may use (``usable_qos``).
"""

from __future__ import annotations

from typing import Any

from django.conf import settings
from django.db.models import Q, QuerySet

from portal.choices import Role
from portal.models import Account, Membership, Qos, Quota


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


def default_account(user: Any) -> Account | None:
    """Where a submission that names no account goes: the membership the user marked
    default, else their first (the oldest), as Slurm's DefaultAccount; None without one."""
    membership = (
        Membership.objects.filter(user_id=user.pk).select_related("account").order_by("-is_default", "id").first()
    )
    return membership.account if membership else None


def may_submit_to(user: Any, account: Account) -> bool:
    return bool(user.is_staff) or Membership.objects.filter(user_id=user.pk, account=account).exists()


def usable_qos(account: Account) -> tuple[list[Qos], Qos | None]:
    """The QOS ``account``'s jobs may use, and the one a job that names none gets.

    As Slurm's association QOS: an account's own list, else its nearest ancestor's; an
    account tree with no list anywhere may use only the site's default QOS
    (``SCHEDULER_DEFAULT_QOS``, "normal"), so a privileged QOS (one that preempts) is
    never open to everyone by omission. The default is the account's own, else its
    nearest ancestor's, else the site's, and always one of the usable ones.
    """
    allowed: list[Qos] | None = None
    default: Qos | None = None
    node: Account | None = account
    while node is not None and (allowed is None or default is None):
        if allowed is None:
            own = list(node.allowed_qos.all())
            allowed = own or None
        if default is None and node.default_qos_id is not None:
            default = node.default_qos
        node = node.parent
    site = Qos.objects.filter(name=settings.SCHEDULER_DEFAULT_QOS).first()
    if allowed is None:
        allowed = [site] if site is not None else []
    if default is None or default not in allowed:
        default = site if site in allowed else (allowed[0] if allowed else None)
    return allowed, default
