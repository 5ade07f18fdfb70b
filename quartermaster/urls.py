"""Every route of the portal: the whole /api/v1/ router (one, so /api/v1/ lists every
collection), the schema, metrics, admin, sign-in and the pages."""

from django.contrib import admin
from django.urls import include, path
from rest_framework.routers import DefaultRouter

from common.api.docs import SchemaView, SwaggerView
from monitoring.views import metrics
from people.api import urls as people_api
from scheduler.api import urls as scheduler_api
from scheduler.api.usage import UsageView
from scheduler.api.views import FairShareView
from web.signin import oidc_urlpatterns

handler400 = "common.api.errors.bad_request_handler"
handler403 = "common.api.errors.forbidden"
handler404 = "common.api.errors.not_found"

api = DefaultRouter()
api.registry.extend([*people_api.router.registry, *scheduler_api.router.registry])
api_urlpatterns = [
    *people_api.urlpatterns,
    path("fairshare/", FairShareView.as_view(), name="fairshare"),
    path("usage/", UsageView.as_view(), name="usage"),
    *scheduler_api.urlpatterns,
    *api.urls,
]

# The API first: the pages' patterns share no prefix with it, and every API request
# (the busiest: scripts, node agents) then skips the pages' forty patterns.
urlpatterns = [
    path("api/v1/", include(api_urlpatterns)),
    path("api/v1/", include("monitoring.api.urls")),
    path("api/v1/", include("notifications.api")),
    path("api/schema/", SchemaView.as_view(), name="schema"),
    path("api/docs/", SwaggerView.as_view(url_name="schema"), name="swagger-ui"),
    path("metrics", metrics, name="metrics"),
    path("admin/", admin.site.urls),
    *oidc_urlpatterns,
    path("", include("web.urls")),
]
