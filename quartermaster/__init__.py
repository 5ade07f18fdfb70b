"""Quartermaster's Django project: settings, every route, the Celery app, the periodic
work, demo data and the management commands. The apps live beside it (``people``,
``scheduler``, ``monitoring``, ``notifications``, ``web``), on ``common``."""

from quartermaster.celery import app as celery_app

__all__ = ["celery_app"]
