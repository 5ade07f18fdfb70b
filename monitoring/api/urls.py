from django.urls import path

from monitoring.api.views import FairnessView, SampleIngestView, SeriesView

urlpatterns = [
    path("monitoring/samples/", SampleIngestView.as_view(), name="monitoring-samples"),
    path("monitoring/series/", SeriesView.as_view(), name="monitoring-series"),
    path("monitoring/fairness/", FairnessView.as_view(), name="monitoring-fairness"),
]
