from __future__ import annotations

from typing import Any

from django.contrib import admin, messages
from django.http import HttpRequest
from django.utils import timezone

from monitoring.models import GpuHealth, GpuSample, NodeToken, ProcessFinding


@admin.register(GpuSample)
class GpuSampleAdmin(admin.ModelAdmin):
    list_display = ["gpu", "at", "utilization_pct", "memory_used_mib", "temperature_c", "power_w", "xid"]
    list_filter = ["gpu__node"]
    list_select_related = ["gpu", "gpu__node"]
    date_hierarchy = "at"


@admin.register(GpuHealth)
class GpuHealthAdmin(admin.ModelAdmin):
    list_display = ["gpu", "condition", "xid", "xid_at", "since"]
    list_select_related = ["gpu", "gpu__node"]
    search_fields = ["gpu__node__name", "condition"]


@admin.register(ProcessFinding)
class ProcessFindingAdmin(admin.ModelAdmin):
    """The GPU process audit's findings (``monitoring.audit``), open and cleared: written
    by the audit alone, so read-only here."""

    list_display = ["gpu", "rule", "pid", "user", "uid", "command", "job", "first_seen_at", "cleared_at"]
    list_filter = ["rule", "gpu__node"]
    list_select_related = ["gpu", "gpu__node"]
    search_fields = ["gpu__node__name", "user", "command"]

    def has_add_permission(self, request: HttpRequest) -> bool:
        return False

    def has_change_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False


@admin.register(NodeToken)
class NodeTokenAdmin(admin.ModelAdmin):
    """Adding a token shows its secret once, in a message; only the digest is stored."""

    list_display = ["node", "key_prefix", "created_at", "last_used_at", "revoked_at"]
    fields = ["node"]
    actions = ["revoke"]

    def save_model(self, request: HttpRequest, obj: NodeToken, form: Any, change: bool) -> None:
        if not change:
            prefix, secret = NodeToken.new_secret()
            obj.key_prefix, obj.digest = prefix, NodeToken.hash(secret)
            messages.warning(request, f"Token for {obj.node}: {secret} — copy it now, it is not shown again.")
        super().save_model(request, obj, form, change)

    @admin.action(description="Revoke selected tokens")
    def revoke(self, request: HttpRequest, queryset: Any) -> None:
        queryset.filter(revoked_at__isnull=True).update(revoked_at=timezone.now())
