"""``/api/v1/apps/`` and ``/api/v1/sessions/``: interactive apps and their sessions.

Everyone signed in lists the apps offered now; staff see every app and add, change,
disable or delete them (``scheduler.sessions.apps``, audited). A session is launched
with ``POST /api/v1/sessions/`` (``scheduler.sessions.launch``: the same admission as a
job, a 400 naming the field), read with its phase and Connect URL, and deleted, which
cancels its job. A researcher sees their own sessions; a coordinator the sessions of
their accounts' members and staff all of them, as they see jobs, but only the owner is
given the Connect URL (the proxy lets no one else through). No answer ever holds a
session's secret, host or port.
"""

from __future__ import annotations

from typing import Any

from django.db.models import QuerySet
from django.utils import timezone
from drf_spectacular.utils import extend_schema
from rest_framework import mixins, serializers, status, viewsets
from rest_framework.permissions import IsAuthenticated
from rest_framework.request import Request
from rest_framework.response import Response

from common.api.errors import Conflict
from common.api.fields import SlugRelatedField
from common.api.permissions import IsStaffOrReadOnly
from common.api.strict import RejectUnknownFields
from people.access import visible_jobs
from people.models import Account, Qos
from scheduler.api.serializers import MAX_WALLTIME, CpusField
from scheduler.api.throttles import SubmitThrottle
from scheduler.jobs import verbs
from scheduler.models import Cluster, InteractiveApp, InteractiveSession, Job
from scheduler.reads.inventory import load_inventory
from scheduler.reads.sessions import session_view
from scheduler.sessions.apps import AppInUse, delete_app, save_app
from scheduler.sessions.fields import definition_problems
from scheduler.sessions.launch import LaunchRefused, Resources, default_resources, launch_session, offered_apps


class InteractiveAppSerializer(RejectUnknownFields, serializers.ModelSerializer):
    """An interactive app: what its launch form asks (``form_fields``) and the bash that
    starts its server (``command``, with ``{port}``, ``{base_url}`` and each field's
    ``{name}``)."""

    clusters = SlugRelatedField(
        slug_field="name",
        queryset=Cluster.objects.all(),
        many=True,
        required=False,
        help_text="The clusters it runs on; empty: every cluster.",
    )

    class Meta:
        model = InteractiveApp
        fields = [
            "id", "slug", "name", "description", "form_fields", "command", "ready_path", "secret_via", "clusters",
            "default_gpus", "default_cpus", "default_memory_mib", "default_walltime_seconds", "enabled",
            "created_at", "updated_at",
        ]  # fmt: skip
        read_only_fields = ["id", "created_at", "updated_at"]

    def validate(self, attrs: dict[str, Any]) -> dict[str, Any]:
        """The command names only ``{port}``, ``{base_url}`` and the app's fields
        (``scheduler.sessions.fields``)."""
        instance = self.instance
        command = attrs.get("command", instance.command if instance else "")
        form_fields = attrs.get("form_fields", instance.form_fields if instance else [])
        if problems := definition_problems(command, form_fields):
            raise serializers.ValidationError(problems)
        return attrs


class AppViewSet(viewsets.ModelViewSet):
    """Interactive apps: those offered now for everyone; every app, and changes, for staff."""

    serializer_class = InteractiveAppSerializer
    permission_classes = [IsStaffOrReadOnly]
    queryset = InteractiveApp.objects.none()  # per user, see get_queryset

    def get_queryset(self) -> QuerySet[InteractiveApp]:
        apps = InteractiveApp.objects.prefetch_related("clusters").order_by("name")
        if self.request.user.is_staff:
            return apps
        return apps.filter(pk__in=[app.pk for app in offered_apps(self.request.user)])

    def perform_create(self, serializer: Any) -> None:
        serializer.instance = self._save(None, serializer.validated_data)

    def perform_update(self, serializer: Any) -> None:
        serializer.instance = self._save(serializer.instance, serializer.validated_data)

    def _save(self, app: InteractiveApp | None, data: dict[str, Any]) -> InteractiveApp:
        fields = dict(data)
        clusters = fields.pop("clusters", None)
        try:
            return save_app(self.request.user, app, fields, clusters)
        except ValueError as exc:
            raise serializers.ValidationError(exc.args[0]) from None

    def destroy(self, request: Request, *args: Any, **kwargs: Any) -> Response:
        try:
            delete_app(request.user, self.get_object())
        except AppInUse as exc:
            raise Conflict(str(exc)) from None
        return Response(status=status.HTTP_204_NO_CONTENT)


