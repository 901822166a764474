// Ripple's page: sign in, chats on the left, the open chat on the right, calls on top.
// Everything that comes from other people goes into the page as text, never as HTML.
import {api, ApiError, Live} from "./net.js";
import * as PM from "./pm.js";
import {Player, startCapture} from "./voice.js";

const $ = (id) => document.getElementById(id);
const TYPING_SHOWN_MS = 3000;
const TYPING_SENT_EVERY_MS = 2000;

const state = {
  me: null,
  chats: new Map(),        // id -> chat as /api/chats gives it, kept up to date by events
  open: null,              // id of the chat on screen
  messages: [],            // the open chat's loaded messages, oldest first
  hasMore: false,
  loadingOlder: false,
  typing: new Map(),       // chat id -> {name, until}
  lastTypingSent: 0,
  call: null,              // {chatId, phase: "calling" | "ringing" | "live", peer, stop, player}
  live: null,
};
window.ripple = state;     // for the curious, in the console

function el(tag, className, text) {
  const node = document.createElement(tag);
  if (className) node.className = className;
  if (text !== undefined) node.textContent = text;
  return node;
}

// -- signing in ---------------------------------------------------------------------------

async function boot() {
  try {
    state.me = await api("GET", "/api/me");
  } catch (error) {
    if (!(error instanceof ApiError) || error.status !== 401) throw error;
    showAuth();
    return;
  }
  await enter();
}

function showAuth() {
  $("app").hidden = true;
  $("auth").hidden = false;
  $("auth-name").focus();
}

async function authenticate(path) {
  $("auth-error").textContent = "";
  const name = $("auth-name").value.trim();
  const password = $("auth-password").value;
  try {
    state.me = await api("POST", path, {name, password});
  } catch (error) {
    $("auth-error").textContent = error.message;
    return;
  }
  $("auth-password").value = "";
  await enter();
}

async function enter() {
  $("auth").hidden = true;
  $("app").hidden = false;
  $("me-name").textContent = state.me.name;
  state.live = new Live("/pulse", {onEvent, onBinary, onState});
  state.live.start();
  await loadChats();
}

// -- the chat list ------------------------------------------------------------------------

let chatsAsked = 0;

async function loadChats() {
  // Answers may come back out of order: only the one to the latest question counts.
  const asked = ++chatsAsked;
  const chats = await api("GET", "/api/chats");
  if (asked !== chatsAsked) return;
  state.chats = new Map(chats.map((chat) => [chat.id, chat]));
  renderChats();
  renderHead();
}

function others(chat) {
  return chat.members.filter((m) => m.id !== state.me.id);
}

function renderChats() {
  const list = $("chats");
  list.replaceChildren();
  const sorted = [...state.chats.values()].sort(
    (a, b) => (b.last_message?.id ?? 0) - (a.last_message?.id ?? 0) || b.id - a.id);
  for (const chat of sorted) {
    const item = el("li", "chat" + (chat.id === state.open ? " active" : ""));
    item.dataset.id = chat.id;
    const online = others(chat).some((m) => m.online);
    item.append(el("span", "dot" + (online ? " on" : "")));
    const body = el("div", "chat-body");
    body.append(el("b", "chat-name", chat.title));
    const typing = state.typing.get(chat.id);
    const preview = typing && typing.until > Date.now()
      ? `${typing.name} is typing…`
      : chat.last_message ? previewOf(chat.last_message) : "no messages yet";
    body.append(el("span", "preview", preview));
    item.append(body);
    if (chat.unread > 0) item.append(el("span", "unread", String(chat.unread)));
    item.addEventListener("click", () => openChat(chat.id));
    list.append(item);
  }
}

function previewOf(message) {
  const who = message.sender.id === state.me.id ? "You: " : "";
  return who + (message.text || (message.file ? `File: ${message.file.name}` : ""));
}

// -- the open chat ------------------------------------------------------------------------

async function openChat(chatId) {
  state.open = chatId;
  state.messages = [];
  $("messages").replaceChildren();
  $("composer").hidden = false;
  renderHead();
  renderChats();
  const page = await api("GET", `/api/chats/${chatId}/messages`);
  if (state.open !== chatId) return;
  // Messages that arrived live while the page was on its way are newer than all of it.
  const newest = page.messages.at(-1)?.id ?? 0;
  state.messages = [...page.messages, ...state.messages.filter((m) => m.id > newest)];
  state.hasMore = page.has_more;
  renderMessages(true);
  markRead();
  $("text").focus();
}

