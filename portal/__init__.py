"""Quartermaster's Django project package and the people side (accounts, quotas)."""

from portal.celery import app as celery_app

__all__ = ["celery_app"]