class SessionSerializer(serializers.Serializer):
    """A session as its card shows it: never its secret, host or port."""

    job = serializers.IntegerField(source="session.job_id", help_text="Its job's id (GET /api/v1/jobs/<job>/).")
    app = serializers.CharField(source="session.app.slug")
    app_name = serializers.CharField(source="session.app.name")
    owner = serializers.CharField(source="session.job.owner.username")
    account = serializers.CharField(source="session.job.account.name")
    values = serializers.DictField(source="session.values", child=serializers.CharField())
    state = serializers.CharField(source="session.job.state", help_text="Its job's state.")
    phase = serializers.ChoiceField(
        choices=["queued", "starting", "running", "ended"],
        help_text="queued (waiting for GPUs), starting (its server does not answer yet), running (Connect "
        "works), ended.",
    )
    pending_reason = serializers.CharField(source="session.job.pending_reason")
    estimated_start_at = serializers.DateTimeField(source="session.job.estimated_start_at", allow_null=True)
    submitted_at = serializers.DateTimeField(source="session.job.submitted_at")
    started_at = serializers.DateTimeField(source="session.job.started_at", allow_null=True)
    ready_at = serializers.DateTimeField(source="session.ready_at", allow_null=True)
    last_activity_at = serializers.DateTimeField(source="session.last_activity_at", allow_null=True)
    ended_at = serializers.DateTimeField(source="session.job.ended_at", allow_null=True)
    seconds_left = serializers.IntegerField(allow_null=True, help_text="Until its walltime ends it.")
    connect_url = serializers.SerializerMethodField(
        help_text="The path Connect opens on this portal, once running; only for its owner (null otherwise)."
    )
    ended_why = serializers.CharField(help_text="Why it ended ('' while it has not).")

    def get_connect_url(self, view: Any) -> str | None:
        owner = view.session.job.owner_id == self.context["request"].user.pk
        return view.connect_url if owner and view.connect_url else None


class SessionLaunchSerializer(RejectUnknownFields, serializers.Serializer):
    """A launch: the app, its fields' values, who pays and what the session holds (each
    omitted: the app's default; account and QOS omitted: yours, as for any job)."""

    app = SlugRelatedField(slug_field="slug", queryset=InteractiveApp.objects.filter(enabled=True))
    values = serializers.DictField(
        child=serializers.CharField(allow_blank=True, max_length=4096, trim_whitespace=False),
        required=False,
        default=dict,
        help_text="The app's own fields (GET /api/v1/apps/: form_fields), name -> value.",
    )
    account = SlugRelatedField(slug_field="name", queryset=Account.objects.all(), required=False)
    qos = SlugRelatedField(slug_field="name", queryset=Qos.objects.all(), required=False, allow_null=True)
    gpus = serializers.IntegerField(min_value=0, max_value=1024, required=False)
    cpus = CpusField(required=False)
    memory_mib = serializers.IntegerField(min_value=0, max_value=2**31 - 1, required=False)
    walltime_seconds = serializers.IntegerField(min_value=1, max_value=MAX_WALLTIME, required=False)

    def create(self, validated_data: dict[str, Any]) -> InteractiveSession:
        app: InteractiveApp = validated_data["app"]
        resources = resources_of(app, validated_data)
        try:
            return launch_session(
                app,
                self.context["request"].user,
                validated_data["values"],
                resources,
                account=validated_data.get("account"),
                qos=validated_data.get("qos"),
                hardware=load_inventory(),
            )
        except LaunchRefused as exc:
            raise serializers.ValidationError(api_problems(exc.problems)) from None


