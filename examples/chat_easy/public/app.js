// The lobby page: JSON events over one WebSocket, pictures and voice as PM frames.
"use strict";

const $ = (id) => document.getElementById(id);
const MAX_PICTURE = 512 * 1024;
let socket = null;
let myName = "";
let pictureSeq = 0;
let retryDelay = 500;
// A picture being received: started by the `picture` event that precedes its first frame,
// shown when its last frame arrives (one frame, or chunks up to an image-end frame).
let incoming = null;
let lastOnlineSeq = 0;
const speakers = new Set();

function line(className, ...parts) {
  const item = document.createElement("li");
  item.className = className;
  for (const [tag, text] of parts) {
    const node = document.createElement(tag);
    node.textContent = text;  // never innerHTML: names and texts come from other people
    item.append(node);
  }
  $("log").append(item);
  item.scrollIntoView({block: "end"});
  return item;
}

function showPicture(who, mime, parts) {
  const item = line("picture", ["b", who]);
  const img = document.createElement("img");
  img.alt = `picture from ${who}`;
  img.src = URL.createObjectURL(new Blob(parts, {type: mime || "application/octet-stream"}));
  item.append(img);
}

const handlers = {
  welcome(data) {
    lastOnlineSeq = 0;  // a restarted server counts from 1 again
    $("gate").hidden = true;
    $("room").hidden = false;
    $("status").textContent = `live as ${data.name}`;
    $("text").focus();
    retryDelay = 500;
  },
  said(data) { line("said", ["b", data.name], ["span", data.text]); },
  joined(data) { line("sys", ["i", `${data.name} joined`]); },
  left(data) { line("sys", ["i", `${data.name} left`]); },
  picture(data) { incoming = {from: data.name, mime: "", parts: []}; },
  talking(data) {
    if (data.on) speakers.add(data.name); else speakers.delete(data.name);
    const names = [...speakers];
    $("talking").textContent = names.length ? `${names.join(", ")} talking` : "";
  },
  online(data) {
    // Counts come from every worker and may arrive out of order: keep the newest only.
    if (data.seq < lastOnlineSeq) return;
    lastOnlineSeq = data.seq;
    $("online").textContent = `(${data.count} online)`;
  },
  error(data) { $("error").textContent = data.message || data.error; },
};

function receivePicture(frame) {
  if (!incoming) incoming = {from: "someone", mime: "", parts: []};
  if (frame.mime) incoming.mime = frame.mime;
  incoming.parts.push(frame.payload.slice());
  if (frame.flags & PM.LAST) {
    showPicture(incoming.from, incoming.mime, incoming.parts);
    incoming = null;
  }
}

function connect() {
  const scheme = location.protocol === "https:" ? "wss" : "ws";
  socket = new WebSocket(`${scheme}://${location.host}/chat`);
  socket.binaryType = "arraybuffer";
  socket.onopen = () => send("hello", {name: myName});
  socket.onmessage = (message) => {
    if (typeof message.data !== "string") {
      const frame = PM.unpack(message.data);
      if (frame && (frame.kind === PM.IMAGE || frame.kind === PM.IMAGE_END)) receivePicture(frame);
      if (frame && frame.kind === PM.VOICE) {
        Voice.play(frame.payload);
        $("heard").textContent = `${Voice.heard} voice frames heard`;
      }
      return;
    }
    const event = JSON.parse(message.data);
    const handler = handlers[event.type];
    if (handler) handler(event.data);
  };
  socket.onclose = () => {
    stopTalking();
    speakers.clear();
    $("talking").textContent = "";
    $("status").textContent = "disconnected, retrying…";
    setTimeout(connect, retryDelay);
    retryDelay = Math.min(retryDelay * 2, 10000);
  };
}

function send(type, data) {
  if (socket && socket.readyState === WebSocket.OPEN) socket.send(JSON.stringify({type, data}));
}

$("gate").addEventListener("submit", (event) => {
  event.preventDefault();
  myName = $("name").value.trim();
  if (myName) {
    Voice.audio();  // inside the click, so that voice from the others may play
    connect();
  }
});

$("talk").addEventListener("submit", (event) => {
  event.preventDefault();
  const text = $("text").value.trim();
  if (text) send("say", {text});
  $("text").value = "";
});

$("picture").addEventListener("change", async () => {
  const file = $("picture").files[0];
  $("picture").value = "";
  if (!file) return;
  if (file.size > MAX_PICTURE) {
    $("error").textContent = `pictures up to ${MAX_PICTURE / 1024} KiB`;
    return;
  }
  const bytes = new Uint8Array(await file.arrayBuffer());
  pictureSeq += 1;
  socket.send(PM.pack(PM.IMAGE, 0, pictureSeq, PM.LAST, bytes, file.type));
  showPicture(myName, file.type, [bytes]);  // the server relays to everyone else
});

function sendFrame(frame) {
  if (socket && socket.readyState === WebSocket.OPEN) socket.send(frame);
}

function stopTalking() {
  if (!Voice.talking) return;
  Voice.stop();
  send("talk", {on: false});
  $("talk-button").textContent = "Talk";
  $("talk-button").setAttribute("aria-pressed", "false");
}

$("talk-button").addEventListener("click", async () => {
  if (Voice.talking) {
    stopTalking();
    return;
  }
  try {
    await Voice.start(sendFrame);
  } catch (error) {
    $("error").textContent = `no microphone: ${error.message}`;
    return;
  }
  send("talk", {on: true});
  $("talk-button").textContent = "Stop talking";
  $("talk-button").setAttribute("aria-pressed", "true");
});
