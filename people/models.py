"""The people side: the fair-share account tree, who belongs where, QOS and quotas."""

from __future__ import annotations

import hashlib
import secrets
from typing import Any

from django.conf import settings
from django.core.exceptions import ValidationError
from django.core.validators import RegexValidator
from django.db import models
from django.db.models import Q
from django.utils import timezone

from people.choices import IdentitySource, Role
from people.limits import qos_limit


class Account(models.Model):
    """A node of the fair-share tree (a lab, a group, a project).

    ``shares`` is this account's weight among its siblings, as Slurm's ``Fairshare=``.
    """

    name = models.SlugField(max_length=64, unique=True)
    parent = models.ForeignKey("self", null=True, blank=True, on_delete=models.PROTECT, related_name="children")
    shares = models.PositiveIntegerField(default=1)
    description = models.CharField(max_length=200, blank=True)
    created_at = models.DateTimeField(auto_now_add=True)
    #: The QOS its jobs may use (Slurm's association QOS list); empty: the parent's list,
    #: and at the root the site's default QOS only (see ``people.access.usable_qos``).
    allowed_qos: models.ManyToManyField[Qos, Any] = models.ManyToManyField(
        "Qos", blank=True, related_name="allowed_for"
    )
    #: The QOS of a job that names none; empty: the parent's default, then the site's.
    default_qos = models.ForeignKey("Qos", null=True, blank=True, on_delete=models.SET_NULL, related_name="default_for")
    #: The idle-GPU rule of its jobs (``monitoring.idle``); empty: the site's IDLE_* settings.
    idle_below_pct = models.FloatField(
        null=True, blank=True, help_text="A running job whose GPUs average under this (%)..."
    )
    idle_minutes = models.PositiveIntegerField(null=True, blank=True, help_text="...for this many minutes is idle.")
    idle_action = models.CharField(
        max_length=8,
        blank=True,
        choices=[("none", "none"), ("requeue", "requeue"), ("cancel", "cancel")],
        help_text="What happens to a job still idle IDLE_ACTION_MINUTES after it was flagged.",
    )
    idle_action_minutes = models.PositiveIntegerField(null=True, blank=True)

    class Meta:
        ordering = ["name"]

    def __str__(self) -> str:
        return self.name


class Membership(models.Model):
    """A user's place in an account. Coordinators see and manage the account's jobs."""

    user = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="memberships")
    account = models.ForeignKey(Account, on_delete=models.CASCADE, related_name="memberships")
    role = models.CharField(max_length=16, choices=Role.choices, default=Role.MEMBER)
    #: The account a submission without one is charged to (at most one per user; none
    #: marked: the user's first membership), as Slurm's DefaultAccount.
    is_default = models.BooleanField(default=False)

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["user", "account"], name="membership_unique_user_account"),
            models.UniqueConstraint(
                fields=["user"], condition=models.Q(is_default=True), name="membership_one_default_per_user"
            ),
        ]
        ordering = ["account__name", "user__username"]

    def __str__(self) -> str:
        return f"{self.user} in {self.account} ({self.role})"


def qos_limit_field(name: str) -> models.PositiveIntegerField:  # type: ignore[type-arg]
    """The column of the QOS limit ``name``, labelled and explained as
    ``people.limits.QOS_LIMITS`` says; empty: no limit."""
    limit = qos_limit(name)
    meaning = f"{limit.meaning} Empty: no limit."
    return models.PositiveIntegerField(limit.label, null=True, blank=True, help_text=meaning)


class Qos(models.Model):
    """Quality of service: a priority boost, walltime ceiling, preemption rules and
    limits on what its jobs hold (``people.limits.QOS_LIMITS``; empty: no limit)."""

    name = models.SlugField(max_length=32, unique=True)
    description = models.CharField(max_length=200, blank=True)
    priority = models.IntegerField(default=0)
    preemptible = models.BooleanField(default=False, help_text="Jobs in this QOS may be preempted.")
    may_preempt = models.ManyToManyField(
        "self",
        symmetrical=False,
        blank=True,
        related_name="preempted_by",
        help_text="QOS whose jobs this one may preempt.",
    )
    max_walltime_seconds = models.PositiveIntegerField(null=True, blank=True)
    usage_factor = models.FloatField(default=1.0, help_text="Multiplier on recorded usage (0 = free).")
    max_gpus_per_user = qos_limit_field("max_gpus_per_user")
    max_cpus_per_user = qos_limit_field("max_cpus_per_user")
    max_running_jobs_per_user = qos_limit_field("max_running_jobs_per_user")
    max_submitted_jobs_per_user = qos_limit_field("max_submitted_jobs_per_user")
    max_gpus = qos_limit_field("max_gpus")

    class Meta:
        ordering = ["name"]
        verbose_name = "QOS"
        verbose_name_plural = "QOS"

    def __str__(self) -> str:
        return self.name