async function loadOlder() {
  if (!state.open || !state.hasMore || state.messages.length === 0 || state.loadingOlder) return;
  const chatId = state.open;
  const scroller = $("scroller");
  const fromBottom = scroller.scrollHeight - scroller.scrollTop;
  state.loadingOlder = true;
  let page;
  try {
    page = await api("GET", `/api/chats/${chatId}/messages?before=${state.messages[0].id}`);
  } finally {
    state.loadingOlder = false;
  }
  if (state.open !== chatId) return;
  state.messages = [...page.messages, ...state.messages];
  state.hasMore = page.has_more;
  renderMessages(false);
  scroller.scrollTop = scroller.scrollHeight - fromBottom;  // stay where the reader was
}

function renderHead() {
  const chat = state.chats.get(state.open);
  $("call").disabled = !chat || state.call !== null;
  if (!chat) return;
  $("chat-title").textContent = chat.title;
  const typing = state.typing.get(chat.id);
  let sub;
  if (typing && typing.until > Date.now()) {
    sub = `${typing.name} is typing…`;
  } else if (chat.kind === "direct") {
    sub = others(chat).some((m) => m.online) ? "online" : "offline";
  } else {
    const online = chat.members.filter((m) => m.online).length;
    sub = `${chat.members.length} members, ${online} online`;
  }
  $("chat-sub").textContent = sub;
  $("chat-sub").classList.toggle("typing", Boolean(typing && typing.until > Date.now()));
}

function receiptOf(chat, message) {
  const readers = others(chat).filter((m) => m.last_read >= message.id);
  if (readers.length === 0) return ["sent", "✓ sent"];
  if (chat.kind === "direct") return ["read", "✓✓ read"];
  return ["read", `✓✓ read by ${readers.length}`];
}

function messageItem(chat, message) {
  const mine = message.sender.id === state.me.id;
  const item = el("li", mine ? "msg mine" : "msg theirs");
  item.dataset.id = message.id;
  if (!mine && chat.kind === "group") item.append(el("b", "sender", message.sender.name));
  if (message.file) {
    if (message.file.mime.startsWith("image/")) {
      const img = el("img", "picture");
      img.src = message.file.url;
      img.alt = message.file.name;
      item.append(img);
    } else {
      const link = el("a", "file", `File: ${message.file.name}`);
      link.href = message.file.url;
      item.append(link);
    }
  }
  if (message.text) item.append(el("span", "text", message.text));
  const meta = el("span", "meta", new Date(message.created_at).toLocaleTimeString([], {
    hour: "2-digit", minute: "2-digit"}));
  if (mine) {
    const [kind, label] = receiptOf(chat, message);
    const receipt = el("span", "receipt", label);
    receipt.dataset.state = kind;
    meta.append(" ", receipt);
  }
  item.append(meta);
  return item;
}

function renderMessages(toBottom) {
  const chat = state.chats.get(state.open);
  if (!chat) return;
  const scroller = $("scroller");
  const nearBottom = scroller.scrollHeight - scroller.scrollTop - scroller.clientHeight < 80;
  $("messages").replaceChildren(...state.messages.map((m) => messageItem(chat, m)));
  $("older").hidden = !state.hasMore;
  if (toBottom || nearBottom) scroller.scrollTop = scroller.scrollHeight;
}

function markRead() {
  const chat = state.chats.get(state.open);
  const newest = state.messages.at(-1);
  if (!chat || !newest || document.visibilityState !== "visible") return;
  const mine = chat.members.find((m) => m.id === state.me.id);
  if (mine && mine.last_read >= newest.id && chat.unread === 0) return;
  chat.unread = 0;
  renderChats();
  state.live.send("read", {chat_id: chat.id, message_id: newest.id});
}

// -- live events --------------------------------------------------------------------------

