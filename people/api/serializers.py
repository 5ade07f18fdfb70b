from __future__ import annotations

from typing import Any

from django.contrib.auth import get_user_model
from rest_framework import serializers
from rest_framework.validators import UniqueValidator

from common.api.fields import NulFreeCharField, SlugRelatedField
from common.api.strict import RejectUnknownFields
from common.api.validators import no_nul_characters, plain_name
from people.choices import IdentitySource
from people.email import clean_address
from people.limits import LIMIT_NAMES, QOS_LIMIT_NAMES, QOS_LIMITS, WHOLE_LIMITS, contradictions, quota_limit
from people.models import Account, ApiToken, ClusterIdentity, Membership, Qos, Quota

MAX_INT = 2**31 - 1


class AccountSerializer(RejectUnknownFields, serializers.ModelSerializer):
    parent = SlugRelatedField(  # type: ignore[assignment]  # a field named like Field.parent
        slug_field="name", queryset=Account.objects.all(), allow_null=True, required=False
    )
    shares = serializers.IntegerField(min_value=0, max_value=MAX_INT, default=1)
    allowed_qos = SlugRelatedField(
        slug_field="name",
        queryset=Qos.objects.all(),
        many=True,
        required=False,
        help_text="QOS its jobs may use; empty: the parent's, and at the root the site's default QOS only.",
    )
    default_qos = SlugRelatedField(
        slug_field="name",
        queryset=Qos.objects.all(),
        allow_null=True,
        required=False,
        help_text="QOS of a job that names none; empty: the parent's default, then the site's.",
    )

    class Meta:
        model = Account
        fields = [
            "id",
            "name",
            "parent",
            "shares",
            "description",
            "allowed_qos",
            "default_qos",
            "idle_below_pct",
            "idle_minutes",
            "idle_action",
            "idle_action_minutes",
            "created_at",
        ]
        read_only_fields = ["created_at"]
        extra_kwargs = {
            "idle_below_pct": {"min_value": 0, "max_value": 100},
            "idle_minutes": {"min_value": 1, "max_value": 100_000},
            "idle_action_minutes": {"min_value": 1, "max_value": 100_000},
        }

    def validate(self, attrs: dict[str, Any]) -> dict[str, Any]:
        """A default QOS must be one the account may use (its own list, when it gives one)."""
        default = attrs.get("default_qos", getattr(self.instance, "default_qos", None))
        if "allowed_qos" in attrs:
            allowed = list(attrs["allowed_qos"])
        else:
            allowed = list(self.instance.allowed_qos.all()) if self.instance is not None else []
        if default is not None and allowed and default not in allowed:
            names = ", ".join(q.name for q in allowed)
            raise serializers.ValidationError({"default_qos": f"{default.name!r} is not in allowed_qos ({names})."})
        return attrs

    def validate_parent(self, parent: Account | None) -> Account | None:
        """Refuse cycles: an account cannot sit under itself or its descendants."""
        node = parent
        while node is not None and self.instance is not None:
            if node.pk == self.instance.pk:
                raise serializers.ValidationError("An account cannot be its own ancestor.")
            node = node.parent
        return parent


class MembershipSerializer(RejectUnknownFields, serializers.ModelSerializer):
    user = SlugRelatedField(slug_field="username", queryset=get_user_model().objects.all())
    account = SlugRelatedField(slug_field="name", queryset=Account.objects.all())

    class Meta:
        model = Membership
        fields = ["id", "user", "account", "role"]


