"""Filters every page template may use without ``{% load %}`` (``builtins`` in settings):
values shown one way on every page."""

from __future__ import annotations

from typing import Any

from django import template

from common.labels import field_label as label_of_field
from scheduler.choices import JobState
from web.words import format_walltime
from web.words import queue_position as queue_position_text

register = template.Library()


@register.filter
def walltime(seconds: int | None) -> str:
    """A walltime (or any span of seconds) as the submit form takes it: ``4h``, ``1:30:00``."""
    return "" if seconds is None else format_walltime(seconds)


@register.filter
def field_label(name: str) -> str:
    """A field's name in words (``max_gpus`` -> ``max GPUs``): ``common.labels``."""
    return label_of_field(name)


@register.filter
def queue_position(job: Any) -> str:
    """A job's place in line (``web.words.queue_position``) while it is pending, else ``""``:
    a job that runs, ended or is held has none."""
    if job.state != JobState.PENDING:
        return ""
    return queue_position_text(job.queue_jobs_ahead, job.queue_gpu_hours_ahead)
