"""The login page (local or LDAP passwords through Django's form, and a "Sign in with ..."
button when an OIDC provider is configured) and the OIDC flow's own two addresses, which
answer 404 while OIDC is off instead of failing on missing settings."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from django.conf import settings
from django.contrib.auth import views as auth_views
from django.http import Http404, HttpRequest, HttpResponse
from django.urls import path
from mozilla_django_oidc.views import OIDCAuthenticationCallbackView, OIDCAuthenticationRequestView


class LoginView(auth_views.LoginView):
    redirect_authenticated_user = True

    def get_context_data(self, **kwargs: Any) -> dict[str, Any]:
        context = super().get_context_data(**kwargs)
        context["oidc_provider_name"] = settings.OIDC_PROVIDER_NAME if settings.OIDC_ENABLED else ""
        context["oidc_failed"] = settings.OIDC_ENABLED and self.request.GET.get("signin") == "failed"
        return context


def _when_enabled(view: Callable[..., HttpResponse]) -> Callable[..., HttpResponse]:
    def guarded(request: HttpRequest, *args: Any, **kwargs: Any) -> HttpResponse:
        if not settings.OIDC_ENABLED:
            raise Http404("OIDC sign-in is not configured on this portal")
        return view(request, *args, **kwargs)

    return guarded


#: mozilla-django-oidc reverses these names without a namespace, so they live at the root.
oidc_urlpatterns = [
    path("oidc/authenticate/", _when_enabled(OIDCAuthenticationRequestView.as_view()), name="oidc_authentication_init"),
    path(
        "oidc/callback/", _when_enabled(OIDCAuthenticationCallbackView.as_view()), name="oidc_authentication_callback"
    ),
]