class Quota(models.Model):
    """Limits for exactly one account or one user. Empty fields mean "no limit"."""

    account = models.OneToOneField(Account, null=True, blank=True, on_delete=models.CASCADE, related_name="quota")
    user = models.OneToOneField(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.CASCADE, related_name="quota"
    )
    max_gpus = models.PositiveIntegerField(null=True, blank=True, help_text="Concurrent GPUs in total.")
    max_gpus_per_model = models.JSONField(default=dict, blank=True, help_text='e.g. {"H100-80GB": 16}')
    max_running_jobs = models.PositiveIntegerField(null=True, blank=True)
    max_pending_jobs = models.PositiveIntegerField(null=True, blank=True)
    max_walltime_seconds = models.PositiveIntegerField(null=True, blank=True)
    guaranteed_gpus = models.PositiveIntegerField(
        null=True,
        blank=True,
        help_text="Accounts only: GPUs guaranteed to the account's subtree (Kueue's nominal quota). "
        "Use beyond it borrows idle GPUs, which an account below its guarantee may reclaim.",
    )
    borrowing_limit_gpus = models.PositiveIntegerField(
        null=True, blank=True, help_text="Accounts only: how many GPUs beyond the guarantee it may borrow (empty: any)."
    )

    class Meta:
        constraints = [
            models.CheckConstraint(
                condition=Q(account__isnull=False, user__isnull=True) | Q(account__isnull=True, user__isnull=False),
                name="quota_exactly_one_subject",
            ),
            models.CheckConstraint(
                condition=Q(account__isnull=False) | Q(guaranteed_gpus__isnull=True, borrowing_limit_gpus__isnull=True),
                name="quota_guarantee_accounts_only",
            ),
            models.CheckConstraint(
                condition=Q(borrowing_limit_gpus__isnull=True) | Q(guaranteed_gpus__isnull=False),
                name="quota_borrowing_limit_needs_guarantee",
            ),
        ]

    def __str__(self) -> str:
        return f"quota for {self.account or self.user}"


class HashedToken(models.Model):
    """A bearer credential: only a SHA-256 digest is stored, the secret is shown once,
    and ``key_prefix`` (public, in the token) finds the row to compare against."""

    PREFIX = ""

    key_prefix = models.CharField(max_length=16, unique=True, editable=False)
    digest = models.CharField(max_length=64, editable=False)
    created_at = models.DateTimeField(auto_now_add=True)
    last_used_at = models.DateTimeField(null=True, blank=True)
    revoked_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        abstract = True
        ordering = ["-created_at"]

    @staticmethod
    def hash(secret: str) -> str:
        return hashlib.sha256(secret.encode()).hexdigest()

    @classmethod
    def new_secret(cls) -> tuple[str, str]:
        """Return ``(key_prefix, full_token)``; the prefix is the lookup key."""
        prefix = secrets.token_hex(6)
        return prefix, f"{cls.PREFIX}{prefix}_{secrets.token_urlsafe(32)}"


class ApiToken(HashedToken):
    """A personal API token (``qm_<prefix>_<secret>``)."""

    PREFIX = "qm_"

    user = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="api_tokens")
    name = models.CharField(max_length=64)
    #: After this the token no longer authenticates (None: until revoked).
    expires_at = models.DateTimeField(null=True, blank=True)
    #: Reads only: any request that would change something is refused.
    read_only = models.BooleanField(default=False)

    class Meta(HashedToken.Meta):
        pass

    def __str__(self) -> str:
        return f"{self.name} ({self.key_prefix}…)"

    @property
    def expired(self) -> bool:
        return self.expires_at is not None and self.expires_at <= timezone.now()


