from django.urls import path

from monitoring.api.views import FairnessView, ProcessFindingList, SampleIngestView, SeriesView

urlpatterns = [
    path("monitoring/samples/", SampleIngestView.as_view(), name="monitoring-samples"),
    path("monitoring/series/", SeriesView.as_view(), name="monitoring-series"),
    path("monitoring/fairness/", FairnessView.as_view(), name="monitoring-fairness"),
    path("monitoring/process-findings/", ProcessFindingList.as_view(), name="monitoring-process-findings"),
]
