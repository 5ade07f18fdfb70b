"""Django admin for the scheduler. Actions call services; nothing saves a job directly."""

from __future__ import annotations

from django.contrib import admin, messages
from django.db.models import QuerySet
from django.http import HttpRequest

from scheduler.backends import BackendError
from scheduler.clusters.nodes import drain_node, resume_node
from scheduler.clusters.poll import poll_cluster
from scheduler.jobs import verbs
from scheduler.jobs.transitions import JobStateConflict
from scheduler.models import Cluster, Gpu, Job, JobEvent, Node, TickState, Usage


@admin.register(Cluster)
class ClusterAdmin(admin.ModelAdmin):
    list_display = ["name", "kind", "enabled", "reachable", "last_error", "last_contact_at"]
    actions = ["sync_inventory"]

    @admin.action(description="Sync nodes and GPUs from the backend")
    def sync_inventory(self, request: HttpRequest, queryset: QuerySet[Cluster]) -> None:
        for cluster in queryset:
            try:
                report = poll_cluster(cluster)
                self.message_user(request, f"{cluster}: {report}")
            except BackendError as exc:
                self.message_user(request, f"{cluster}: {exc}", level=messages.ERROR)


class GpuInline(admin.TabularInline):
    model = Gpu
    extra = 0
    fields = ("index", "model", "memory_mib", "compute_capability", "mig_profile", "parent", "uuid")
    readonly_fields = fields


@admin.register(Node)
class NodeAdmin(admin.ModelAdmin):
    list_display = ["name", "cluster", "state", "reason", "cpus", "memory_mib", "last_heartbeat"]
    list_filter = ["cluster", "state"]
    search_fields = ["name"]
    list_select_related = ["cluster"]
    inlines = [GpuInline]
    actions = ["drain", "resume"]

    @admin.action(description="Drain selected nodes")
    def drain(self, request: HttpRequest, queryset: QuerySet[Node]) -> None:
        for node in queryset:
            drain_node(node, reason=f"drained by {request.user} in admin", by=request.user)

    @admin.action(description="Resume selected nodes")
    def resume(self, request: HttpRequest, queryset: QuerySet[Node]) -> None:
        for node in queryset:
            resume_node(node, by=request.user)


@admin.register(Gpu)
class GpuAdmin(admin.ModelAdmin):
    list_display = ["__str__", "model", "memory_mib", "compute_capability", "mig_profile"]
    list_filter = ["model", "node__cluster"]
    list_select_related = ["node"]
    search_fields = ["node__name", "uuid"]


class JobEventInline(admin.TabularInline):
    model = JobEvent
    extra = 0
    can_delete = False
    fields = ("at", "kind", "message", "data")
    readonly_fields = fields

    def has_add_permission(self, request: HttpRequest, obj: object = None) -> bool:
        return False


@admin.register(Job)
class JobAdmin(admin.ModelAdmin):
    """Jobs are read-only here; state changes go through the actions (services), and
    none is deleted here: a job leaves through cancel, which tells its backend (a deleted
    row would leave its processes running and its GPUs unaccounted for).

    The list shows what fits beside the admin's sidebars at a desktop width; the job's
    pending reason is on its page."""

    list_display = ["id", "name", "owner", "account", "state", "total_gpus", "submitted"]
    list_filter = ["state", "account", "cluster"]
    search_fields = ["name", "uuid", "owner__username", "external_id"]
    list_select_related = ["owner", "account"]
    inlines = [JobEventInline]
    actions = ["cancel", "hold", "release", "requeue"]

    def get_readonly_fields(self, request: HttpRequest, obj: Job | None = None) -> list[str]:
        return [f.name for f in Job._meta.fields]

    def has_add_permission(self, request: HttpRequest) -> bool:
        return False

    def has_delete_permission(self, request: HttpRequest, obj: Job | None = None) -> bool:
        return False

    @admin.display(description="submitted (UTC)", ordering="submitted_at")
    def submitted(self, job: Job) -> str:
        return f"{job.submitted_at:%Y-%m-%d %H:%M}"

    def _apply(self, request: HttpRequest, queryset: QuerySet[Job], verb: str) -> None:
        action = getattr(verbs, f"{verb}_job")
        for job in queryset:
            try:
                action(job, by=str(request.user))
            except JobStateConflict as exc:
                self.message_user(request, str(exc), level=messages.WARNING)

    @admin.action(description="Cancel selected jobs")
    def cancel(self, request: HttpRequest, queryset: QuerySet[Job]) -> None:
        self._apply(request, queryset, "cancel")

    @admin.action(description="Hold selected jobs")
    def hold(self, request: HttpRequest, queryset: QuerySet[Job]) -> None:
        self._apply(request, queryset, "hold")

    @admin.action(description="Release selected jobs")
    def release(self, request: HttpRequest, queryset: QuerySet[Job]) -> None:
        self._apply(request, queryset, "release")

    @admin.action(description="Requeue selected jobs")
    def requeue(self, request: HttpRequest, queryset: QuerySet[Job]) -> None:
        self._apply(request, queryset, "requeue")


@admin.register(JobEvent)
class JobEventAdmin(admin.ModelAdmin):
    """A job's history, written by the state machine only: read here, never edited or deleted."""

    list_display = ["at", "job", "kind", "message"]
    list_filter = ["kind"]
    list_select_related = ["job"]

    def has_delete_permission(self, request: HttpRequest, obj: object = None) -> bool:
        return False

    def has_change_permission(self, request: HttpRequest, obj: object = None) -> bool:
        return False

    def has_add_permission(self, request: HttpRequest) -> bool:
        return False


@admin.register(TickState)
class TickStateAdmin(admin.ModelAdmin):
    list_display = ["started_at", "finished_at", "duration_ms", "started_jobs", "pending_jobs"]


@admin.register(Usage)
class UsageAdmin(admin.ModelAdmin):
    """Fair-share usage is written by the tick only; admins read it here."""

    list_display = ["account", "user", "gpu_seconds", "as_of"]
    list_filter = ["account"]
    list_select_related = ["account", "user"]

    def has_change_permission(self, request: HttpRequest, obj: object = None) -> bool:
        return False

    def has_add_permission(self, request: HttpRequest) -> bool:
        return False
