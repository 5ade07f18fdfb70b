"""A shared GPU says how it is shared (time-slicing or MPS): the overhead charged on its
shares depends on the mode. GPUs shared before were time-sliced (the only mode then).
A GPU also says whether a job may hold it whole (not a Kubernetes time-sliced one)."""

from django.db import migrations, models


class Migration(migrations.Migration):
    dependencies = [
        ("scheduler", "0021_job_gpu_model_sets"),
    ]

    operations = [
        migrations.AddField(
            model_name="gpu",
            name="sharing",
            field=models.CharField(
                blank=True,
                choices=[("time-slicing", "time-slicing"), ("mps", "MPS")],
                help_text="Sharing mode (time-slicing or MPS): fractional jobs (gpu_share) may share it; empty: none.",
                max_length=16,
            ),
        ),
        migrations.RunSQL(
            "UPDATE scheduler_gpu SET sharing = 'time-slicing' WHERE shared",
            "UPDATE scheduler_gpu SET shared = (sharing <> '')",
        ),
        migrations.RemoveField(model_name="gpu", name="shared"),
        migrations.AddField(
            model_name="gpu",
            name="exclusive",
            field=models.BooleanField(
                default=True,
                help_text="A job may hold it whole, alone (false: the workload manager only hands out replicas of it).",
            ),
        ),
    ]
