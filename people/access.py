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

from common.db.sql import JoinedRows, quoted_table
from people.choices import Role
from people.models import Account, Membership, Qos, Quota


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
    found = _MEMBERSHIPS.read("t0.user_id = %s", [user.pk], "ORDER BY t0.is_default DESC, t0.id LIMIT 1")
    return found[0].account if found else None


def may_submit_to(user: Any, account: Account) -> bool:
    return bool(user.is_staff) or Membership.objects.filter(user_id=user.pk, account=account).exists()


_MEMBERSHIPS = JoinedRows(Membership, "account")
_QOS = JoinedRows(Qos)


def _qos_roles() -> str:
    """A ``WITH`` clause: ``roles(qos_id, role, depth)``, the QOS the account (first
    parameter) and each ancestor (``depth`` 1, 2, ...) allow and make default, and the
    site's default QOS (named by the second parameter; depth -1). One query, where
    walking the tree took two to four (the depth bound stops a corrupted cycle)."""
    allowed = Account.allowed_qos.through
    accounts, links = quoted_table(Account), quoted_table(allowed)
    return (
        "WITH RECURSIVE chain(id, parent_id, default_qos_id, depth) AS ("
        f" SELECT id, parent_id, default_qos_id, 0 FROM {accounts} WHERE id = %s"
        " UNION ALL"
        f" SELECT a.id, a.parent_id, a.default_qos_id, chain.depth + 1 FROM {accounts} a"
        " JOIN chain ON a.id = chain.parent_id WHERE chain.depth < 64),"
        " roles(qos_id, role, depth) AS ("
        f" SELECT link.qos_id, 'allowed', chain.depth FROM chain JOIN {links} link ON link.account_id = chain.id"
        " UNION ALL"
        " SELECT default_qos_id, 'default', depth FROM chain WHERE default_qos_id IS NOT NULL"
        " UNION ALL"
        f" SELECT id, 'site', -1 FROM {quoted_table(Qos)} WHERE name = %s)"
    )


def usable_qos(account: Account) -> tuple[list[Qos], Qos | None]:
    """The QOS ``account``'s jobs may use, and the one a job that names none gets.

    As Slurm's association QOS: an account's own list, else its nearest ancestor's; an
    account tree with no list anywhere may use only the site's default QOS
    (``SCHEDULER_DEFAULT_QOS``, "normal"), so a privileged QOS (one that preempts) is
    never open to everyone by omission. The default is the account's own, else its
    nearest ancestor's, else the site's, and always one of the usable ones.
    """
    rows = _QOS.read(
        params=[account.pk, settings.SCHEDULER_DEFAULT_QOS],
        tail="ORDER BY roles.depth, t0.name",
        before=_qos_roles(),
        join="JOIN roles ON roles.qos_id = t0.id",
        extra={"role": "roles.role", "depth": "roles.depth"},
    )
    by_role: dict[str, list[tuple[int, Qos]]] = {"allowed": [], "default": [], "site": []}
    for qos in rows:  # nearest first
        by_role[qos.role].append((qos.depth, qos))  # type: ignore[attr-defined]  # read as extra columns
    own = by_role["allowed"]
    allowed: list[Qos] | None = [qos for depth, qos in own if depth == own[0][0]] if own else None
    default = by_role["default"][0][1] if by_role["default"] else None
    site = by_role["site"][0][1] if by_role["site"] else None
    if allowed is None:
        allowed = [site] if site is not None else []
    if default is None or default not in allowed:
        default = site if site in allowed else (allowed[0] if allowed else None)
    return allowed, default
