// Guestbook front end: load the entries, sign, and receive new entries live (SSE).
"use strict";

const list = document.getElementById("entries");
const form = document.getElementById("sign");
const nameInput = document.getElementById("name");
const messageInput = document.getElementById("message");
const errorLine = document.getElementById("error");
const statusLine = document.getElementById("status");
const shown = new Set();

function render(entry) {
  if (shown.has(entry.id)) return; // our own entry arrives twice: answer and broadcast
  shown.add(entry.id);
  const item = document.createElement("li");
  item.dataset.id = entry.id;
  const who = document.createElement("span");
  who.className = "who";
  who.textContent = entry.name; // textContent: never HTML from another visitor
  const when = document.createElement("time");
  when.dateTime = entry.created_at;
  when.textContent = new Date(entry.created_at).toLocaleString();
  const text = document.createElement("p");
  text.textContent = entry.message;
  item.append(who, when, text);
  // Newest first; ids grow, so insert before the first older entry.
  const older = [...list.children].find((li) => Number(li.dataset.id) < entry.id);
  list.insertBefore(item, older || null);
}

async function load() {
  const [entries, me] = await Promise.all([
    fetch("/api/entries").then((r) => r.json()),
    fetch("/api/me", { credentials: "same-origin" }).then((r) => r.json()),
  ]);
  entries.forEach(render);
  if (me.name) nameInput.value = me.name;
}

form.addEventListener("submit", async (event) => {
  event.preventDefault();
  errorLine.textContent = "";
  const response = await fetch("/api/entries", {
    method: "POST",
    credentials: "same-origin",
    headers: { "Content-Type": "application/json" },
    body: JSON.stringify({ name: nameInput.value, message: messageInput.value }),
  });
  const body = await response.json();
  if (!response.ok) {
    errorLine.textContent = body.error || `error ${response.status}`;
    return;
  }
  messageInput.value = "";
  render(body);
});

const live = new EventSource("/events");
live.addEventListener("open", () => { statusLine.textContent = "live"; });
live.addEventListener("error", () => { statusLine.textContent = "reconnecting…"; });
live.addEventListener("entry", (event) => render(JSON.parse(event.data)));

load().catch((error) => { errorLine.textContent = String(error); });
