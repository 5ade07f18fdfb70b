from django.urls import path
from rest_framework.routers import DefaultRouter

from portal.api.views import (
    AccountViewSet,
    ApiTokenViewSet,
    ClusterIdentityViewSet,
    MembershipViewSet,
    MeView,
    QosViewSet,
    QuotaViewSet,
)
from scheduler.api.urls import router as scheduler_router
from scheduler.api.urls import urlpatterns as scheduler_urlpatterns
from scheduler.api.usage import UsageView
from scheduler.api.views import FairShareView

router = DefaultRouter()
router.register("accounts", AccountViewSet, basename="account")
router.register("memberships", MembershipViewSet, basename="membership")
router.register("qos", QosViewSet, basename="qos")
router.register("quotas", QuotaViewSet, basename="quota")
router.register("identities", ClusterIdentityViewSet, basename="identity")
router.register("tokens", ApiTokenViewSet, basename="token")
# One router for the whole API so /api/v1/ lists every collection.
router.registry.extend(scheduler_router.registry)
urlpatterns = [
    path("me/", MeView.as_view(), name="me"),
    path("fairshare/", FairShareView.as_view(), name="fairshare"),
    path("usage/", UsageView.as_view(), name="usage"),
    *scheduler_urlpatterns,
    *router.urls,
]
