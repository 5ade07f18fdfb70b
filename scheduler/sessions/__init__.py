"""Interactive sessions: a job that runs an app's web server, reached through the portal's
proxy (``scheduler.models.InteractiveApp``, ``InteractiveSession``)."""
