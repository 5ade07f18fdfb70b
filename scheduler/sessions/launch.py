"""Launch: an interactive session is a job like any other, plus its session row.

The API and the page both call :func:`launch_session`; it asks the same admission as a
submission (``scheduler.jobs.admission.admit``, then ``submit_job``'s quotas under
their locks), so a session waits, is charged, estimated and ended as any job is.
"""

from __future__ import annotations

import secrets
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime
from decimal import Decimal
from typing import Any

from django.conf import settings
from django.core.exceptions import ValidationError
from django.db import transaction
from django.utils import timezone

from people.models import Account, Qos
from scheduler.jobs.admission import Hardware, admit
from scheduler.jobs.submit import submit_job
from scheduler.models import InteractiveApp, InteractiveSession, Job
from scheduler.sessions.fields import clean_values, definition_problems
from scheduler.sessions.script import session_script

#: A session's base URL before its job has an id: the same length as a real one's, so
#: that admission weighs the script the job will run.
_NO_ID_YET = "/sessions/0/"


class LaunchRefused(Exception):
    """A launch that was refused, with the problems by field: the app's own fields'
    under ``values`` (name -> problems), the job's under their request names."""

    def __init__(self, problems: dict[str, Any]) -> None:
        super().__init__("; ".join(f"{field}: {said}" for field, said in problems.items()))
        self.problems = problems


@dataclass(frozen=True, slots=True)
class Resources:
    """What a session's job holds on its one node."""

    gpus: int
    cpus: Decimal
    memory_mib: int
    walltime_seconds: int


def default_resources(app: InteractiveApp) -> Resources:
    """The app's defaults, as its launch form starts."""
    return Resources(
        gpus=app.default_gpus,
        cpus=Decimal(app.default_cpus),
        memory_mib=app.default_memory_mib,
        walltime_seconds=app.default_walltime_seconds,
    )


def offered_apps(user: Any = None) -> Any:
    """The apps a user may launch: enabled, and offered on some enabled cluster (an app
    restricted to clusters none of which is enabled is not offered)."""
    apps = InteractiveApp.objects.filter(enabled=True).prefetch_related("clusters")
    return [app for app in apps if not app.clusters.all() or any(c.enabled for c in app.clusters.all())]


def launch_session(
    app: InteractiveApp,
    owner: Any,
    values: Mapping[str, Any],
    resources: Resources,
    *,
    account: Account | None,
    qos: Qos | None,
    hardware: Hardware,
    now: datetime | None = None,
) -> InteractiveSession:
    """Launch ``app`` for ``owner``: a PENDING job whose script starts the app's server
    (``session_script``) and its :class:`InteractiveSession` with a fresh secret, in one
    transaction. ``values``: the app's form fields (name -> value); ``account`` and
    ``qos`` ``None``: the defaults, as for any job.

    Raises :class:`LaunchRefused` with the problems by field (``app``, ``values`` as a
    mapping of the app's field names, and the job's own: ``account``, ``qos``,
    ``gpus_per_node``, ``walltime_seconds``...) and writes nothing when it refuses.

    Steps:
    1. The app is offered (enabled, on an enabled cluster) and its definition holds.
    2. The values fill its fields (``scheduler.sessions.fields``).
    3. Admission's standing rules over the job it makes (one node, its resources).
    4. In one transaction: the job (``submit_job``: the quotas, under their locks), its
       script written with its own base URL once it has an id, and the session.
    """
    now = now or timezone.now()
    # 1.
    if app not in offered_apps(owner):
        raise LaunchRefused({"app": [f"{app.name} is not offered now (disabled, or none of its clusters is)."]})
    if broken := definition_problems(app.command, app.form_fields):
        said = "; ".join(line for lines in broken.values() for line in lines)
        raise LaunchRefused({"app": [f"{app.name} is misdefined, ask staff to fix it: {said}"]})
    # 2.
    filled, problems = clean_values(app.form_fields, values, owner)
    found: dict[str, Any] = {"values": problems} if problems else {}
    # 3.
    # (A value refused above is admitted as empty: the job's own rules are told as well.)
    request = _job_values(app, {**dict.fromkeys(problems, ""), **filled}, resources, _NO_ID_YET)
    admission = admit(request, owner=owner, account=account, qos=qos, hardware=hardware, now=now)
    found.update(admission.problems)
    if found or admission.account is None:  # no account is a problem admission names
        raise LaunchRefused(found)
    # 4.
    with transaction.atomic():
        try:
            job = submit_job(owner=owner, account=admission.account, qos=admission.qos, now=now, **request)
        except ValidationError as exc:  # a quota refused it
            raise LaunchRefused(dict(exc.message_dict)) from None
        base_url = f"/sessions/{job.id}/"
        job.script = _job_values(app, filled, resources, base_url)["script"]
        Job.objects.filter(pk=job.pk).update(script=job.script)
        return InteractiveSession.objects.create(job=job, app=app, values=filled, secret=secrets.token_urlsafe(32))


def _job_values(app: InteractiveApp, values: Mapping[str, str], resources: Resources, base_url: str) -> dict[str, Any]:
    """The job's request, shaped as the API's serializer leaves one (every request field)."""
    script = session_script(
        command=app.command,
        values=values,
        base_url=base_url,
        ready_path=app.ready_path,
        ports=settings.SESSION_PORTS,
    )
    return {
        "name": app.slug[:128],
        "command": "",
        "script": script,
        "image": "",
        "env": {},
        "nodes": 1,
        "gpus_per_node": resources.gpus,
        "gpu_model": "",
        "min_gpu_memory_mib": 0,
        "min_compute_capability": "",
        "gpu_share": 0.0,
        "gpu_memory_mib_share": 0,
        "node_labels": {},
        "reservation": "",
        "cpus_per_node": resources.cpus,
        "memory_mib_per_node": resources.memory_mib,
        "walltime_seconds": resources.walltime_seconds,
        "nice": 0,
        "dependencies": [],
        "workdir": "",
        "output_path": "",
        "error_path": "",
        "files": {},
        "array": None,
    }
