"""The researcher's interactive apps (``/interactive/``): the apps, the launch forms and
the session cards. ``/sessions/`` is the proxy's, not a page of these."""