#: A job request's field -> the launch's field that sets it.
LAUNCH_NAMES = {
    "gpus_per_node": "gpus",
    "cpus_per_node": "cpus",
    "memory_mib_per_node": "memory_mib",
    "script": "app",
    "command": "app",
}


def api_problems(problems: dict[str, Any]) -> dict[str, Any]:
    """A launch's problems under the launch's own field names (a job's ``gpus_per_node``
    is the launch's ``gpus``)."""
    named: dict[str, Any] = {}
    for field, said in problems.items():
        name = LAUNCH_NAMES.get(field, field)
        if isinstance(said, list) and isinstance(named.get(name), list):
            named[name] = [*named[name], *said]
        else:
            named[name] = said
    return named


def resources_of(app: InteractiveApp, data: dict[str, Any]) -> Resources:
    """The launch's resources: each given one, else the app's default."""
    default = default_resources(app)
    return Resources(
        gpus=data.get("gpus", default.gpus),
        cpus=data.get("cpus", default.cpus),
        memory_mib=data.get("memory_mib", default.memory_mib),
        walltime_seconds=data.get("walltime_seconds", default.walltime_seconds),
    )


class SessionViewSet(mixins.CreateModelMixin, mixins.DestroyModelMixin, viewsets.ReadOnlyModelViewSet):
    """Launch, list and end interactive sessions (``DELETE`` cancels the session's job)."""

    permission_classes = [IsAuthenticated]
    queryset = InteractiveSession.objects.none()  # per user, see get_queryset
    serializer_class = SessionSerializer
    lookup_value_regex = r"\d+"

    def get_queryset(self) -> QuerySet[InteractiveSession]:
        jobs = visible_jobs(self.request.user, Job.objects.all()).values("pk")
        return (
            InteractiveSession.objects.filter(job__in=jobs)
            .select_related("job", "job__owner", "job__account", "app")
            .order_by("-job_id")
        )

    def get_throttles(self) -> list[Any]:
        """Launches count against ``JOB_SUBMIT_RATE``, as submissions do."""
        return [SubmitThrottle()] if self.action == "create" else super().get_throttles()

    def get_serializer_class(self) -> type:
        return SessionLaunchSerializer if self.action == "create" else SessionSerializer

    def _shown(self, sessions: Any) -> Any:
        now = timezone.now()
        return [session_view(session, now) for session in sessions]

    def list(self, request: Request, *args: Any, **kwargs: Any) -> Response:
        sessions = self.filter_queryset(self.get_queryset())
        page = self.paginate_queryset(sessions)
        rows = self._shown(page if page is not None else sessions)
        data = SessionSerializer(rows, many=True, context=self.get_serializer_context()).data
        return self.get_paginated_response(data) if page is not None else Response(data)

    def retrieve(self, request: Request, *args: Any, **kwargs: Any) -> Response:
        (view,) = self._shown([self.get_object()])
        return Response(SessionSerializer(view, context=self.get_serializer_context()).data)

    @extend_schema(
        request=SessionLaunchSerializer,
        responses={201: SessionSerializer},
        description="Launch an interactive app: a job (same admission, quotas and queue as any job) whose "
        "server the portal's proxy serves at connect_url once it answers. 400 names each refused field; an "
        "app's own fields under values.",
    )
    def create(self, request: Request, *args: Any, **kwargs: Any) -> Response:
        launch = SessionLaunchSerializer(data=request.data, context=self.get_serializer_context())
        launch.is_valid(raise_exception=True)
        session = launch.save()
        session = self.get_queryset().get(pk=session.pk)
        (view,) = self._shown([session])
        data = SessionSerializer(view, context=self.get_serializer_context()).data
        return Response(data, status=status.HTTP_201_CREATED)

    @extend_schema(responses={204: None, 409: None}, description="End the session: cancel its job.")
    def destroy(self, request: Request, *args: Any, **kwargs: Any) -> Response:
        session = self.get_object()
        verbs.cancel_job(session.job, by=request.user.get_username())
        return Response(status=status.HTTP_204_NO_CONTENT)
