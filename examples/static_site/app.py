"""A static site with a single-page-app fallback, next to a small JSON API.

    socketify run examples.static_site.app:server --bind 127.0.0.1:8080 --workers 2
    open http://127.0.0.1:8080/docs/getting-started     # a deep link: index.html, app.js runs
    curl localhost:8080/docs/getting-started            # the same page (curl accepts */*)
    curl -i localhost:8080/api/nothing                  # 404: /api is left to the API
    curl -i localhost:8080/app.css                      # Cache-Control: public, max-age=3600
    curl -i localhost:8080/app.css -H 'If-None-Match: "<the ETag>"'   # 304
    curl -i localhost:8080/logo.png                     # 404 Not Found (a file, not a page)
    curl -i -X POST localhost:8080/anything             # 404, not 405
    curl localhost:8080/api/health                      # {"ok":true}

`static_files.spa()` is `static_files.serve()` (here with `cache_max_age=3600`: an hour for
the assets) plus one rule: a page navigation (GET or HEAD accepting HTML, whether as
text/html, `*/*` or no Accept at all; last path segment without an extension; not under
`/api`) that nothing else answered gets `public/index.html`, marked
`Cache-Control: no-cache` so a new deploy is seen at once. Routes always win over the
fallback, and other methods pass through to them: a POST to `/api/...` reaches its route and
a POST to an unknown path is a 404, not a 405: the fallback is no catch-all route that would
match every path for GET only. Files are served as they are: gzip or brotli only from
precompressed `name.gz`/`name.br` siblings.

Nothing is shared between workers here: every worker reads the same files.

Guide: docs/guide/static-files.md.
"""

from __future__ import annotations

from pathlib import Path

from socketify import Request, Response, Server, static_files

PUBLIC = Path(__file__).resolve().parent / "public"

server = Server()
server.use(static_files.spa(PUBLIC, index="index.html", exclude=["/api"], cache_max_age=3600))


@server.get("/api/health")
def health(req: Request, res: Response) -> None:
    res.json({"ok": True})
