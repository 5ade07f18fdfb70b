"""Where a job may start: the check of a submission's ``workdir``.

The allowlist is ``JOB_WORKDIR_ROOTS`` with ``{user}`` as the owner's cluster user name
(their home and scratch by default), as Open OnDemand limits the directories its apps
may use; whatever it lists, the portal's own tree (its code, ``var/``, the local
backend's job directories) is refused, since the local backend makes a job's workdir
visible inside its sandbox.
"""

from __future__ import annotations

import posixpath
from pathlib import Path
from typing import Any

from django.conf import settings
from rest_framework import serializers

from portal.models import ClusterIdentity


def checked_workdir(value: str, user: Any) -> str:
    """``value`` if ``user`` may start a job there; else a ``ValidationError`` saying why."""
    if not value:
        return ""
    if not value.startswith("/") or posixpath.normpath(value) != value or any(ord(c) < 32 for c in value):
        raise serializers.ValidationError(
            "Give an absolute path without '..', '.' or '//' parts, for example /home/alice/project."
        )
    path = Path(value)
    for own in (settings.BASE_DIR, settings.VAR_DIR, settings.QM_WORK_DIR):
        own = Path(own).resolve()
        if path == own or own in path.parents or path in own.parents:
            raise serializers.ValidationError(f"{value} holds or lies in the portal's own files.")
    identity = ClusterIdentity.objects.filter(user_id=user.pk).values_list("username", flat=True).first()
    name = identity or user.get_username()
    roots = [root.replace("{user}", name).rstrip("/") or "/" for root in settings.JOB_WORKDIR_ROOTS]
    if not any(value == root or value.startswith(root.rstrip("/") + "/") for root in roots):
        raise serializers.ValidationError(f"A job may start only under {', '.join(roots) or 'nowhere'}.")
    return value
