"""Moving a Flask app to Socketify one route at a time: the Flask app keeps serving what has
not moved yet, mounted under /legacy; Socketify answers the routes already moved (they win
over the mount) and its middleware wraps both.

    socketify run examples.wsgi_mount:server --bind 127.0.0.1:8080
    curl http://127.0.0.1:8080/legacy/users/7        # Flask
    curl http://127.0.0.1:8080/legacy/users/1        # moved to Socketify
    socketify run examples.wsgi_mount:legacy --bind 127.0.0.1:8081   # the Flask app alone

Guide: docs/guide/wsgi.md.
"""

from flask import Flask, request

from socketify import Server

legacy = Flask(__name__)


@legacy.get("/users/<int:user_id>")
def legacy_user(user_id):
    return {"id": user_id, "served_by": "flask", "mounted_at": request.script_root}


@legacy.post("/echo")
def legacy_echo():
    return {"received": len(request.get_data())}


def powered_by(req, res, next):
    next()
    res.set_header("X-Powered-By", "socketify")  # also on the Flask answers


server = Server()
server.use(powered_by)


@server.get("/legacy/users/1")
def moved_user(req, res):
    res.json({"id": 1, "served_by": "socketify"})


server.mount("/legacy", legacy)


if __name__ == "__main__":
    server.listen(8080, host="127.0.0.1")
    print(f"Serving on http://127.0.0.1:{server.port}")
    server.wait()
