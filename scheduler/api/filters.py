from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import django_filters
from django import forms
from django.core.exceptions import ValidationError
from django.db.models import F
from django_filters.fields import IsoDateTimeField
from rest_framework.filters import OrderingFilter

from scheduler.choices import JobState, NodeState
from scheduler.models import Gpu, Job, Node


class UtcIsoDateTimeField(IsoDateTimeField):
    """An ISO 8601 instant, converted to UTC before it reaches the database.

    PostgreSQL refuses UTC offsets beyond +-15:59 that ISO 8601 allows, and an instant near
    year 1 or 9999 may not exist in UTC at all: both are a 400, not a database error.
    """

    def to_python(self, value: Any) -> datetime | None:
        result = super().to_python(value)
        if result is None:
            return None
        try:
            return result.astimezone(UTC)
        except OverflowError:
            raise ValidationError(self.error_messages["invalid"], code="invalid") from None


class UtcIsoDateTimeFilter(django_filters.IsoDateTimeFilter):
    field_class = UtcIsoDateTimeField


class IdFilter(django_filters.NumberFilter):
    """A whole number a database integer column can hold: ``1.5``, ``-1e308`` or
    ``99999999999999999999`` are a 400 naming the parameter, not a database error."""

    field_class = forms.IntegerField

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        kwargs.setdefault("min_value", 0)
        kwargs.setdefault("max_value", 2**63 - 1)
        super().__init__(*args, **kwargs)


class JobFilter(django_filters.FilterSet):
    state = django_filters.MultipleChoiceFilter(choices=JobState.choices)
    account = django_filters.CharFilter(field_name="account__name")
    owner = django_filters.CharFilter(field_name="owner__username")
    cluster = django_filters.CharFilter(field_name="cluster__name")
    name = django_filters.CharFilter(lookup_expr="icontains")
    array_job = IdFilter(field_name="array_job_id", help_text="The tasks of this job array.")
    array_task = IdFilter(field_name="array_task_id", max_value=2**31 - 1, help_text="The task with this index.")
    submitted_after = UtcIsoDateTimeFilter(field_name="submitted_at", lookup_expr="gte")
    submitted_before = UtcIsoDateTimeFilter(field_name="submitted_at", lookup_expr="lt")

    class Meta:
        model = Job
        fields = ["state", "account", "owner", "cluster", "name", "gpu_model"]


class NodeFilter(django_filters.FilterSet):
    cluster = django_filters.CharFilter(field_name="cluster__name")
    state = django_filters.MultipleChoiceFilter(choices=NodeState.choices)
    gpu_model = django_filters.CharFilter(field_name="gpus__model", distinct=True)

    class Meta:
        model = Node
        fields = ["cluster", "state", "gpu_model"]


class GpuFilter(django_filters.FilterSet):
    node = django_filters.CharFilter(field_name="node__name")
    cluster = django_filters.CharFilter(field_name="node__cluster__name")

    class Meta:
        model = Gpu
        fields = ["node", "cluster", "model", "mig_profile"]


class NullsLastOrdering(OrderingFilter):
    """DRF's ``?ordering=``, with the view's ``nulls_last_fields`` sorted with their nulls
    last in both directions (PostgreSQL and SQLite disagree on where NULL goes): a job
    with no figure is not the best nor the worst, so it follows the ones that have one."""

    def filter_queryset(self, request: Any, queryset: Any, view: Any) -> Any:
        ordering = self.get_ordering(request, queryset, view)
        if not ordering:
            return queryset
        special = set(getattr(view, "nulls_last_fields", ()))
        terms: list[Any] = []
        for term in ordering:
            name = term.lstrip("-")
            if name in special:
                terms.append(F(name).desc(nulls_last=True) if term.startswith("-") else F(name).asc(nulls_last=True))
            else:
                terms.append(term)
        return queryset.order_by(*terms)
