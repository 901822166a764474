// Node's `ws` echo server for load_tests/bench_websocket_echo.py (its Node peer):
// `node load_tests/apps/ws_echo_node.js PORT`, with `ws` from load_tests/.peers/node.
// GET /ping answers 200 so the harness can tell when it is up; /pong echoes every message
// with its type; compression off, like the other contenders.
"use strict";
const http = require("http");
const { WebSocketServer } = require("ws");

const port = Number(process.argv[2]);
const server = http.createServer((req, res) => {
  if (req.url === "/ping") {
    res.writeHead(200, { "Content-Type": "application/json" });
    res.end('{"ok":true}');
  } else {
    res.writeHead(404);
    res.end();
  }
});
const wss = new WebSocketServer({ server, path: "/pong", perMessageDeflate: false });
wss.on("connection", (ws) => {
  ws.on("message", (data, isBinary) => ws.send(data, { binary: isBinary }));
});
server.listen(port, "127.0.0.1");
