from django.contrib import admin

from monitoring.models import GpuSample


@admin.register(GpuSample)
class GpuSampleAdmin(admin.ModelAdmin):
    list_display = ["gpu", "at", "utilization_pct", "memory_used_mib", "temperature_c", "power_w"]
    list_filter = ["gpu__node"]
    list_select_related = ["gpu", "gpu__node"]
    date_hierarchy = "at"
