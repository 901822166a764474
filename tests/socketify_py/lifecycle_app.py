"""A socketify.py app that ends itself, on a TCP port, a Unix socket, or HTTPS with an
encrypted key, as socketify.py's graceful_shutdown, hello_world_unix_domain and https
examples do.

`python tests/socketify_py/lifecycle_app.py` listens on PORT, or on the Unix socket SOCKET;
with CERT, KEY and PASSPHRASE set it serves HTTPS. `socketify run` serves it too. GET
/shutdown answers and then stops the whole server (`app.close()`); the script prints
"starting" before it serves (`on_start`), "stopped" after (`on_shutdown`) and "closed" once
`app.run()` returns.
"""

import asyncio
import os

from socketify import App, AppListenOptions, AppOptions

tls = None
if os.environ.get("CERT"):
    tls = AppOptions(
        key_file_name=os.environ["KEY"],
        cert_file_name=os.environ["CERT"],
        passphrase=os.environ.get("PASSPHRASE"),
    )
app = App(tls, workers=2)


@app.on_start
async def starting():
    await asyncio.sleep(0)
    print("starting", flush=True)


@app.on_shutdown
def stopped():
    print("stopped", flush=True)


def shutdown(res, req):
    res.end("bye")
    app.close()


app.get("/", lambda res, req: res.end("up"))
app.get("/shutdown", shutdown)
if os.environ.get("SOCKET"):
    where = AppListenOptions(domain=os.environ["SOCKET"])
    app.listen(where, lambda config: print(f"Listening on {config.domain}", flush=True))
else:
    port = int(os.environ.get("PORT", "3000"))
    app.listen(port, lambda config: print(f"Listening on port {config.port}", flush=True))
app.run()
print("closed", flush=True)
