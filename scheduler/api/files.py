"""``/api/v1/files/``: the user's own folders, as their cluster identity (``scheduler.files``).

Every operation runs as the caller's cluster user, whoever the caller is (staff too): the
API never reaches a file its caller could not reach in their own shell, and never one
outside their roots (``JOB_WORKDIR_ROOTS``) or inside the portal's own trees.

Errors: 400 and 413 as ``{field: [message]}``; 403 (outside your folders, no cluster
identity, no permission), 404 (no such path) and 409 (exists already, a folder not empty)
as ``{"detail": message}``; 503 when the portal could not act as the user (its sudo rule).
"""

from __future__ import annotations

from typing import Any

from django.http import HttpRequest, StreamingHttpResponse
from django.utils.http import content_disposition_header
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiResponse, extend_schema
from rest_framework import serializers, status
from rest_framework.parsers import MultiPartParser
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from common.api.schema import ErrorSerializer
from common.api.strict import RejectUnknownFields
from common.streaming import StreamedResponse
from scheduler.files.acting import Actor, FilesError, actor_for
from scheduler.files.operations import (
    Download,
    clean_path,
    delete_entry,
    list_folder,
    make_folder,
    open_download,
    roots_of,
)
from scheduler.files.uploads import FILE_FIELD, AgentUploadHandler, StagedUpload

_PATH_HELP = "An absolute path in one of your folders (GET /api/v1/files/roots/ lists them); '..' is refused."


class PathQuery(RejectUnknownFields, serializers.Serializer):
    path = serializers.CharField(help_text=_PATH_HELP, trim_whitespace=False)


class DeleteQuery(PathQuery):
    recursive = serializers.BooleanField(
        default=False, help_text="Delete a folder and everything in it (without it, only an empty folder)."
    )


class UploadQuery(RejectUnknownFields, serializers.Serializer):
    path = serializers.CharField(help_text="The folder the files go to. " + _PATH_HELP, trim_whitespace=False)
    replace = serializers.BooleanField(default=False, help_text="Overwrite a file of the same name.")


class MakeFolderSerializer(RejectUnknownFields, serializers.Serializer):
    path = serializers.CharField(help_text="The folder to make it in. " + _PATH_HELP, trim_whitespace=False)
    name = serializers.CharField(help_text="The new folder's name (no '/').", trim_whitespace=False)


class EntrySerializer(serializers.Serializer):
    name = serializers.CharField()
    type = serializers.ChoiceField(choices=["file", "folder", "link", "fifo", "socket", "device", "other"])
    size = serializers.IntegerField(help_text="Bytes (a link: the length of its target's name).")
    mtime = serializers.DateTimeField()
    permissions = serializers.CharField(help_text="As ls -l shows them, e.g. -rw-r--r--.")


class ListingSerializer(serializers.Serializer):
    path = serializers.CharField()
    # (a field named like DRF's Field.parent attribute, which mypy confuses with it)
    parent = serializers.CharField(allow_null=True, help_text="The folder above, while in your folders.")  # type: ignore[assignment]
    entries = EntrySerializer(many=True)
    truncated = serializers.BooleanField(help_text="More entries than FILES_LIST_MAX_ENTRIES: the rest not listed.")
    skipped = serializers.IntegerField(help_text="Entries left out: names that are not UTF-8, or gone meanwhile.")


class RootsSerializer(serializers.Serializer):
    user = serializers.CharField(help_text="Your cluster user, whom every operation runs as.")
    roots = serializers.ListField(child=serializers.CharField())


class UploadFormSerializer(serializers.Serializer):
    file = serializers.FileField(help_text="One or more files (repeat the field).")


class UploadedSerializer(serializers.Serializer):
    path = serializers.CharField()
    uploaded = serializers.ListField(child=serializers.DictField(), help_text="Each file: name and size in bytes.")


def _answer(error: FilesError) -> Response:
    body = {error.field: [error.message]} if error.status in (400, 413) else {"detail": error.message}
    return Response(body, status=error.status)


def _query(serializer: type[serializers.Serializer], request: Request) -> dict[str, Any]:
    query = serializer(data=request.query_params)
    query.is_valid(raise_exception=True)
    return dict(query.validated_data)


def _errors(*codes: int) -> dict[int, Any]:
    return {code: OpenApiResponse(ErrorSerializer, description=text) for code, text in _ERRORS.items() if code in codes}


_ERRORS = {
    403: "Outside your folders, no cluster identity, or your cluster user may not.",
    404: "No such file or folder.",
    409: "A file or folder of that name exists already, or the folder is not empty.",
    503: "The portal could not act as your cluster user (its sudo rule).",
}


class FilesErrors:
    """Answers a :class:`FilesError` as the module docstring says."""

    def handle_exception(self, exc: Exception) -> Response:
        if isinstance(exc, FilesError):
            return _answer(exc)
        return super().handle_exception(exc)  # type: ignore[misc,no-any-return]


