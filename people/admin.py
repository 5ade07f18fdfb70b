from __future__ import annotations

from collections.abc import Callable
from typing import Any

from django.contrib import admin
from django.db import transaction
from django.db.models import Model, QuerySet
from django.forms import BaseInlineFormSet, ModelForm
from django.http import HttpRequest

from people import services
from people.limits import QOS_LIMIT_NAMES
from people.models import Account, ApiToken, ClusterIdentity, Membership, Qos, Quota


class AuditedAdmin(admin.ModelAdmin):
    """Saves and deletes through the model's verb-first services (``save`` and ``delete``
    in :attr:`audited_writes`), which record the audit entry, as the pages and the API do."""

    audited_writes: tuple[Callable[..., Any], Callable[[Any, Any], None]]

    def save_model(self, request: HttpRequest, obj: Model, form: ModelForm, change: bool) -> None:
        save, _ = self.audited_writes
        save(request.user, obj)  # the form has set its fields on obj already

    def delete_model(self, request: HttpRequest, obj: Model) -> None:
        _, delete = self.audited_writes
        delete(request.user, obj)

    def delete_queryset(self, request: HttpRequest, queryset: QuerySet[Any]) -> None:
        with transaction.atomic():
            for obj in queryset:
                self.delete_model(request, obj)


class MembershipInline(admin.TabularInline):
    model = Membership
    extra = 0
    autocomplete_fields = ["user"]


@admin.register(Account)
class AccountAdmin(AuditedAdmin):
    list_display = ["name", "parent", "shares", "description"]
    search_fields = ["name", "description"]
    list_select_related = ["parent"]
    inlines = [MembershipInline]
    audited_writes = (services.save_account, services.delete_account)

    def save_formset(self, request: HttpRequest, form: ModelForm, formset: BaseInlineFormSet, change: bool) -> None:
        """The members inline: each added, changed or removed membership through its service."""
        changed = formset.save(commit=False)
        for membership in formset.deleted_objects:
            services.delete_membership(request.user, membership)
        for membership in changed:
            services.save_membership(request.user, membership)
        formset.save_m2m()


@admin.register(Membership)
class MembershipAdmin(AuditedAdmin):
    list_display = ["user", "account", "role"]
    list_filter = ["role", "account"]
    list_select_related = ["user", "account"]
    audited_writes = (services.save_membership, services.delete_membership)


@admin.register(Qos)
class QosAdmin(admin.ModelAdmin):
    list_display = ["name", "priority", "preemptible", "max_walltime_seconds", "usage_factor", *QOS_LIMIT_NAMES]
    filter_horizontal = ["may_preempt"]
    fieldsets = [
        (None, {"fields": ["name", "description", "priority", "usage_factor", "max_walltime_seconds"]}),
        ("Preemption", {"fields": ["preemptible", "may_preempt"]}),
        ("Limits (empty: no limit)", {"fields": list(QOS_LIMIT_NAMES)}),
    ]


@admin.register(Quota)
class QuotaAdmin(AuditedAdmin):
    list_display = ["__str__", "max_gpus", "max_running_jobs", "max_pending_jobs", "max_walltime_seconds"]
    list_select_related = ["account", "user"]
    audited_writes = (services.save_quota, services.delete_quota)


@admin.register(ClusterIdentity)
class ClusterIdentityAdmin(AuditedAdmin):
    list_display = ["user", "username", "uid", "gid", "source"]
    search_fields = ["user__username", "username"]
    list_select_related = ["user"]
    audited_writes = (services.save_identity, services.delete_identity)


@admin.register(ApiToken)
class ApiTokenAdmin(admin.ModelAdmin):
    """Admins may see and revoke tokens, never read or create secrets."""

    list_display = ["name", "user", "key_prefix", "created_at", "last_used_at", "revoked_at"]
    readonly_fields = ["user", "name", "key_prefix", "created_at", "last_used_at"]
    exclude = ["digest"]
    list_select_related = ["user"]

    def has_add_permission(self, request):  # type: ignore[no-untyped-def]
        return False
