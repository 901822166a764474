// The two ways this page talks to the server: JSON over fetch, and the live WebSocket.

export class ApiError extends Error {
  constructor(status, message) {
    super(message);
    this.status = status;
  }
}

// `api("POST", "/api/login", {name, password})`: the parsed answer, or an ApiError.
export async function api(method, path, body, headers = {}) {
  const init = {method, headers: {...headers}, credentials: "same-origin"};
  if (body instanceof Blob) {
    init.body = body;
  } else if (body !== undefined) {
    init.body = JSON.stringify(body);
    init.headers["Content-Type"] = "application/json";
  }
  const answer = await fetch(path, init);
  if (answer.status === 204) return null;
  const data = await answer.json().catch(() => null);
  if (!answer.ok) {
    const fields = data?.errors ? Object.entries(data.errors).map(([k, v]) => `${k} ${v[0]}`) : [];
    throw new ApiError(answer.status, fields.join(", ") || data?.error || answer.statusText);
  }
  return data;
}

// One WebSocket that comes back by itself: after a drop it waits 0.5 s, then twice as long
// each time up to 15 s (with some jitter, so a restarted server is not hit by every page at
// once), and starts over from 0.5 s once a connection has held.
export class Live {
  constructor(path, {onEvent, onBinary, onState}) {
    this.path = path;
    this.onEvent = onEvent;
    this.onBinary = onBinary;
    this.onState = onState;
    this.delay = 500;
    this.socket = null;
    this.stopped = false;
    this.timer = null;
  }

  start() {
    this.stopped = false;
    this.open();
  }

  stop() {
    this.stopped = true;
    clearTimeout(this.timer);
    if (this.socket) this.socket.close(1000, "signed out");
  }

  open() {
    const socket = new WebSocket(`wss://${location.host}${this.path}`);
    socket.binaryType = "arraybuffer";
    this.socket = socket;
    this.onState("connecting");
    socket.onopen = () => {
      this.delay = 500;
      this.onState("live");
    };
    socket.onmessage = (message) => {
      if (typeof message.data !== "string") {
        this.onBinary(message.data);
        return;
      }
      const event = JSON.parse(message.data);
      this.onEvent(event.type, event.data);
    };
    socket.onclose = () => {
      if (this.socket !== socket || this.stopped) return;
      this.onState("offline");
      const wait = this.delay * (0.8 + Math.random() * 0.4);
      this.delay = Math.min(this.delay * 2, 15000);
      this.timer = setTimeout(() => this.open(), wait);
    };
  }

  get connected() {
    return this.socket !== null && this.socket.readyState === WebSocket.OPEN;
  }

  send(type, data) {
    if (!this.connected) return false;
    this.socket.send(JSON.stringify({type, data}));
    return true;
  }

  sendBinary(bytes) {
    if (!this.connected) return false;
    // A voice frame that would wait behind a congested link is stale by the time it leaves.
    if (this.socket.bufferedAmount > 64 * 1024) return false;
    this.socket.send(bytes);
    return true;
  }
}
