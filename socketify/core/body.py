"""Form bodies: urlencoded and multipart/form-data.

Theory of operation. `parse_form(req)` reads the body through `req.iter_body()`, so a body the
connection streams is never held whole: each piece goes straight into python-multipart's
streaming parser, whose callbacks fill the current part — a field into a small buffer, a file
into a `SpooledTemporaryFile` that stays in memory up to `BodyLimits.spool_size` and moves to
an (already unlinked) temporary file beyond it. Limits are checked as the bytes arrive, so an
oversized upload is refused before it is stored: too many parts, a field or a file over its
limit answer 413; a body that is not valid multipart (no boundary, bad framing, truncated)
answers 400. Temporary files are closed when the request's `UploadedFile`s are dropped, or
explicitly with `close()`.

A part is a file when it has a filename or a Content-Type, a field without a name is
dropped, binary data is kept byte for byte.
"""

from __future__ import annotations

import os
import shutil
import tempfile
from dataclasses import dataclass
from typing import IO, TYPE_CHECKING
from urllib.parse import unquote

from python_multipart import MultipartParser
from python_multipart.exceptions import FormParserError
from python_multipart.multipart import MultipartState

from socketify.core.errors import HTTPError
from socketify.core.headers import MultiDict
from socketify.core.urlencoded import parse_query

if TYPE_CHECKING:
    from socketify.core.request import Request

__all__ = ["BodyLimits", "UploadedFile", "UploadedFiles", "parse_form", "parse_header_params"]

_URLENCODED = "application/x-www-form-urlencoded"
_MULTIPART = "multipart/form-data"
_COPY_BUFFER = 1 << 20


@dataclass(frozen=True, slots=True)
class BodyLimits:
    """Limits for form parsing; sizes in bytes (the server's max_body_size still applies)."""

    max_parts: int = 1000  # fields plus files (urlencoded: key=value pairs)
    max_field_size: int = 1 << 20  # one non-file field
    max_file_size: int | None = None  # one file; None: only max_body_size bounds it
    spool_size: int = 1 << 20  # a file part larger than this moves to a temporary file
    max_part_header_size: int = 8192  # one header line inside a part
    max_part_headers: int = 16  # header lines per part
    temp_dir: str | None = None  # where spilled parts go (default: tempfile.gettempdir())


DEFAULT_LIMITS = BodyLimits()


class UploadedFile:
    """One uploaded file: `filename`, `content_type`, `size`, `read()`, `save(path)`, `file`."""

    __slots__ = ("content_type", "file", "filename", "headers", "name", "size")

    def __init__(
        self,
        name: str,
        filename: str,
        content_type: str,
        file: IO[bytes],
        size: int,
        headers: list[tuple[str, str]],
    ) -> None:
        self.name = name  # the form field name
        self.filename = filename  # the client's name, reduced to its last path component
        self.content_type = content_type
        self.file = file  # positioned at the start; in memory or a temporary file
        self.size = size
        self.headers = headers  # the part's own header lines, names lower-cased

    def read(self, size: int = -1) -> bytes:
        """Read from the file's current position (all of it by default)."""
        return self.file.read(size)

    def save(self, path: str | os.PathLike[str]) -> None:
        """Copy the whole upload to `path` (streamed, never loaded at once)."""
        position = self.file.tell()
        self.file.seek(0)
        try:
            with open(path, "wb") as out:
                shutil.copyfileobj(self.file, out, _COPY_BUFFER)
        finally:
            self.file.seek(position)

    @property
    def in_memory(self) -> bool:
        """True while the data is still held in memory (at most `spool_size` bytes)."""
        return not getattr(self.file, "_rolled", True)

    def close(self) -> None:
        """Release the temporary file now instead of when the request is dropped."""
        self.file.close()

    def __repr__(self) -> str:
        return f"<UploadedFile {self.name}={self.filename!r} {self.content_type} {self.size}B>"


