"""gunicorn's settings for the portal, read from the working directory by every gunicorn
started here: the production web process (``gunicorn quartermaster.asgi:application
--worker-class uvicorn_worker.UvicornWorker``, docs/admin/deployment.md's, the Dockerfile's
and docker-compose.yml's: the portal and the interactive sessions' proxy with its
WebSockets) and the benchmarks' ``gunicorn quartermaster.wsgi``. The worker class stays on
the command line, so each names what its application needs.

Command-line flags still win (``--workers``, ``--bind``, ``--control-socket``).
"""

from __future__ import annotations

import gc
import os
from pathlib import Path
from typing import Any

#: The portal's own state directory, as ``settings.VAR_DIR`` reads it (the settings module
#: is not imported here: the arbiter never loads Django).
VAR_DIR = Path(os.environ.get("QM_VAR_DIR", str(Path(__file__).resolve().parent / "var")))

#: gunicorn's control socket (``gunicornc``: worker status, reload, shutdown), in this
#: portal's own directory. gunicorn's default is per user ($XDG_RUNTIME_DIR/gunicorn.ctl or
#: ~/.gunicorn/gunicorn.ctl), so two portals run by one service user on one host would
#: share one path: the second takes the socket over and gunicornc would act on the wrong
#: portal. (A socket gunicorn cannot create only costs a warning at start.)
control_socket = str(VAR_DIR / "gunicorn.ctl")


def post_worker_init(worker: Any) -> None:
    """Move what the worker has loaded (Django, the URL map, the models, DRF) out of the
    cycle collector's way: a collection then looks only at what requests allocate, not
    at the ~150,000 objects every request would otherwise make it walk again. What a
    request leaves in reference cycles is still collected; the frozen objects live as
    long as the worker anyway. (``gc.freeze``, as the CPython documentation suggests
    for pre-forked servers; measured in the submission figures of CHANGELOG.md.)"""
    gc.freeze()
