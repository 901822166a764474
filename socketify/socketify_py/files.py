"""socketify.py's `await sendfile(res, req, filename)`: one file, with 304 and byte ranges.

socketify.py reads the file in Python and writes it piece by piece; here the answer is a
Socketify file answer, sent by the connection with `sendfile(2)`, and the validators and the
range come from Socketify's own conditional-request rules (`socketify.middleware.conditional`),
the ones `app.static` follows: Last-Modified and If-Modified-Since, one byte range (206), 416
for a range past the end, 404 for a file that is not there.
"""

from __future__ import annotations

import os
import stat
from typing import TYPE_CHECKING

from socketify.core.mime import guess_type
from socketify.middleware.conditional import (
    UNSATISFIABLE,
    last_modified_text,
    parse_range,
    preconditions,
)

if TYPE_CHECKING:
    from socketify.socketify_py.request import AppRequest
    from socketify.socketify_py.response import AppResponse

__all__ = ["sendfile"]


async def sendfile(res: AppResponse, req: AppRequest, filename: str | os.PathLike[str]) -> None:
    """Answer with the file `filename` (relative to the working directory, as given)."""
    send_file(res, req, os.fspath(filename))


def send_file(res: AppResponse, req: AppRequest, path: str) -> None:
    """`sendfile` for plain handlers: the same answer, decided at once."""
    response = res.response
    try:
        info = os.stat(path)
    except (OSError, ValueError):
        info = None
    if info is None or not stat.S_ISREG(info.st_mode):
        response.status(404).send(b"Not Found")
        return
    size = info.st_size
    mtime = int(info.st_mtime)
    request = req.request
    response.set_header("Last-Modified", last_modified_text(mtime))
    decided = preconditions(request.method, request.headers, None, mtime)
    if decided is not None:
        response.status(decided).send(b"")
        return
    response.set_header("Content-Type", guess_type(path))
    response.set_header("Accept-Ranges", "bytes")
    wanted = parse_range(request.headers.get("range") or "", size)
    if wanted is UNSATISFIABLE:
        response.set_header("Content-Range", f"bytes */{size}")
        response.status(416).send(b"")
        return
    if isinstance(wanted, tuple):
        first, last = wanted
        response.status(206).set_header("Content-Range", f"bytes {first}-{last}/{size}")
        if not response.send_file(path, offset=first, length=last - first + 1):
            response.status(404).send(b"Not Found")
        return
    if not response.send_file(path, length=size):
        response.status(404).send(b"Not Found")
