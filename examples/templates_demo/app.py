"""Server-rendered pages with Jinja2 templates (`pip install 'socketify-gevent[templates]'`).

    socketify run examples.templates_demo.app:server --bind 127.0.0.1:8080 --reload
    open http://127.0.0.1:8080/                          # the page, from templates/index.html
    curl 'localhost:8080/hello?name=<b>Ada</b>'         # the name arrives escaped: &lt;b&gt;
    curl localhost:8080/sitemap.xml                      # an XML template: application/xml

`Server(templates=FOLDER)` names the template folder; `res.render(name, **context)` renders
one and sends it, with the Content-Type of its extension. HTML and XML templates are
autoescaped. Each worker makes its own Jinja2 environment on its first render and keeps the
compiled templates; under `--reload` an edited template shows on the next request.
Guide: docs/guide/templates.md.
"""

from __future__ import annotations

from pathlib import Path

from socketify import Request, Response, Server

HERE = Path(__file__).resolve().parent

server = Server(templates=HERE / "templates")

# The pages of the site: (path, title), for the menu and the sitemap.
PAGES = (("/", "Home"), ("/hello", "Hello"))


@server.get("/")
def index(req: Request, res: Response) -> None:
    res.render("index.html", title="Home", pages=PAGES)


@server.get("/hello")
def hello(req: Request, res: Response) -> None:
    name = req.query.get("name") or "stranger"
    res.render("hello.html", title="Hello", pages=PAGES, name=name)


@server.get("/sitemap.xml")
def sitemap(req: Request, res: Response) -> None:
    res.render("sitemap.xml", base=f"{req.scheme}://{req.host}", pages=PAGES)