const handlers = {
  hello() {
    // Back after a drop: whatever happened meanwhile is in the database.
    loadChats().then(() => { if (state.open) openChat(state.open); });
  },
  message(message) {
    let chat = state.chats.get(message.chat_id);
    if (!chat) {
      loadChats();
      return;
    }
    chat.last_message = message;
    const mine = message.sender.id === state.me.id;
    if (mine) chat.members.find((m) => m.id === state.me.id).last_read = message.id;
    state.typing.delete(message.chat_id);
    if (message.chat_id === state.open) {
      if (!state.messages.some((m) => m.id === message.id)) state.messages.push(message);
      renderMessages(mine);
      if (!mine) markRead();
    } else if (!mine) {
      chat.unread += 1;
    }
    renderChats();
    renderHead();
  },
  typing({chat_id, name}) {
    state.typing.set(chat_id, {name, until: Date.now() + TYPING_SHOWN_MS});
    renderChats();
    renderHead();
    setTimeout(() => { renderChats(); renderHead(); }, TYPING_SHOWN_MS + 50);
  },
  read({chat_id, user_id, message_id}) {
    const chat = state.chats.get(chat_id);
    const member = chat?.members.find((m) => m.id === user_id);
    if (!member) return;
    member.last_read = Math.max(member.last_read, message_id);
    if (user_id === state.me.id) chat.unread = 0;  // read in another tab
    if (chat_id === state.open) renderMessages(false);
    renderChats();
  },
  presence({user_id, online}) {
    for (const chat of state.chats.values()) {
      for (const member of chat.members) if (member.id === user_id) member.online = online;
    }
    renderChats();
    renderHead();
  },
  chat() { loadChats(); },
  error(data) { console.warn("ripple:", data.message || data.error); },
  call_invite({chat_id, from}) {
    if (state.call) {  // busy: one call at a time
      state.live.send("call_reject", {chat_id});
      return;
    }
    state.call = {chatId: chat_id, phase: "ringing", peer: from.name, stop: null, player: null};
    renderCall(`${from.name} is calling…`);
  },
  call_accept({chat_id, from}) {
    if (state.call?.chatId !== chat_id) return;
    state.call.phase = "live";
    state.call.peer = from.name;
    renderCall(`In a call with ${from.name}`);
  },
  call_taken({chat_id}) {
    if (state.call?.chatId === chat_id && state.call.phase === "ringing") hangUp(false, "");
  },
  call_reject({chat_id, from}) {
    if (state.call?.chatId === chat_id && state.call.phase === "calling") {
      hangUp(false, `${from.name} declined`);
    }
  },
  call_end({chat_id, from}) {
    if (state.call?.chatId === chat_id) hangUp(false, `${from.name} hung up`);
  },
};

function onEvent(type, data) {
  const handler = handlers[type];
  if (handler) handler(data);
}

function onBinary(buffer) {
  const frame = PM.unpack(buffer);
  if (!frame || frame.kind !== PM.VOICE || !state.call?.player) return;
  state.call.player.play(frame.payload);
  const {frames, peak} = state.call.player;
  $("call-frames").dataset.frames = frames;
  $("call-frames").dataset.peak = peak.toFixed(3);
  $("call-frames").textContent = `${frames} voice frames received`;
}

function onState(connection) {
  $("conn").className = `dot ${connection === "live" ? "on" : connection}`;
  $("conn").title = connection;
  if (connection === "offline") {
    // Signed out meanwhile (elsewhere, or the session expired): retrying cannot help.
    api("GET", "/api/me").catch((error) => {
      if (error instanceof ApiError && error.status === 401) {
        state.live.stop();
        showAuth();
      }
    });
  }
}

// -- calls --------------------------------------------------------------------------------

function renderCall(status) {
  const call = state.call;
  $("call-bar").hidden = !call && !status;
  $("call-status").textContent = status;
  $("call-accept").hidden = call?.phase !== "ringing";
  $("call-reject").hidden = call?.phase !== "ringing";
  $("call-end").hidden = !call || call.phase === "ringing";
  if (!call) $("call-frames").textContent = "";
  renderHead();
}

async function beginCapture(call) {
  call.player = new Player();
  try {
    call.stop = await startCapture((frame) => state.live.sendBinary(frame));
  } catch (error) {
    renderCall(`no microphone: ${error.message}`);
  }
}

async function placeCall() {
  const chat = state.chats.get(state.open);
  if (!chat || state.call) return;
  state.call = {chatId: chat.id, phase: "calling", peer: chat.title, stop: null, player: null};
  $("call-frames").dataset.frames = 0;
  renderCall(`Calling ${chat.title}…`);
  state.live.send("call_invite", {chat_id: chat.id});
  await beginCapture(state.call);
}

async function acceptCall() {
  const call = state.call;
  if (!call || call.phase !== "ringing") return;
  call.phase = "live";
  $("call-frames").dataset.frames = 0;
  renderCall(`In a call with ${call.peer}`);
  state.live.send("call_accept", {chat_id: call.chatId});
  await beginCapture(call);
}