class QosSerializer(RejectUnknownFields, serializers.ModelSerializer):
    """A QOS; its limits (``people.limits.QOS_LIMITS``) are each 0 or more, or null for none."""

    may_preempt = SlugRelatedField(slug_field="name", queryset=Qos.objects.all(), many=True, required=False)
    priority = serializers.IntegerField(min_value=-1_000_000, max_value=1_000_000, default=0)
    max_walltime_seconds = serializers.IntegerField(min_value=1, max_value=MAX_INT, allow_null=True, required=False)
    usage_factor = serializers.FloatField(min_value=0, max_value=1000, default=1.0)

    class Meta:
        model = Qos
        fields = [
            "id",
            "name",
            "description",
            "priority",
            "preemptible",
            "may_preempt",
            "max_walltime_seconds",
            "usage_factor",
            *QOS_LIMIT_NAMES,
        ]
        extra_kwargs = {
            limit.name: {
                "min_value": 0,
                "max_value": MAX_INT,
                "allow_null": True,
                "required": False,
                "help_text": f"{limit.meaning} Slurm: {limit.slurm}. Null: no limit.",
            }
            for limit in QOS_LIMITS
        }


class QuotaSerializer(RejectUnknownFields, serializers.ModelSerializer):
    """Limits for one account or one user; empty means unlimited."""

    # The limits are people.limits.QUOTA_LIMITS: each whole-number one 0 or more, or null.

    account = SlugRelatedField(slug_field="name", queryset=Account.objects.all(), allow_null=True, required=False)
    user = SlugRelatedField(
        slug_field="username", queryset=get_user_model().objects.all(), allow_null=True, required=False
    )
    max_gpus_per_model = serializers.DictField(
        child=serializers.IntegerField(min_value=0, max_value=MAX_INT),
        required=False,
        validators=[no_nul_characters],
        help_text=quota_limit("max_gpus_per_model").meaning,
    )

    class Meta:
        model = Quota
        fields = ["id", "account", "user", *LIMIT_NAMES]
        extra_kwargs = {
            name: {
                "min_value": 0,
                "max_value": MAX_INT,
                "allow_null": True,
                "required": False,
                "help_text": quota_limit(name).meaning,
            }
            for name in WHOLE_LIMITS
        }

    def validate(self, attrs: dict[str, Any]) -> dict[str, Any]:
        account = attrs.get("account", getattr(self.instance, "account", None))
        user = attrs.get("user", getattr(self.instance, "user", None))
        if (account is None) == (user is None):
            raise serializers.ValidationError({"account": "Give exactly one of account or user."})
        guaranteed = attrs.get("guaranteed_gpus", getattr(self.instance, "guaranteed_gpus", None))
        borrowing = attrs.get("borrowing_limit_gpus", getattr(self.instance, "borrowing_limit_gpus", None))
        if user is not None and (guaranteed is not None or borrowing is not None):
            field = "guaranteed_gpus" if guaranteed is not None else "borrowing_limit_gpus"
            raise serializers.ValidationError({field: "Guarantees and borrowing limits are for accounts only."})
        if borrowing is not None and guaranteed is None:
            raise serializers.ValidationError(
                {"borrowing_limit_gpus": "A borrowing limit needs a guarantee (guaranteed_gpus) to borrow beyond."}
            )
        limits = {name: attrs.get(name, getattr(self.instance, name, None)) for name in LIMIT_NAMES}
        if problems := contradictions(limits):
            raise serializers.ValidationError(problems)
        others = Quota.objects.all() if self.instance is None else Quota.objects.exclude(pk=self.instance.pk)
        if account is not None and others.filter(account=account).exists():
            raise serializers.ValidationError({"account": f"Account {account.name} already has a quota."})
        if user is not None and others.filter(user=user).exists():
            raise serializers.ValidationError({"user": f"User {user} already has a quota."})
        return attrs


