"""Create a node agent's token (the secret is printed once)."""

from __future__ import annotations

from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser

from monitoring.services import create_node_token
from scheduler.models import Node


class Command(BaseCommand):
    help = "Create a token for a node's monitoring agent and print it (store it on the node as QM_NODE_TOKEN)."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("node", help="The node's name.")

    def handle(self, *args: Any, **options: Any) -> None:
        node = Node.objects.filter(name=options["node"]).first()
        if node is None:
            raise CommandError(f"no node named {options['node']!r}")
        _, secret = create_node_token(node)
        self.stdout.write(secret)
