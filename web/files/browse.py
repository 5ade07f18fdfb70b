"""The Files page: your folders, a folder's entries, and downloads, all as your cluster
user (``scheduler.files``); what the page changes is in :mod:`web.files.changes`."""

from __future__ import annotations

import os
from typing import Any

from django.contrib.auth.decorators import login_required
from django.http import HttpRequest, HttpResponse, StreamingHttpResponse
from django.shortcuts import render
from django.views.decorators.http import require_GET

from scheduler.api.files import streamed
from scheduler.files.acting import FilesError, actor_for
from scheduler.files.operations import Listing, list_folder, open_download, roots_of


@login_required
@require_GET
def files_page(request: HttpRequest) -> HttpResponse:
    """Your top folders (no ``path``), or the folder ``path`` with its entries."""
    path = request.GET.get("path", "")
    try:
        if not path:
            actor = actor_for(request.user)
            return render(request, "web/files/browse.html", {"roots": roots_of(actor), "cluster_user": actor.user})
        listing = list_folder(request.user, path)
    except FilesError as error:
        return refused(request, error, path)
    return render(
        request,
        "web/files/browse.html",
        {"listing": listing, "crumbs": breadcrumbs(listing), "path": listing.path},
    )


@login_required
@require_GET
def files_download(request: HttpRequest) -> HttpResponse | StreamingHttpResponse:
    """A file, or a folder as a ``.tar`` archive, streamed."""
    path = request.GET.get("path", "")
    try:
        return streamed(open_download(request.user, path))
    except FilesError as error:
        return refused(request, error, path)


def refused(request: HttpRequest, error: FilesError, path: str) -> HttpResponse:
    """The page again, saying why not, with the error's status."""
    context: dict[str, Any] = {"error": error.message, "path": path}
    try:
        context["roots"] = roots_of(actor_for(request.user))
    except FilesError:
        context["roots"] = []
    return render(request, "web/files/browse.html", context, status=error.status)


def breadcrumbs(listing: Listing) -> list[tuple[str, str]]:
    """``(label, path)`` from the root holding ``listing`` down to it: the root whole, as
    one step (the folders above it are not yours to browse), then each folder."""
    root = max((r for r in listing.roots if listing.path == r or listing.path.startswith(r.rstrip("/") + "/")), key=len)
    crumbs = [(root, root)]
    rest = listing.path[len(root) :].strip("/")
    where = root
    for part in rest.split("/") if rest else []:
        where = os.path.join(where, part)
        crumbs.append((part, where))
    return crumbs