#: A POSIX user name in the portable form Debian's ``adduser`` accepts by default, at most
#: 32 characters: what ``sudo -u`` and a Slurm or Kubernetes user name carry safely.
POSIX_NAME = r"^[a-z_][a-z0-9_-]{0,31}$"


def not_root(name: str) -> None:
    if name == "root":
        raise ValidationError("Jobs never run as root.")


def not_a_system_id(value: int | None) -> None:
    """Refuse root and system ids (below ``QM_MIN_JOB_UID``): a job never runs as one."""
    if value is not None and value < settings.QM_MIN_JOB_UID:
        raise ValidationError(
            f"{value} is a system id (below QM_MIN_JOB_UID={settings.QM_MIN_JOB_UID}); jobs never run as one."
        )


class ClusterIdentity(models.Model):
    """Who a portal user is on the clusters: the POSIX user their jobs run as (and its
    uid/gid, for backends that set them: Kubernetes pods, the local backend as root).

    A user without one cannot run jobs on a backend that runs each job as its owner:
    submit refuses it, and such a backend refuses a spec without one, so a job never
    falls back to the portal's own user. Set by staff, or filled in from LDAP or OIDC at
    login (``source``). Never a system account: see ``QM_MIN_JOB_UID``.
    """

    user = models.OneToOneField(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="cluster_identity")
    username = models.CharField(
        max_length=32,
        unique=True,
        validators=[RegexValidator(POSIX_NAME, "A POSIX user name: lower-case letters, digits, _ and -."), not_root],
        help_text="The POSIX user the owner's jobs run as.",
    )
    uid = models.PositiveIntegerField(
        null=True, blank=True, validators=[not_a_system_id], help_text="Numeric user id (Kubernetes, local backend)."
    )
    gid = models.PositiveIntegerField(
        null=True, blank=True, validators=[not_a_system_id], help_text="Numeric primary group id."
    )
    source = models.CharField(max_length=8, choices=IdentitySource.choices, default=IdentitySource.STAFF)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        ordering = ["username"]
        constraints = [models.UniqueConstraint(fields=["uid"], name="cluster_identity_unique_uid")]
        verbose_name_plural = "cluster identities"

    def __str__(self) -> str:
        return f"{self.user} as {self.username}"


class AuditEntry(models.Model):
    """One change to an account, quota, membership or node, whichever way it came (pages,
    API, Django admin, or the system itself, e.g. monitoring's drains): who, when, what,
    and the fields that changed as ``{"field": [old, new]}``. Append-only; written by the
    services that make the change (``people.services``, ``scheduler.clusters.nodes``)."""

    at = models.DateTimeField(db_index=True)
    actor = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="audit_entries"
    )
    #: The actor's username at the time, kept if the user is deleted.
    actor_name = models.CharField(max_length=150)
    action = models.CharField(max_length=32)
    target_type = models.CharField(max_length=64)
    target_id = models.CharField(max_length=64, blank=True)
    target_repr = models.CharField(max_length=200)
    changes = models.JSONField(default=dict, blank=True)

    class Meta:
        ordering = ["-at", "-id"]
        verbose_name_plural = "audit entries"

    def __str__(self) -> str:
        return f"{self.at:%Y-%m-%d %H:%M:%S} {self.actor_name} {self.action} {self.target_type} {self.target_repr}"


class JobTemplate(models.Model):
    """A user's saved submit form: the form's fields by name, as the submit page posts them."""

    owner = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="job_templates")
    name = models.CharField(max_length=64)
    fields = models.JSONField(default=dict)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["name"]
        constraints = [models.UniqueConstraint(fields=["owner", "name"], name="jobtemplate_unique_owner_name")]

    def __str__(self) -> str:
        return f"{self.name} ({self.owner})"


class SiteTemplate(models.Model):
    """A submit form's starting point an admin saved for everyone (from the submit page:
    no code), shown beside the built-in templates: the form's fields by name, a
    description, and who saved it last."""

    name = models.CharField(max_length=64, unique=True)
    description = models.CharField(max_length=300, blank=True)
    fields = models.JSONField(default=dict)
    saved_by = models.ForeignKey(settings.AUTH_USER_MODEL, null=True, on_delete=models.SET_NULL, related_name="+")
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        ordering = ["name"]

    def __str__(self) -> str:
        return self.name
