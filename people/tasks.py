"""Thin Celery tasks of the people side."""

from __future__ import annotations

from celery import shared_task


@shared_task(name="portal.sync_directory", ignore_result=True)
def sync_directory() -> dict[str, int]:
    """Bring directory users in line with LDAP between their logins (``people.directory``)."""
    # Imported here: people.directory needs python-ldap, which a site without LDAP lacks.
    from people.directory import sync_directory as sync

    return sync()
