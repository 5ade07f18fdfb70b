"""Monitoring fixtures: a node of the test cluster with a node token, and a client for it."""

from __future__ import annotations

from datetime import datetime
from typing import Any

import pytest
from rest_framework.test import APIClient


@pytest.fixture
def node(world: Any) -> Any:
    """``h100-01``: 8 H100s, indices 0-7, of the ``world`` cluster."""
    from scheduler.models import Node

    return Node.objects.get(name="h100-01")


@pytest.fixture
def agent(node: Any) -> Any:
    """``agent.post(samples, node=...)`` posts a batch with ``h100-01``'s token."""
    from monitoring.services import create_node_token

    _, secret = create_node_token(node)
    client = AgentClient()
    client.credentials(HTTP_AUTHORIZATION=f"Bearer {secret}")
    return client


class AgentClient(APIClient):
    def post_samples(self, samples: list[dict[str, Any]], **batch: Any) -> Any:
        return self.post("/api/v1/monitoring/samples/", {"samples": samples, **batch}, format="json")


def sample(index: int, at: datetime, **fields: Any) -> dict[str, Any]:
    """A valid sample of GPU ``index`` at ``at``; ``fields`` override or add."""
    return {"index": index, "at": at.isoformat(), "utilization_pct": 50.0, "memory_used_mib": 1000} | fields
