from django.urls import path
from rest_framework.routers import DefaultRouter

from common.api.errors import reads_own_body
from scheduler.api.advice import AdviceView
from scheduler.api.arrays import ArrayViewSet
from scheduler.api.files import FilesDownloadView, FilesMakeFolderView, FilesRootsView, FilesUploadView, FilesView
from scheduler.api.reservations import ReservationViewSet
from scheduler.api.sessions import AppViewSet, SessionViewSet
from scheduler.api.simulations import AccountPreviewStart, SimulationViewSet
from scheduler.api.views import ClusterViewSet, GpuViewSet, JobViewSet, NodeViewSet, StartBacktestViewSet

router = DefaultRouter()
router.register("jobs", JobViewSet, basename="job")
router.register("arrays", ArrayViewSet, basename="array")
router.register("nodes", NodeViewSet, basename="node")
router.register("gpus", GpuViewSet, basename="gpu")
router.register("clusters", ClusterViewSet, basename="cluster")
router.register("reservations", ReservationViewSet, basename="reservation")
router.register("simulations", SimulationViewSet, basename="simulation")
router.register("start-backtests", StartBacktestViewSet, basename="start-backtest")
router.register("apps", AppViewSet, basename="app")
router.register("sessions", SessionViewSet, basename="session")

#: Routes besides the router's. ``POST /api/v1/jobs/estimate`` is the what-if without the
#: router's trailing slash: APPEND_SLASH cannot redirect a POST (it raises under DEBUG and
#: the client would re-send a GET otherwise). It is the same view, left out of the
#: schema (``schema=None``) so that the operation is documented once.
urlpatterns = [
    path("advice/", AdviceView.as_view(), name="advice"),
    path("files/", FilesView.as_view(), name="files"),
    path("files/roots/", FilesRootsView.as_view(), name="files-roots"),
    path("files/download/", FilesDownloadView.as_view(), name="files-download"),
    path("files/upload/", reads_own_body(FilesUploadView.as_view()), name="files-upload"),
    path("files/mkdir/", FilesMakeFolderView.as_view(), name="files-mkdir"),
    path("accounts/<int:account_id>/preview/", AccountPreviewStart.as_view(), name="account-preview"),
    path(
        "jobs/estimate",
        JobViewSet.as_view({"post": "estimate"}, detail=False, basename="job", schema=None),
        name="job-estimate-no-slash",
    ),
]
