"""Leave a fifth of each page of the job table free on PostgreSQL (fillfactor 80).

A job row is rewritten many times in its life (its reason and blockers by the tick, its
state by every transition); with full pages every rewrite also rewrites an entry in each
of the table's indexes, while room on the page lets PostgreSQL make a heap-only update
when no indexed column changed. Measured on the tick benchmark (10,000 pending): the
writes of changed reasons 20-25% faster. Only new pages are affected until the table is
rewritten (VACUUM FULL); SQLite has no such setting.
"""

from django.db import migrations


def set_fillfactor(apps, schema_editor):
    if schema_editor.connection.vendor == "postgresql":
        schema_editor.execute("ALTER TABLE scheduler_job SET (fillfactor = 80)")


def reset_fillfactor(apps, schema_editor):
    if schema_editor.connection.vendor == "postgresql":
        schema_editor.execute("ALTER TABLE scheduler_job RESET (fillfactor)")


class Migration(migrations.Migration):
    dependencies = [("scheduler", "0019_job_arrays")]

    operations = [migrations.RunPython(set_fillfactor, reset_fillfactor)]
