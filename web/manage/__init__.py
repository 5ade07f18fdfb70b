"""The pages under /manage/: staff only (``access.staff_required``), forms validated by the API's serializers."""
