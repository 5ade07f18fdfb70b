"""The built-in interactive apps, as rows like any an admin adds: JupyterLab, TensorBoard
and a web server of one's own. Written once; an admin may edit or disable them after.

Each one serves under ``{base_url}`` (``/sessions/<job id>/``), the path the portal's
proxy forwards as it is, and listens on every interface of its node (the proxy comes
from another host on Slurm and Kubernetes).

- JupyterLab reads its token from ``JUPYTER_TOKEN`` (never on its command line), which
  the proxy sends as ``Authorization: token <secret>``: every request is
  token-authenticated, so Jupyter's XSRF check (which it skips for those) stays on and
  no login page is ever shown. The browser's Origin is the portal's, not the node's,
  so ``allow_origin`` admits it: the token, which only the portal knows, is the guard.
- TensorBoard has no authentication of its own (``secret_via`` none: only the proxy's
  login guards it); its ``--path_prefix`` takes the base URL without the trailing slash.
- A web server of one's own gets its port and base path in ``$QM_SESSION_PORT`` and
  ``$QM_SESSION_BASE_URL``.
"""

from __future__ import annotations

from django.db import migrations

BUILT_IN = [
    {
        "slug": "jupyterlab",
        "name": "JupyterLab",
        "description": "Notebooks, a terminal and a file browser on a node, with the GPUs you ask for.",
        "form_fields": [],
        "command": (
            'export JUPYTER_TOKEN="$QM_SESSION_SECRET"\n'
            "exec jupyter lab --no-browser --ip=0.0.0.0 --port={port} --ServerApp.base_url={base_url} "
            "--ServerApp.allow_origin='*' --ServerApp.allow_remote_access=True --ServerApp.trust_xheaders=True "
            "--ServerApp.quit_button=False"
        ),
        "ready_path": "api/status",
        "secret_via": "header",
        "default_gpus": 1,
        "default_cpus": 2,
        "default_walltime_seconds": 4 * 3600,
    },
    {
        "slug": "tensorboard",
        "name": "TensorBoard",
        "description": "TensorBoard on a directory of your runs' event files.",
        "form_fields": [
            {
                "name": "logdir",
                "label": "Log directory",
                "kind": "path",
                "help": "A directory of yours with TensorBoard event files, for example /home/you/runs.",
            }
        ],
        "command": (
            'exec tensorboard --logdir {logdir} --port {port} --bind_all --path_prefix "${QM_SESSION_BASE_URL%/}"'
        ),
        "ready_path": "",
        "secret_via": "none",
        "default_gpus": 0,
        "default_cpus": 1,
        "default_walltime_seconds": 2 * 3600,
    },
    {
        "slug": "web-server",
        "name": "A web server of your own",
        "description": "Any web server you start yourself (Streamlit, Gradio, a dashboard), reached through "
        "the portal.",
        "form_fields": [
            {
                "name": "command",
                "label": "Command",
                "kind": "text",
                "help": "The command that starts your server in the foreground. It must listen on port "
                "$QM_SESSION_PORT and serve under the path $QM_SESSION_BASE_URL, for example: "
                "python3 -m http.server $QM_SESSION_PORT",
            }
        ],
        "command": "exec bash -c {command}",
        "ready_path": "",
        "secret_via": "none",
        "default_gpus": 0,
        "default_cpus": 1,
        "default_walltime_seconds": 2 * 3600,
    },
]


def add_apps(apps, schema_editor):
    app_model = apps.get_model("scheduler", "InteractiveApp")
    for fields in BUILT_IN:
        app_model.objects.get_or_create(slug=fields["slug"], defaults={k: v for k, v in fields.items() if k != "slug"})


def remove_apps(apps, schema_editor):
    app_model = apps.get_model("scheduler", "InteractiveApp")
    app_model.objects.filter(slug__in=[fields["slug"] for fields in BUILT_IN], sessions__isnull=True).delete()


class Migration(migrations.Migration):
    dependencies = [("scheduler", "0037_interactive_sessions")]

    operations = [migrations.RunPython(add_apps, remove_apps)]
