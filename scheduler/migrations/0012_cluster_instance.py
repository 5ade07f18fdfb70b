"""Give every cluster row its own instance id (Django's recipe for a unique field on
existing rows: add it nullable, fill each row, then make it unique and required)."""

import uuid

from django.db import migrations, models


def give_each_cluster_an_instance(apps, schema_editor):
    Cluster = apps.get_model("scheduler", "Cluster")
    for cluster in Cluster.objects.filter(instance__isnull=True):
        cluster.instance = uuid.uuid4()
        cluster.save(update_fields=["instance"])


class Migration(migrations.Migration):
    dependencies = [("scheduler", "0011_node_down_since")]

    operations = [
        migrations.AddField(
            model_name="cluster",
            name="instance",
            field=models.UUIDField(null=True, editable=False),
        ),
        migrations.RunPython(give_each_cluster_an_instance, migrations.RunPython.noop),
        migrations.AlterField(
            model_name="cluster",
            name="instance",
            field=models.UUIDField(default=uuid.uuid4, unique=True, editable=False),
        ),
    ]
