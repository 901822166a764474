"""The smallest Socketify app.

    socketify run examples.hello_world:server --bind 127.0.0.1:8080
    curl http://127.0.0.1:8080/hello/ada

Guide: docs/getting-started.md.
"""

from socketify import Server

server = Server()


@server.get("/")
def index(req, res):
    res.send("Hello, world!\n")


@server.get("/hello/:name")
def hello(req, res):
    res.send(f"Hello, {req.params['name']}!\n")


if __name__ == "__main__":
    # `python examples/hello_world.py` works too: this process becomes the master.
    server.listen(8080, host="127.0.0.1")
    print(f"Serving on http://127.0.0.1:{server.port}")
    server.wait()
