"""Python `websockets` echo server (the echo benchmark's Python peer), run from load_tests/.venv:
`python -m load_tests.apps.ws_echo_websockets PORT`. Plain asyncio, no keepalive pings, no
compression; GET /ping answers 200 for the harness, /pong (any path) echoes each message.
"""

import asyncio
import sys
from http import HTTPStatus

from websockets.asyncio.server import serve


async def echo(ws):
    async for message in ws:
        await ws.send(message)


def answer_ping(connection, request):
    if request.path == "/ping":
        return connection.respond(HTTPStatus.OK, '{"ok":true}')
    return None


async def main(port):
    async with serve(
        echo,
        "127.0.0.1",
        port,
        ping_interval=None,
        compression=None,
        max_size=1 << 20,
        process_request=answer_ping,
    ):
        await asyncio.Future()


if __name__ == "__main__":
    asyncio.run(main(int(sys.argv[1])))
