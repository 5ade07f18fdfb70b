"""Uploads: a request's file parts streamed straight to the files agent, as the user.

Django would keep an upload in memory or in a temporary file of the portal's own; this
handler (installed per request, before the body is read) instead starts the agent for
each part and hands it the bytes as they arrive, so no file is ever whole in the portal's
memory nor written as the portal's user. The agent keeps it as a hidden temporary file
until the view calls :meth:`StagedUpload.commit`, after the request passed every check
(CSRF is one: Django reads the body to find the token, so the body is read before the
view knows the request is genuine); a request refused after that leaves nothing behind
(:meth:`StagedUpload.close` runs when Django closes the request's files).
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable
from typing import Any

from django.conf import settings
from django.core.files.uploadedfile import UploadedFile
from django.core.files.uploadhandler import FileUploadHandler

from scheduler.files.acting import Actor, FilesError
from scheduler.files.agent import CHUNK, FRAME, Refused, check_name
from scheduler.files.operations import AgentCall, start_agent, within_roots

#: The multipart field that holds files, in the API and the page's form.
FILE_FIELD = "file"
#: What a multipart body may hold beyond its files' bytes (boundaries, headers, fields).
ENVELOPE_BYTES = 1 << 16


class StagedUpload(UploadedFile):
    """One uploaded file, held by its agent until committed (no content here to read)."""

    def __init__(self, actor: Actor, folder: str, name: str, *, replace: bool) -> None:
        super().__init__(None, name, None, 0)
        self.error: FilesError | None = None
        self.committed = False
        self.call: AgentCall | None = None
        try:
            request = {
                "op": "put",
                "path": folder,
                "roots": within_roots(actor, folder),
                "name": name,
                "replace": replace,
                "max_bytes": settings.FILES_MAX_UPLOAD_BYTES,
            }
            self.call = start_agent(actor, request, keep_stdin=True)
        except FilesError as exc:
            self.error = exc

    def send(self, data: bytes) -> None:
        if self.error is None:
            self._send(FRAME.pack(len(data)), data)

    def finish(self) -> None:
        """The last chunk came: the agent answers with the staged size (or why not)."""
        if self.error is None:
            self._send(FRAME.pack(0))
        if self.error is None and self.call is not None:
            self._answer()

    def commit(self) -> dict[str, Any]:
        """Give the file its name (:class:`FilesError` when the agent could not)."""
        if self.error is not None:
            raise self.error
        assert self.call is not None and self.call.process.stdin is not None
        self._send(b"C")
        with contextlib.suppress(OSError):
            self.call.process.stdin.close()
        head = self._answer()
        self.committed = True
        self.close()
        return head

    def close(self) -> None:
        """Remove the staged file unless committed (the agent sees stdin end), and reap it."""
        if self.call is not None:
            self.call.close()

    def _send(self, *parts: bytes) -> None:
        assert self.call is not None and self.call.process.stdin is not None
        try:
            for part in parts:
                self.call.process.stdin.write(part)
            self.call.process.stdin.flush()
        except (BrokenPipeError, ValueError):
            self._answer()  # it stopped reading: its next head line says why

    def _answer(self) -> dict[str, Any]:
        assert self.call is not None
        try:
            head = self.call.read_head(" to upload")
        except FilesError as exc:
            exc.field = "file" if exc.field == "path" and exc.status == 413 else exc.field
            self.error = exc
            raise
        self.size = int(head.get("size") or self.size or 0)
        return head


class AgentUploadHandler(FileUploadHandler):
    """Streams each ``file`` part of a multipart body to an agent (see the module docs).

    ``destination`` says, when the first file starts, who uploads and into which folder
    (the request's user may be known only by then: DRF authenticates while reading it)."""

    chunk_size = CHUNK

    def __init__(self, request: Any, destination: Callable[[], tuple[Actor, str]], *, replace: bool) -> None:
        super().__init__(request)
        self.destination, self.replace = destination, replace
        self.staged: StagedUpload | None = None
        self.uploads: list[StagedUpload] = []

    def handle_raw_input(
        self, input_data: Any, META: Any, content_length: int, boundary: Any, encoding: Any = None
    ) -> None:
        limit = settings.FILES_MAX_UPLOAD_BYTES
        if content_length and content_length > limit + ENVELOPE_BYTES:
            raise FilesError(413, f"The upload is larger than {limit} bytes, the most the portal accepts.", FILE_FIELD)

    def new_file(self, field_name: str, file_name: str, *args: Any, **kwargs: Any) -> None:
        super().new_file(field_name, file_name, *args, **kwargs)
        self.staged = None
        if field_name != FILE_FIELD:
            return
        try:
            name = check_name(file_name, FILE_FIELD)
        except Refused as exc:
            raise FilesError(400, str(exc).partition(": ")[2], FILE_FIELD) from None
        actor, folder = self.destination()
        self.staged = StagedUpload(actor, folder, name, replace=self.replace)
        self.uploads.append(self.staged)

    def receive_data_chunk(self, raw_data: bytes, start: int) -> None:
        if self.staged is not None:
            with contextlib.suppress(FilesError):  # kept in staged.error, reported by commit
                self.staged.send(raw_data)

    def file_complete(self, file_size: int) -> StagedUpload | None:
        staged, self.staged = self.staged, None
        if staged is not None:
            with contextlib.suppress(FilesError):
                staged.finish()
        return staged
