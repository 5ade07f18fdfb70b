from django.contrib import admin

from portal.models import Account, ApiToken, Membership, Qos, Quota


class MembershipInline(admin.TabularInline):
    model = Membership
    extra = 0
    autocomplete_fields = ["user"]


@admin.register(Account)
class AccountAdmin(admin.ModelAdmin):
    list_display = ["name", "parent", "shares", "description"]
    search_fields = ["name", "description"]
    list_select_related = ["parent"]
    inlines = [MembershipInline]


@admin.register(Membership)
class MembershipAdmin(admin.ModelAdmin):
    list_display = ["user", "account", "role"]
    list_filter = ["role", "account"]
    list_select_related = ["user", "account"]


@admin.register(Qos)
class QosAdmin(admin.ModelAdmin):
    list_display = ["name", "priority", "preemptible", "max_walltime_seconds", "usage_factor"]
    filter_horizontal = ["may_preempt"]


@admin.register(Quota)
class QuotaAdmin(admin.ModelAdmin):
    list_display = ["__str__", "max_gpus", "max_running_jobs", "max_pending_jobs", "max_walltime_seconds"]
    list_select_related = ["account", "user"]


@admin.register(ApiToken)
class ApiTokenAdmin(admin.ModelAdmin):
    """Admins may see and revoke tokens, never read or create secrets."""

    list_display = ["name", "user", "key_prefix", "created_at", "last_used_at", "revoked_at"]
    readonly_fields = ["user", "name", "key_prefix", "created_at", "last_used_at"]
    exclude = ["digest"]
    list_select_related = ["user"]

    def has_add_permission(self, request):  # type: ignore[no-untyped-def]
        return False
