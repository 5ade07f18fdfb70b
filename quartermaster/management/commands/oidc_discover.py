"""``manage.py oidc_discover https://idp.example.org/realms/lab``: print the provider's
endpoints as the environment lines the portal reads (OIDC_OP_*), from its discovery
document, so a site copies them instead of looking each one up."""

from __future__ import annotations

from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser

from quartermaster.oidc_settings import discover


class Command(BaseCommand):
    help = "Print an OIDC provider's endpoints as OIDC_OP_* environment lines (from its discovery document)."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("issuer", help="the provider's issuer URL (Keycloak: https://host/realms/<realm>)")

    def handle(self, *args: Any, issuer: str, **options: Any) -> None:
        try:
            endpoints = discover(issuer)
        except ValueError as exc:
            raise CommandError(str(exc)) from None
        for name, url in endpoints.items():
            self.stdout.write(f"{name}={url}")