class FilesRootsView(FilesErrors, APIView):
    """Your folders: where the Files page starts."""

    @extend_schema(responses={200: RootsSerializer, **_errors(403)})
    def get(self, request: Request) -> Response:
        actor = actor_for(request.user)
        return Response({"user": actor.user, "roots": roots_of(actor)})


class FilesView(FilesErrors, APIView):
    """List a folder (GET) or delete a file or folder (DELETE)."""

    @extend_schema(parameters=[PathQuery], responses={200: ListingSerializer, **_errors(403, 404, 503)})
    def get(self, request: Request) -> Response:
        listing = list_folder(request.user, _query(PathQuery, request)["path"])
        # Shaped by hand: a serializer per entry costs ~50 us, a second per 20,000 entries.
        entries = [
            {"name": e.name, "type": e.type, "size": e.size, "mtime": e.mtime.isoformat(), "permissions": e.permissions}
            for e in listing.entries
        ]
        body = {"path": listing.path, "parent": listing.parent, "entries": entries}
        return Response({**body, "truncated": listing.truncated, "skipped": listing.skipped})

    @extend_schema(parameters=[DeleteQuery], responses={204: None, **_errors(403, 404, 409, 503)})
    def delete(self, request: Request) -> Response:
        query = _query(DeleteQuery, request)
        delete_entry(request.user, query["path"], recursive=query["recursive"])
        return Response(status=status.HTTP_204_NO_CONTENT)


class FilesMakeFolderView(FilesErrors, APIView):
    """Make a folder."""

    @extend_schema(request=MakeFolderSerializer, responses={201: PathQuery, **_errors(403, 404, 409, 503)})
    def post(self, request: Request) -> Response:
        body = MakeFolderSerializer(data=request.data)
        body.is_valid(raise_exception=True)
        made = make_folder(request.user, body.validated_data["path"], body.validated_data["name"])
        return Response({"path": made}, status=status.HTTP_201_CREATED)


class FilesDownloadView(FilesErrors, APIView):
    """Download a file, or a folder as a ``.tar`` archive (within FILES_ARCHIVE_MAX_BYTES
    and FILES_ARCHIVE_MAX_ENTRIES: 413 beyond). Streamed: any size, flat memory."""

    @extend_schema(
        parameters=[PathQuery],
        responses={
            (200, "application/octet-stream"): OpenApiTypes.BINARY,
            (200, "application/x-tar"): OpenApiTypes.BINARY,
            **_errors(403, 404, 503),
        },
    )
    def get(self, request: Request) -> StreamingHttpResponse:
        return streamed(open_download(request.user, _query(PathQuery, request)["path"]))


def streamed(download: Download) -> StreamingHttpResponse:
    """The HTTP answer for a download (the API's and the page's)."""
    response = StreamedResponse(download.chunks, content_type=download.content_type)
    response["Content-Disposition"] = content_disposition_header(True, download.filename)
    response["X-Content-Type-Options"] = "nosniff"
    if download.size is not None:
        response["Content-Length"] = str(download.size)
    return response


class FilesUploadView(FilesErrors, APIView):
    """Upload files into a folder (multipart, field ``file``, repeatable). Each is streamed
    to disk as you, and appears under its name only once whole."""

    parser_classes = [MultiPartParser]

    def initialize_request(self, request: HttpRequest, *args: Any, **kwargs: Any) -> Request:
        drf_request = super().initialize_request(request, *args, **kwargs)
        replace = str(request.GET.get("replace", "")).lower() in ("1", "true")
        self.uploads = AgentUploadHandler(request, lambda: _destination(drf_request), replace=replace)
        request.upload_handlers = [self.uploads]
        return drf_request

    def dispatch(self, request: HttpRequest, *args: Any, **kwargs: Any) -> Any:
        try:
            return super().dispatch(request, *args, **kwargs)
        finally:  # whatever was not committed is removed
            handler = getattr(self, "uploads", None)
            for staged in handler.uploads if handler is not None else ():
                staged.close()

    @extend_schema(
        parameters=[UploadQuery],
        request={"multipart/form-data": UploadFormSerializer},
        responses={201: UploadedSerializer, **_errors(403, 404, 409, 503)},
    )
    def post(self, request: Request) -> Response:
        query = _query(UploadQuery, request)
        files = [f for f in request.FILES.getlist(FILE_FIELD) if isinstance(f, StagedUpload)]
        if not files:
            raise FilesError(400, "No file was sent (a multipart field named file).", FILE_FIELD)
        uploaded = [staged.commit() for staged in files]
        body = {
            "path": clean_path(query["path"]),
            "uploaded": [{"name": u["name"], "size": u["size"]} for u in uploaded],
        }
        return Response(body, status=status.HTTP_201_CREATED)


def _destination(request: Request) -> tuple[Actor, str]:
    """Who uploads, and where to: read when the first file part starts (see the handler)."""
    user = getattr(request, "_user", None)
    if user is None or not user.is_authenticated:
        user = getattr(request._request, "user", None)  # a session, while DRF checks its CSRF token
    if user is None or not user.is_authenticated:
        raise FilesError(403, "Sign in to upload files.")
    return actor_for(user), clean_path(request._request.GET.get("path"))