class ClusterIdentitySerializer(RejectUnknownFields, serializers.ModelSerializer):
    """Who a portal user is on the clusters. Staff set it here; one read from LDAP or
    OIDC (``source``) is set again at the user's next login."""

    user = SlugRelatedField(
        slug_field="username",
        queryset=get_user_model().objects.all(),
        validators=[UniqueValidator(ClusterIdentity.objects.all(), "This user has a cluster identity already.")],
    )

    class Meta:
        model = ClusterIdentity
        fields = ["id", "user", "username", "uid", "gid", "source", "updated_at"]
        read_only_fields = ["source", "updated_at"]

    def validate_uid(self, uid: int | None) -> int | None:
        others = ClusterIdentity.objects.filter(uid=uid)
        if self.instance is not None:
            others = others.exclude(pk=self.instance.pk)
        if uid is not None and others.exists():
            raise serializers.ValidationError(f"uid {uid} is another user's cluster identity already.")
        return uid

    def validate(self, attrs: dict[str, Any]) -> dict[str, Any]:
        attrs["source"] = IdentitySource.STAFF  # set here, it is staff's from now on
        return attrs


class ApiTokenSerializer(RejectUnknownFields, serializers.ModelSerializer):
    expires_in_days = serializers.IntegerField(
        min_value=1,
        max_value=3650,
        required=False,
        allow_null=True,
        write_only=True,
        help_text="Days until the token stops working (none: until revoked).",
    )

    class Meta:
        model = ApiToken
        fields = [
            "id",
            "name",
            "key_prefix",
            "created_at",
            "last_used_at",
            "revoked_at",
            "expires_at",
            "read_only",
            "expires_in_days",
        ]
        read_only_fields = ["key_prefix", "created_at", "last_used_at", "revoked_at", "expires_at"]
        extra_kwargs = {"name": {"validators": [plain_name]}}


class NewApiTokenSerializer(ApiTokenSerializer):
    token = serializers.CharField(read_only=True, help_text="The secret. Shown once; store it now.")

    class Meta(ApiTokenSerializer.Meta):
        fields = [*ApiTokenSerializer.Meta.fields, "token"]


class MeMembershipSerializer(serializers.ModelSerializer):
    account = serializers.CharField(source="account.name")

    class Meta:
        model = Membership
        fields = ["account", "role", "is_default"]


class MeIdentitySerializer(serializers.ModelSerializer):
    class Meta:
        model = ClusterIdentity
        fields = ["username", "uid", "gid", "source"]


class MeSerializer(serializers.Serializer):
    username = serializers.CharField()
    email = serializers.CharField(
        allow_blank=True,
        help_text=(
            "Where your notifications by e-mail go (empty: you get no e-mail). Set it with PATCH, "
            "unless your organisation's directory sets it at each sign-in (LDAP, OIDC)."
        ),
    )
    is_staff = serializers.BooleanField()
    memberships = MeMembershipSerializer(many=True)
    cluster_identity = MeIdentitySerializer(
        allow_null=True, help_text="The POSIX user your jobs run as (null: none set; ask staff)."
    )
    default_account = serializers.CharField(
        allow_null=True, help_text="Where a job that names no account goes (null: you belong to no account)."
    )


class MeUpdateSerializer(RejectUnknownFields, serializers.Serializer):
    """What ``PATCH /api/v1/me/`` changes: your default account, your e-mail address, or
    both; each change is audited, and a body with either field wrong changes neither."""

    default_account = serializers.CharField(
        max_length=64,
        required=False,
        help_text="One of your accounts: jobs that name no account go there (Slurm's DefaultAccount).",
    )
    email = NulFreeCharField(
        max_length=254,
        required=False,
        allow_blank=True,
        help_text=(
            "Your e-mail address, where notifications by e-mail go; an empty string clears it. "
            "Refused (400) when your organisation's directory sets it at each sign-in (LDAP, OIDC)."
        ),
    )

    def validate_default_account(self, value: str) -> Membership:
        user = self.context["request"].user
        membership = Membership.objects.filter(user_id=user.pk, account__name=value).first()
        if membership is None:
            raise serializers.ValidationError(f"You are not a member of account {value!r}.")
        return membership

    def validate_email(self, value: str) -> str:
        return clean_address(self.context["request"].user, value)

    def validate(self, attrs: dict[str, Any]) -> dict[str, Any]:
        if not attrs:
            raise serializers.ValidationError("Send default_account, email or both.")
        return attrs
