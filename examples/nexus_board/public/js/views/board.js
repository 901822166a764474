// The board: the user's projects as cards with their task counts, and a form for a new one.
import { api } from "../api.js";
import { avatar, h, mount, onSubmit } from "../dom.js";

const STATUS_NAMES = { todo: "To do", doing: "Doing", done: "Done" };

function projectCard(project) {
  const counts = Object.entries(project.counts || {}).map(([status, n]) =>
    h("span", { class: `count ${status}` }, `${STATUS_NAMES[status]} ${n}`));
  return h("li", { class: "project-card", dataset: { id: project.id } },
    h("a", { href: `/projects/${project.id}`, "data-link": true }, project.name),
    h("p", { class: "muted" }, project.description || "No description"),
    h("div", { class: "counts" }, counts),
    h("div", { class: "members" }, project.members.map((member) => avatar(member))));
}

export async function showBoard(view, app) {
  const page = app.page;
  const [projects, stats] = await Promise.all([api.get("/projects"), api.get("/stats")]);
  if (!app.current(page)) return;
  const list = h("ul", { id: "projects", class: "project-grid" }, projects.map(projectCard));
  const errorLine = h("p", { class: "error", role: "alert" });
  const form = h("form", { id: "new-project", class: "inline" },
    h("input", { id: "project-name", name: "name", placeholder: "New project name", required: true, maxlength: "80" }),
    h("input", { id: "project-description", name: "description", placeholder: "Description (optional)", maxlength: "500" }),
    h("button", { type: "submit" }, "Create project"), errorLine);
  onSubmit(form, errorLine, async (data) => {
    const project = await api.post("/projects", { name: data.get("name"), description: data.get("description") });
    form.reset();
    app.go(`/projects/${project.id}`);
  });
  const summary = h("p", { id: "stats", class: "muted" },
    `${stats.projects} projects · ${stats.tasks} tasks (${stats.by_status.todo} to do, ` +
    `${stats.by_status.doing} doing, ${stats.by_status.done} done) · ${stats.comments} comments by you`);
  const empty = h("p", { class: "muted" }, "No projects yet: create the first one.");
  mount(view, h("h1", {}, "Your projects"), summary, form, projects.length ? list : empty);
  // Another member's change: redraw from the server's view of it.
  const refresh = () => { if (app.current(page)) showBoard(view, app).catch(() => {}); };
  app.on("project", refresh);
  app.on("task", refresh);
}
