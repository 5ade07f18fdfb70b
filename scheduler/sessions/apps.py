"""Staff's verbs on interactive apps: save (add or change, enable or disable) and
delete, each audited; the page and the API both call these."""

from __future__ import annotations

from typing import Any

from django.db import transaction

from people.services import field_changes, record_audit
from scheduler.models import Cluster, InteractiveApp
from scheduler.sessions.fields import definition_problems

#: The fields of an app staff set (besides its clusters).
APP_FIELDS = (
    "slug",
    "name",
    "description",
    "form_fields",
    "command",
    "ready_path",
    "secret_via",
    "default_gpus",
    "default_cpus",
    "default_memory_mib",
    "default_walltime_seconds",
    "enabled",
)


class AppInUse(Exception):
    """An app that sessions were launched of cannot be deleted (their history names it)."""


def app_state(app: InteractiveApp) -> dict[str, Any]:
    """What the audit log compares: the fields, and the clusters by name."""
    state = {name: getattr(app, name) for name in APP_FIELDS}
    state["clusters"] = sorted(c.name for c in app.clusters.all()) if app.pk else []
    return state


def save_app(
    actor: Any, app: InteractiveApp | None, fields: dict[str, Any], clusters: list[Cluster] | None = None
) -> InteractiveApp:
    """Create an app (``app`` None) or change it with ``fields`` (names of
    :data:`APP_FIELDS`) and, when given, its ``clusters`` (empty: every cluster);
    audited. Raises ``ValueError`` with the definition's problems (field -> lines), as
    the page and the API check them first (``scheduler.sessions.fields``)."""
    app = app or InteractiveApp()
    before = app_state(app) if app.pk else {}
    for name, value in fields.items():
        if name not in APP_FIELDS:
            raise ValueError({name: [f"{name} is no field of an app."]})
        setattr(app, name, value)
    if problems := definition_problems(app.command, app.form_fields):
        raise ValueError(problems)
    with transaction.atomic():
        created = app.pk is None
        app.save()
        if clusters is not None:
            app.clusters.set(clusters)
        record_audit(actor, "create" if created else "update", app, field_changes(before, app_state(app)))
    return app


def delete_app(actor: Any, app: InteractiveApp) -> None:
    """Delete an app no session was launched of (else :class:`AppInUse`: disable it)."""
    if app.sessions.exists():
        raise AppInUse(f"{app.name} has sessions; disable it instead (its sessions' history names it).")
    with transaction.atomic():
        record_audit(actor, "delete", app, field_changes(app_state(app), {}))
        app.delete()