function hangUp(tell, status) {
  const call = state.call;
  if (!call) return;
  if (tell) state.live.send(call.phase === "ringing" ? "call_reject" : "call_end", {chat_id: call.chatId});
  if (call.stop) call.stop();
  if (call.player) call.player.close();
  state.call = null;
  renderCall(status);
  if (status) setTimeout(() => { if (!state.call) renderCall(""); }, 4000);
}

// -- sending ------------------------------------------------------------------------------

async function sendMessage(event) {
  event.preventDefault();
  const text = $("text").value.trim();
  if (!text || !state.open) return;
  $("text").value = "";
  if (!state.live.send("send", {chat_id: state.open, text})) {
    // Not connected: the REST route stores it all the same.
    await api("POST", `/api/chats/${state.open}/messages`, {text});
  }
}

async function sendFile() {
  const file = $("file").files[0];
  $("file").value = "";
  if (!file || !state.open) return;
  try {
    const upload = await api("POST", "/api/upload", file, {
      "Content-Type": file.type || "application/octet-stream",
      "X-File-Name": encodeURIComponent(file.name),
    });
    await api("POST", `/api/chats/${state.open}/messages`, {text: "", file: upload});
  } catch (error) {
    $("chat-sub").textContent = `upload failed: ${error.message}`;
  }
}

function typed() {
  if (!state.open || Date.now() - state.lastTypingSent < TYPING_SENT_EVERY_MS) return;
  state.lastTypingSent = Date.now();
  state.live.send("typing", {chat_id: state.open});
}

// -- people and groups --------------------------------------------------------------------

async function search() {
  const query = $("search").value.trim();
  const list = $("people");
  if (!query) {
    list.replaceChildren();
    return;
  }
  const people = await api("GET", `/api/users?q=${encodeURIComponent(query)}`);
  list.replaceChildren(...people.map((person) => {
    const item = el("li", "person");
    item.append(el("span", "dot" + (person.online ? " on" : "")), el("span", "", person.name));
    item.addEventListener("click", async () => {
      const chat = await api("POST", "/api/chats/dm", {user_id: person.id});
      $("search").value = "";
      list.replaceChildren();
      state.chats.set(chat.id, chat);
      await openChat(chat.id);
    });
    return item;
  }));
}

async function newGroup() {
  const people = await api("GET", "/api/users?q=");
  $("group-people").replaceChildren(...people.map((person) => {
    const item = el("li");
    const label = el("label");
    const box = el("input");
    box.type = "checkbox";
    box.value = person.id;
    label.append(box, ` ${person.name}`);
    item.append(label);
    return item;
  }));
  $("group-title").value = "";
  $("group-dialog").showModal();
}

async function createGroup() {
  const ids = [...$("group-people").querySelectorAll("input:checked")].map((b) => Number(b.value));
  const chat = await api("POST", "/api/chats/group", {title: $("group-title").value.trim(), member_ids: ids});
  state.chats.set(chat.id, chat);
  await openChat(chat.id);
}

// -- wiring -------------------------------------------------------------------------------

$("auth-form").addEventListener("submit", (event) => {
  event.preventDefault();
  authenticate("/api/login");
});
$("register").addEventListener("click", () => {
  if ($("auth-form").reportValidity()) authenticate("/api/register");
});
$("logout").addEventListener("click", async () => {
  hangUp(true, "");
  state.live.stop();
  await api("POST", "/api/logout");
  location.reload();
});
$("composer").addEventListener("submit", sendMessage);
$("text").addEventListener("input", typed);
$("file").addEventListener("change", sendFile);
$("older").addEventListener("click", loadOlder);
$("scroller").addEventListener("scroll", () => { if ($("scroller").scrollTop < 40) loadOlder(); });
$("search").addEventListener("input", search);
$("new-group").addEventListener("click", newGroup);
$("group-dialog").addEventListener("close", () => {
  if ($("group-dialog").returnValue === "create" && $("group-title").value.trim()) createGroup();
});
$("call").addEventListener("click", placeCall);
$("call-accept").addEventListener("click", acceptCall);
$("call-reject").addEventListener("click", () => hangUp(true, ""));
$("call-end").addEventListener("click", () => hangUp(true, "call ended"));
document.addEventListener("visibilitychange", markRead);

boot();
