"""What the Files page changes: uploads, new folders and deletions, as your cluster user.

Each answers with a redirect back to the folder and a message; a folder that is not
empty is deleted only after a page that asks (it works without JavaScript)."""

from __future__ import annotations

import os
from urllib.parse import urlencode

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.http import HttpRequest, HttpResponse
from django.middleware.csrf import CsrfViewMiddleware
from django.shortcuts import redirect, render
from django.urls import reverse
from django.views.decorators.csrf import csrf_exempt
from django.views.decorators.http import require_POST

from common.api.errors import reads_own_body
from scheduler.files.acting import Actor, FilesError, actor_for
from scheduler.files.operations import clean_path, delete_entry, make_folder
from scheduler.files.uploads import FILE_FIELD, AgentUploadHandler, StagedUpload


def back_to(path: str) -> HttpResponse:
    return redirect(f"{reverse('web:files')}?{urlencode({'path': path})}")


@reads_own_body
@csrf_exempt  # checked below, once the upload handler is in place (Django's documented way)
@login_required
@require_POST
def files_upload(request: HttpRequest) -> HttpResponse:
    """The files of the form's ``file`` field, into the folder ``?path=``; each appears
    only if the request passes its CSRF check (until then it is a hidden temporary)."""
    folder = request.GET.get("path", "")
    handler = AgentUploadHandler(
        request, lambda: _destination(request, folder), replace=request.GET.get("replace") == "1"
    )
    request.upload_handlers = [handler]
    try:
        try:
            refusal = CsrfViewMiddleware(HttpResponse).process_view(request, _csrf_checked, (), {})
            if refusal is not None:
                return refusal
            files = [f for f in request.FILES.getlist(FILE_FIELD) if isinstance(f, StagedUpload)]
            if not files:
                raise FilesError(400, "Choose a file to upload.", FILE_FIELD)
            names = [staged.commit()["name"] for staged in files]
        except FilesError as error:
            messages.error(request, error.message)
            return back_to(folder) if folder.startswith("/") else redirect("web:files")
        messages.success(request, f"Uploaded {', '.join(names)}.")
        return back_to(folder)
    finally:
        for staged in handler.uploads:
            staged.close()


def _csrf_checked(request: HttpRequest) -> HttpResponse:
    """What the CSRF check is told it guards: a view that is not exempt (this one's
    outer view is, so that the upload handler can be set first)."""
    raise AssertionError("never called")


def _destination(request: HttpRequest, folder: str) -> tuple[Actor, str]:
    return actor_for(request.user), clean_path(folder)


@login_required
@require_POST
def files_mkdir(request: HttpRequest) -> HttpResponse:
    folder = request.POST.get("path", "")
    try:
        made = make_folder(request.user, folder, request.POST.get("name", ""))
    except FilesError as error:
        messages.error(request, error.message)
        return back_to(folder) if folder.startswith("/") else redirect("web:files")
    messages.success(request, f"Made the folder {os.path.basename(made)}.")
    return back_to(folder)


@login_required
@require_POST
def files_delete(request: HttpRequest) -> HttpResponse:
    """Delete ``path``; a folder that is not empty only with ``recursive`` (the page that
    asks sends it)."""
    path = request.POST.get("path", "")
    recursive = request.POST.get("recursive") == "1"
    parent = os.path.dirname(path.rstrip("/")) or "/"
    try:
        kind = delete_entry(request.user, path, recursive=recursive)
    except FilesError as error:
        if error.status == 409 and not recursive and "not empty" in error.message:
            return render(request, "web/files/confirm_delete.html", {"path": path, "parent": parent}, status=409)
        messages.error(request, error.message)
        return back_to(parent) if parent.startswith("/") else redirect("web:files")
    messages.success(request, f"Deleted the {kind} {os.path.basename(path)}.")
    return back_to(parent)
