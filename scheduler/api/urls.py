from rest_framework.routers import DefaultRouter

from scheduler.api.views import ClusterViewSet, GpuViewSet, JobViewSet, NodeViewSet

router = DefaultRouter()
router.register("jobs", JobViewSet, basename="job")
router.register("nodes", NodeViewSet, basename="node")
router.register("gpus", GpuViewSet, basename="gpu")
router.register("clusters", ClusterViewSet, basename="cluster")
