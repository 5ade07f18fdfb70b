"""Filters every page template may use without ``{% load %}`` (``builtins`` in settings):
values shown one way on every page."""

from __future__ import annotations

from django import template

from common.labels import field_label as label_of_field
from web.words import format_walltime

register = template.Library()


@register.filter
def walltime(seconds: int | None) -> str:
    """A walltime (or any span of seconds) as the submit form takes it: ``4h``, ``1:30:00``."""
    return "" if seconds is None else format_walltime(seconds)


@register.filter
def field_label(name: str) -> str:
    """A field's name in words (``max_gpus`` -> ``max GPUs``): ``common.labels``."""
    return label_of_field(name)
