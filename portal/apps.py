from django.apps import AppConfig


class PortalConfig(AppConfig):
    name = "portal"
    verbose_name = "Accounts and quotas"

    def ready(self) -> None:
        from portal import schema  # noqa: F401  (registers the OpenAPI auth extension)
