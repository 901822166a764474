// Nexus Board: the session, the history-API router and the live-update stream.
import { api } from "./api.js";
import { mount } from "./dom.js";
import { showLogin } from "./views/login.js";
import { showBoard } from "./views/board.js";
import { showProject } from "./views/project.js";
import { showProfile } from "./views/profile.js";

const view = document.getElementById("view");
const live = document.getElementById("live");

/** What every view shares: the signed-in user and the live-update listeners of the page. */
export const app = {
  user: null,
  page: 0, // counts page changes: a view that finished loading late must not draw over a newer one
  listeners: new Map(), // event name -> handler of the current view
  on(event, handler) {
    this.listeners.set(event, handler);
  },
  go(path) {
    history.pushState(null, "", path);
    route();
  },
  signedIn(user) {
    this.user = user;
    showUser();
    connect();
    this.go(location.pathname === "/login" ? "/" : location.pathname);
  },
  /** Whether the view that started as `page` is still the one shown. */
  current(page) {
    return page === this.page;
  },
  updateUser(user) {
    this.user = { ...this.user, ...user };
    showUser();
  },
};

function showUser() {
  const signedIn = Boolean(app.user);
  document.getElementById("nav").hidden = !signedIn;
  document.getElementById("who").hidden = !signedIn;
  if (!signedIn) return;
  document.getElementById("who-name").textContent = app.user.name;
  const image = document.getElementById("who-avatar");
  image.hidden = !app.user.avatar_url;
  if (app.user.avatar_url) image.src = app.user.avatar_url;
}

const routes = [
  [/^\/projects\/(\d+)$/, (match) => showProject(view, app, Number(match[1]))],
  [/^\/profile$/, () => showProfile(view, app)],
  [/^\/$/, () => showBoard(view, app)],
];

function route() {
  app.page += 1;
  app.listeners.clear();
  if (!app.user) {
    showLogin(view, app);
    return;
  }
  for (const [pattern, show] of routes) {
    const match = location.pathname.match(pattern);
    if (match) {
      show(match).catch((error) => mount(view, errorPage(error)));
      return;
    }
  }
  mount(view, errorPage(new Error("There is no such page.")));
}

function errorPage(error) {
  const page = document.createElement("p");
  page.className = "error";
  page.textContent = error.message;
  return page;
}

// Live updates: one stream per page; the server sends what concerns this user's projects.
let stream = null;
function connect() {
  if (stream) return;
  stream = new EventSource("/api/events");
  stream.addEventListener("open", () => { live.textContent = "live"; live.classList.add("on"); });
  stream.addEventListener("error", () => { live.textContent = "reconnecting…"; live.classList.remove("on"); });
  stream.addEventListener("hello", (message) => {
    document.body.dataset.worker = JSON.parse(message.data).worker;
  });
  for (const event of ["project", "task", "comment", "profile"]) {
    stream.addEventListener(event, (message) => {
      const data = JSON.parse(message.data);
      if (event === "profile" && app.user && data.user.id === app.user.id) app.updateUser(data.user);
      const handler = app.listeners.get(event);
      if (handler) handler(data);
    });
  }
}

function disconnect() {
  if (stream) stream.close();
  stream = null;
  live.textContent = "offline";
  live.classList.remove("on");
}

document.getElementById("logout").addEventListener("click", async () => {
  await api.post("/auth/logout");
  disconnect();
  app.user = null;
  showUser();
  app.go("/login");
});

// Links marked data-link change the page without reloading it.
document.addEventListener("click", (event) => {
  const link = event.target.closest("a[data-link]");
  if (!link || event.ctrlKey || event.metaKey || event.shiftKey) return;
  event.preventDefault();
  app.go(link.getAttribute("href"));
});
window.addEventListener("popstate", route);

async function start() {
  try {
    const { user } = await api.get("/auth/me");
    app.signedIn(user);
  } catch {
    route(); // not signed in: the login form
  }
}

start();
