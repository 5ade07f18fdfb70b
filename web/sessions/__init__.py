"""``/sessions/<job id>/...``: the proxy to interactive sessions' servers (HTTP and
WebSocket), on the portal's own origin. ``quartermaster.asgi`` routes that path here;
nothing else of the portal lives under it."""
