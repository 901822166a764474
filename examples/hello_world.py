"""The smallest Socketify app.

    socketify run examples.hello_world:server --bind 127.0.0.1:8080
    python -m examples.hello_world                # the same, on $PORT (default 8080)
    curl http://127.0.0.1:8080/hello/ada          # Hello, ada!
    curl http://127.0.0.1:8080/json               # {"framework":"socketify","message":"hello"}

Guide: docs/getting-started.md.
"""

import os

from socketify import Server

server = Server()


@server.get("/")
def index(req, res):
    res.send("Hello, world!\n")


@server.get("/hello/:name")
def hello(req, res):
    res.send(f"Hello, {req.params['name']}!\n")


@server.get("/json")
def json_hello(req, res):
    res.json({"framework": "socketify", "message": "hello"})


if __name__ == "__main__":
    # Run as a script, this process becomes the master.
    server.listen(int(os.environ.get("PORT", "8080")), host="127.0.0.1")
    print(f"Serving on http://127.0.0.1:{server.port}")
    server.wait()
