"""The Flask app of the WSGI benchmark: /ping (JSON through Flask) and /page (a Jinja page).

The same module is served by every contender (ours with `socketify run`, Granian's WSGI
interface, gunicorn -k gevent), so the app's own cost is the same everywhere.
"""

from __future__ import annotations

from flask import Flask, render_template
from jinja2 import DictLoader

PAGE = """<!doctype html>
<html><head><title>{{ title }}</title></head>
<body><h1>{{ title }}</h1>
<ul>{% for item in items %}
<li class="{{ loop.cycle('odd', 'even') }}">{{ item.name }}: {{ item.price }}</li>
{% endfor %}</ul>
</body></html>
"""
ITEMS = [{"name": f"item {n}", "price": f"{n * 1.25:.2f}"} for n in range(20)]

app = Flask(__name__)
app.jinja_loader = DictLoader({"page.html": PAGE})


@app.get("/ping")
def ping() -> dict[str, bool]:
    """{"ok": true}, serialized by Flask's JSON provider."""
    return {"ok": True}


@app.get("/page")
def page() -> str:
    """A small Jinja page: a title and a 20-item list."""
    return render_template("page.html", title="Catalogue", items=ITEMS)
