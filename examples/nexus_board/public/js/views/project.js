// One project: the kanban (drag a card or use its arrows), filters, members and comments.
import { api } from "../api.js";
import { avatar, h, mount, onSubmit } from "../dom.js";

const COLUMNS = [["todo", "To do"], ["doing", "Doing"], ["done", "Done"]];
const ORDER = COLUMNS.map(([status]) => status);

function commentsLabel(n) {
  return n === 1 ? "1 comment" : `${n} comments`;
}

export async function showProject(view, app, projectId) {
  const page = app.page;
  const project = await api.get(`/projects/${projectId}`);
  if (!app.current(page)) return;
  const columns = new Map(COLUMNS.map(([status, title]) => [status, column(status, title)]));
  const filters = { status: "", q: "" };
  let openTask = null;

  function column(status, title) {
    const cards = h("ul", { class: "cards" });
    const section = h("section", { class: "column", dataset: { status } },
      h("h3", {}, title, h("span", { class: "n" }, "0")), cards);
    section.addEventListener("dragover", (event) => { event.preventDefault(); section.classList.add("over"); });
    section.addEventListener("dragleave", () => section.classList.remove("over"));
    section.addEventListener("drop", (event) => {
      event.preventDefault();
      section.classList.remove("over");
      const id = Number(event.dataTransfer.getData("text/plain"));
      if (id) move(id, status);
    });
    return { section, cards };
  }

  async function move(taskId, status) {
    try {
      showTask(await api.patch(`/tasks/${taskId}`, { status }));
    } catch (error) {
      errorLine.textContent = error.message;
    }
  }

  function card(task) {
    const index = ORDER.indexOf(task.status);
    const left = h("button", { class: "move-left", type: "button", title: "Move left", disabled: index === 0,
      onclick: (event) => { event.stopPropagation(); move(task.id, ORDER[index - 1]); } }, "←");
    const right = h("button", { class: "move-right", type: "button", title: "Move right", disabled: index === ORDER.length - 1,
      onclick: (event) => { event.stopPropagation(); move(task.id, ORDER[index + 1]); } }, "→");
    const item = h("li", { class: "card task", draggable: "true", dataset: { id: task.id, status: task.status } },
      h("span", { class: "title" }, task.title),
      task.description ? h("p", { class: "muted" }, task.description) : null,
      h("div", { class: "meta" }, avatar(task.created_by), h("span", { class: "comments-count", dataset: { n: task.comments } }, commentsLabel(task.comments)),
        h("span", { class: "spacer" }), left, right));
    item.addEventListener("dragstart", (event) => event.dataTransfer.setData("text/plain", String(task.id)));
    item.addEventListener("click", () => openComments(task));
    return item;
  }

  function matches(task) {
    const q = filters.q.toLowerCase();
    return (!filters.status || task.status === filters.status) &&
      (!q || task.title.toLowerCase().includes(q) || task.description.toLowerCase().includes(q));
  }

  /** Put `task` where it belongs now (or take it off the board). */
  function showTask(task) {
    const old = view.querySelector(`li.task[data-id="${task.id}"]`);
    if (old) old.remove();
    if (matches(task)) {
      const cards = columns.get(task.status).cards;
      const next = [...cards.children].find((li) => Number(li.dataset.id) > task.id);
      cards.insertBefore(card(task), next || null);
    }
    recount();
  }

  function recount() {
    for (const { section, cards } of columns.values()) section.querySelector(".n").textContent = String(cards.children.length);
  }

  let loads = 0; // only the latest load may draw: filters change faster than answers come
  async function load() {
    const mine = ++loads;
    const query = new URLSearchParams();
    if (filters.status) query.set("status", filters.status);
    if (filters.q) query.set("q", filters.q);
    const tasks = await api.get(`/projects/${projectId}/tasks?${query}`);
    if (!app.current(page) || mine !== loads) return;
    for (const { cards } of columns.values()) cards.replaceChildren();
    tasks.forEach(showTask);
    recount();
  }

  // Comments of one task, in a side panel.
  const panel = h("aside", { id: "comments", class: "panel", hidden: true });
  async function openComments(task) {
    openTask = task.id;
    const comments = await api.get(`/tasks/${task.id}/comments`);
    const list = h("ul", { class: "comment-list" }, comments.map(commentItem));
    const errors = h("p", { class: "error", role: "alert" });
    const form = h("form", { id: "new-comment" },
      h("textarea", { id: "comment-body", name: "body", placeholder: "Write a comment", required: true, maxlength: "2000" }),
      h("button", { type: "submit" }, "Comment"), errors);
    onSubmit(form, errors, async (data) => {
      addComment(await api.post(`/tasks/${task.id}/comments`, { body: data.get("body") }));
      form.reset();
    });
    const close = h("button", { type: "button", class: "link", onclick: () => { panel.hidden = true; openTask = null; } }, "Close");
    mount(panel, h("h3", {}, task.title), close, list, form);
    panel.hidden = false;
  }

  function commentItem(comment) {
    return h("li", { dataset: { id: comment.id } },
      h("div", { class: "meta" }, avatar(comment.author), h("strong", {}, comment.author.name),
        h("time", { dateTime: comment.created_at }, new Date(comment.created_at).toLocaleString())),
      h("p", { class: "body" }, comment.body));
  }

  function addComment(comment) {
    const list = panel.querySelector(".comment-list");
    if (!list || openTask !== comment.task_id || list.querySelector(`li[data-id="${comment.id}"]`)) return;
    list.append(commentItem(comment));
  }

  // Members: everyone sees them; the owner may add one by email or delete the project.
  const isOwner = project.owner.id === app.user.id;
  const memberErrors = h("p", { class: "error", role: "alert" });
  const members = h("div", { id: "members", class: "members" });
  function showMembers(list) { mount(members, list.map((m) => h("span", { class: "member" }, avatar(m), m.name))); }
  showMembers(project.members);
  const addMember = h("form", { id: "add-member", class: "inline", hidden: !isOwner },
    h("input", { id: "member-email", name: "email", type: "email", placeholder: "Add a member by email", required: true }),
    h("button", { type: "submit" }, "Add"), memberErrors);
  onSubmit(addMember, memberErrors, async (data) => {
    showMembers((await api.post(`/projects/${projectId}/members`, { email: data.get("email") })).members);
    addMember.reset();
  });
  const remove = h("button", { id: "delete-project", type: "button", class: "danger", hidden: !isOwner,
    onclick: async () => {
      if (!confirm(`Delete the project "${project.name}" and all its tasks?`)) return;
      await api.delete(`/projects/${projectId}`);
      app.go("/");
    } }, "Delete project");

  // New tasks and the filters.
  const errorLine = h("p", { class: "error", role: "alert" });
  const newTask = h("form", { id: "new-task", class: "inline" },
    h("input", { id: "task-title", name: "title", placeholder: "New task", required: true, maxlength: "200" }),
    h("button", { type: "submit" }, "Add task"));
  onSubmit(newTask, errorLine, async (data) => {
    newTask.reset(); // at once: the next title may be typed while this one is saved
    showTask(await api.post(`/projects/${projectId}/tasks`, { title: data.get("title") }));
  });
  const search = h("input", { id: "filter-q", type: "search", placeholder: "Filter tasks" });
  const statusFilter = h("select", { id: "filter-status" }, h("option", { value: "" }, "All statuses"),
    COLUMNS.map(([status, title]) => h("option", { value: status }, title)));
  let typing = null;
  search.addEventListener("input", () => {
    clearTimeout(typing);
    typing = setTimeout(() => { filters.q = search.value.trim(); load(); }, 200);
  });
  statusFilter.addEventListener("change", () => { filters.status = statusFilter.value; load(); });

  mount(view,
    h("div", { class: "project-head" },
      h("div", {}, h("a", { href: "/", "data-link": true }, "← All projects"), h("h1", { id: "project-title" }, project.name),
        h("p", { class: "muted" }, project.description)),
      h("div", { class: "actions" }, members, addMember, remove)),
    h("div", { class: "toolbar" }, newTask, search, statusFilter), errorLine,
    h("div", { class: "workspace" }, h("div", { id: "kanban", class: "kanban" }, [...columns.values()].map((c) => c.section)), panel));
  await load();

  app.on("task", (data) => {
    if (data.action === "deleted") {
      if (data.project_id !== projectId) return;
      const gone = view.querySelector(`li.task[data-id="${data.task_id}"]`);
      if (gone) gone.remove();
      recount();
    } else if (data.task.project_id === projectId) {
      showTask(data.task);
    }
  });
  app.on("comment", (data) => {
    if (data.project_id !== projectId) return;
    addComment(data.comment);
    const count = view.querySelector(`li.task[data-id="${data.comment.task_id}"] .comments-count`);
    if (count) {
      count.dataset.n = Number(count.dataset.n) + 1;
      count.textContent = commentsLabel(Number(count.dataset.n));
    }
  });
  app.on("project", (data) => {
    if (data.action === "deleted" && data.project_id === projectId) app.go("/");
    else if (data.project && data.project.id === projectId) showMembers(data.project.members);
  });
}
