from django.contrib import admin
from django.urls import include, path

from monitoring.views import metrics
from portal.api.docs import SchemaView, SwaggerView
from portal.web.signin import oidc_urlpatterns

handler400 = "portal.api.errors.bad_request_handler"
handler403 = "portal.api.errors.forbidden"
handler404 = "portal.api.errors.not_found"

# The API first: the pages' patterns share no prefix with it, and every API request
# (the busiest: scripts, node agents) then skips the pages' forty patterns.
urlpatterns = [
    path("api/v1/", include("portal.api.urls")),
    path("api/v1/", include("monitoring.api.urls")),
    path("api/v1/", include("notifications.api")),
    path("api/schema/", SchemaView.as_view(), name="schema"),
    path("api/docs/", SwaggerView.as_view(url_name="schema"), name="swagger-ui"),
    path("metrics", metrics, name="metrics"),
    path("admin/", admin.site.urls),
    *oidc_urlpatterns,
    path("", include("portal.web.urls")),
]
