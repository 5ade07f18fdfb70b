from django.apps import AppConfig


class PeopleConfig(AppConfig):
    """The people app: accounts, memberships, quotas, QOS, identities, tokens, audit.

    Its label stays ``portal`` (the name it had inside the project package), so its
    tables, migrations and every foreign key to it are unchanged."""

    name = "people"
    label = "portal"
    verbose_name = "Accounts and quotas"

    def ready(self) -> None:
        from common.api import schema  # noqa: F401  (registers the OpenAPI auth extension)