class UploadedFiles(dict[str, UploadedFile]):
    """Field name -> the last file sent under it; `getall(name)` gives every one."""

    def __init__(self) -> None:
        super().__init__()
        self._all: dict[str, list[UploadedFile]] = {}

    def add(self, upload: UploadedFile) -> None:
        """Record one more file under its field name."""
        self[upload.name] = upload
        self._all.setdefault(upload.name, []).append(upload)

    def getall(self, name: str) -> list[UploadedFile]:
        """Every file sent under `name`, in arrival order."""
        return list(self._all.get(name, ()))

    def close(self) -> None:
        """Close every file."""
        for uploads in self._all.values():
            for upload in uploads:
                upload.close()


def parse_form(req: Request, limits: BodyLimits | None = None) -> tuple[MultiDict, UploadedFiles]:
    """Parse an urlencoded or multipart body into (fields, files); other bodies give empties."""
    limits = limits or DEFAULT_LIMITS
    media_type, params = parse_header_params(req.content_type)
    if media_type == _URLENCODED:
        return _parse_urlencoded(req, limits), UploadedFiles()
    if media_type == _MULTIPART:
        boundary = params.get("boundary", "")
        if not boundary or len(boundary) > 70 or not boundary.isascii():
            raise HTTPError(400, "Multipart body without a valid boundary")
        return _MultipartReader(boundary, limits).read(req)
    return MultiDict(), UploadedFiles()


def _parse_urlencoded(req: Request, limits: BodyLimits) -> MultiDict:
    text = req.body.decode("utf-8", "replace")
    if text.count("&") >= limits.max_parts:
        raise HTTPError(413, "Too many form fields")
    form = parse_query(text)
    for values in (form.getall(key) for key in form):
        if any(len(value) > limits.max_field_size for value in values):
            raise HTTPError(413, "A form field is too large")
    return form


class _MultipartReader:
    """Drives python-multipart's callbacks and assembles fields and files as they stream."""

    def __init__(self, boundary: str, limits: BodyLimits) -> None:
        self.limits = limits
        self.fields: list[tuple[str, str]] = []
        self.files = UploadedFiles()
        self.parts = 0
        self.done = False
        # The part being read:
        self.headers: list[tuple[str, str]] = []
        self.header_name = bytearray()
        self.header_value = bytearray()
        self.name = ""
        self.filename: str | None = None
        self.content_type = ""
        self.charset = "utf-8"
        self.buffer = bytearray()
        self.spool: IO[bytes] | None = None
        self.size = 0
        self.parser = MultipartParser(
            boundary.encode("ascii"),
            {
                "on_part_begin": self._part_begin,
                "on_header_field": self._header_field,
                "on_header_value": self._header_value,
                "on_header_end": self._header_end,
                "on_headers_finished": self._headers_finished,
                "on_part_data": self._part_data,
                "on_part_end": self._part_end,
                "on_end": self._end,
            },
            max_header_count=limits.max_part_headers,
            max_header_size=limits.max_part_header_size,
        )

    def read(self, req: Request) -> tuple[MultiDict, UploadedFiles]:
        try:
            write = self.parser.write
            for piece in req.iter_body():
                write(piece)
            if not self.done or self.parser.state != MultipartState.END:
                raise HTTPError(400, "Truncated multipart body")
        except FormParserError as exc:
            self._discard()
            raise HTTPError(400, f"Malformed multipart body: {exc}") from None
        except BaseException:
            self._discard()
            raise
        return MultiDict(self.fields), self.files

    def _discard(self) -> None:
        if self.spool is not None:
            self.spool.close()
        self.files.close()

    # -- python-multipart callbacks -----------------------------------------------------------

    def _part_begin(self) -> None:
        self.parts += 1
        if self.parts > self.limits.max_parts:
            raise HTTPError(413, "Too many multipart parts")
        self.headers = []
        self.name, self.filename, self.content_type, self.charset = "", None, "", "utf-8"
        self.buffer = bytearray()
        self.spool = None
        self.size = 0

    def _header_field(self, data: bytes, start: int, end: int) -> None:
        self.header_name += data[start:end]

    def _header_value(self, data: bytes, start: int, end: int) -> None:
        self.header_value += data[start:end]

    def _header_end(self) -> None:
        name = self.header_name.decode("latin-1").strip().lower()
        value = _decode_header(bytes(self.header_value)).strip()
        self.headers.append((name, value))
        self.header_name = bytearray()
        self.header_value = bytearray()

    def _headers_finished(self) -> None:
        for name, value in self.headers:
            if name == "content-disposition":
                _, params = parse_header_params(value)
                self.name = params.get("name", "")
                if "filename" in params:
                    self.filename = _clean_filename(params["filename"])
            elif name == "content-type":
                self.content_type = value
                self.charset = parse_header_params(value)[1].get("charset", "utf-8")
        if self.filename is not None or self.content_type:
            self.spool = tempfile.SpooledTemporaryFile(  # noqa: SIM115 - owned by UploadedFile
                max_size=self.limits.spool_size, dir=self.limits.temp_dir
            )

    def _part_data(self, data: bytes, start: int, end: int) -> None:
        self.size += end - start
        spool = self.spool
        if spool is not None:
            limit = self.limits.max_file_size
            if limit is not None and self.size > limit:
                raise HTTPError(413, f"Uploaded file {self.name!r} is too large")
            spool.write(memoryview(data)[start:end])  # no copy of a (maybe huge) piece
        else:
            if self.size > self.limits.max_field_size:
                raise HTTPError(413, f"Form field {self.name!r} is too large")
            self.buffer += memoryview(data)[start:end]

    def _part_end(self) -> None:
        spool = self.spool
        if spool is not None:
            self.spool = None
            spool.seek(0)
            if not self.name:
                spool.close()  # a part without a name is dropped
                return
            self.files.add(
                UploadedFile(
                    self.name,
                    self.filename or "",
                    self.content_type or "application/octet-stream",
                    spool,
                    self.size,
                    self.headers,
                )
            )
        elif self.name:
            try:
                value = self.buffer.decode(self.charset, "replace")
            except LookupError:  # an unknown charset from the client
                value = self.buffer.decode("utf-8", "replace")
            self.fields.append((self.name, value))

    def _end(self) -> None:
        self.done = True


