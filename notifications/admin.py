from django.contrib import admin

from notifications.models import Delivery, Preference


@admin.register(Preference)
class PreferenceAdmin(admin.ModelAdmin):
    list_display = ["user", "email", "webhook_url", "webhook_format"]
    exclude = ["webhook_secret"]


@admin.register(Delivery)
class DeliveryAdmin(admin.ModelAdmin):
    list_display = ["created_at", "user", "channel", "event", "subject", "status", "attempts", "last_error"]
    list_filter = ["status", "channel", "event"]
    readonly_fields = [f.name for f in Delivery._meta.fields]
