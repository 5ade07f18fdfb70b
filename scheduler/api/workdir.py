"""The API's check of a submission's ``workdir``, as text, so a bad one is a 400 at once
(the bounds and why: :mod:`scheduler.jobs.workdir`; the check where the directory really
is, when the job starts: :mod:`scheduler.backends.user_paths`)."""

from __future__ import annotations

import posixpath
from pathlib import Path
from typing import Any

from rest_framework import serializers

from people.models import ClusterIdentity
from scheduler.backends.user_paths import inside
from scheduler.jobs.workdir import workdir_bounds


def checked_workdir(value: str, user: Any) -> str:
    """``value`` if ``user`` may start a job there; else a ``ValidationError`` saying why."""
    if not value:
        return ""
    if not value.startswith("/") or posixpath.normpath(value) != value or any(ord(c) < 32 for c in value):
        raise serializers.ValidationError(
            "Give an absolute path without '..', '.' or '//' parts, for example /home/alice/project."
        )
    identity = ClusterIdentity.objects.filter(user_id=user.pk).values_list("username", flat=True).first()
    bounds = workdir_bounds(identity or user.get_username())
    for tree in bounds.refused:
        own = str(Path(tree).resolve())
        if inside(value, own) or inside(own, value):
            raise serializers.ValidationError(f"{value} holds or lies in the portal's own files.")
    if not any(inside(value, root) for root in bounds.roots):
        raise serializers.ValidationError(f"A job may start only under {', '.join(bounds.roots) or 'nowhere'}.")
    return value
