"""The people app's API routes; ``quartermaster.urls`` joins them into the one /api/v1/ router."""

from django.urls import path
from rest_framework.routers import DefaultRouter

from people.api.views import (
    AccountViewSet,
    ApiTokenViewSet,
    ClusterIdentityViewSet,
    MembershipViewSet,
    MeView,
    QosViewSet,
    QuotaViewSet,
)

router = DefaultRouter()
router.register("accounts", AccountViewSet, basename="account")
router.register("memberships", MembershipViewSet, basename="membership")
router.register("qos", QosViewSet, basename="qos")
router.register("quotas", QuotaViewSet, basename="quota")
router.register("identities", ClusterIdentityViewSet, basename="identity")
router.register("tokens", ApiTokenViewSet, basename="token")
urlpatterns = [path("me/", MeView.as_view(), name="me")]
