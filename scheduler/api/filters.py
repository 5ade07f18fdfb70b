from __future__ import annotations

import django_filters

from scheduler.choices import JobState, NodeState
from scheduler.models import Gpu, Job, Node


class JobFilter(django_filters.FilterSet):
    state = django_filters.MultipleChoiceFilter(choices=JobState.choices)
    account = django_filters.CharFilter(field_name="account__name")
    owner = django_filters.CharFilter(field_name="owner__username")
    cluster = django_filters.CharFilter(field_name="cluster__name")
    name = django_filters.CharFilter(lookup_expr="icontains")
    submitted_after = django_filters.IsoDateTimeFilter(field_name="submitted_at", lookup_expr="gte")
    submitted_before = django_filters.IsoDateTimeFilter(field_name="submitted_at", lookup_expr="lt")

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