# -- header parameters -------------------------------------------------------------------------


def parse_header_params(value: str) -> tuple[str, dict[str, str]]:
    """Split `type/sub; a=1; b="x;y"` into ("type/sub", {"a": "1", "b": "x;y"}).

    The main value is lower-cased, parameter names too; quoted strings keep `;` and undo `\\`
    escapes; an RFC 5987 `name*=UTF-8''...` parameter wins over the plain one.
    """
    main, _, rest = value.partition(";")
    params: dict[str, str] = {}
    extended: dict[str, str] = {}
    i, n = 0, len(rest)
    while i < n:
        # name
        eq = rest.find("=", i)
        semi = rest.find(";", i)
        if eq == -1 or (semi != -1 and semi < eq):
            i = n if semi == -1 else semi + 1
            continue
        key = rest[i:eq].strip().lower()
        i = eq + 1
        while i < n and rest[i] in " \t":
            i += 1
        if i < n and rest[i] == '"':
            chars: list[str] = []
            i += 1
            while i < n and rest[i] != '"':
                if rest[i] == "\\" and i + 1 < n:
                    i += 1
                chars.append(rest[i])
                i += 1
            text = "".join(chars)
            semi = rest.find(";", i)
            i = n if semi == -1 else semi + 1
        else:
            semi = rest.find(";", i)
            end = n if semi == -1 else semi
            text = rest[i:end].strip()
            i = end + 1
        if key.endswith("*"):
            extended[key[:-1]] = _decode_extended(text)
        elif key:
            params[key] = text
    params.update(extended)
    return main.strip().lower(), params


def _decode_extended(text: str) -> str:
    charset, _, rest = text.partition("'")
    _, _, encoded = rest.partition("'")
    try:
        return unquote(encoded, encoding=charset or "utf-8", errors="replace")
    except LookupError:
        return unquote(encoded, errors="replace")


def _decode_header(raw: bytes) -> str:
    # Browsers send UTF-8 file names raw inside multipart headers; old clients send latin-1.
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError:
        return raw.decode("latin-1")


def _clean_filename(name: str) -> str:
    """The last path component of a client file name, without control characters."""
    name = name.replace("\\", "/").rsplit("/", 1)[-1]
    name = "".join(ch for ch in name if ch.isprintable())
    return "" if name in (".", "..") else name
