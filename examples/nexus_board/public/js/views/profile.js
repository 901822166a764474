// The profile: name, bio, avatar upload, and the export of every project as JSON.
import { api } from "../api.js";
import { avatar, h, mount, onSubmit } from "../dom.js";

const MAX_AVATAR = 2 * 1024 * 1024;

export async function showProfile(view, app) {
  const page = app.page;
  const { user } = await api.get("/auth/me");
  if (!app.current(page)) return;
  app.updateUser(user);
  const picture = h("div", { id: "avatar-preview" }, avatar(user, "large"));
  const errors = h("p", { class: "error", role: "alert" });
  const saved = h("p", { id: "profile-saved", class: "muted", role: "status" });
  const form = h("form", { id: "profile", class: "card" },
    h("label", {}, "Name", h("input", { id: "profile-name", name: "name", value: user.name, required: true, maxlength: "60" })),
    h("label", {}, "Bio", h("textarea", { id: "profile-bio", name: "bio", maxlength: "300" }, user.bio)),
    h("button", { type: "submit" }, "Save"), saved, errors);
  onSubmit(form, errors, async (data) => {
    const answer = await api.patch("/profile", { name: data.get("name"), bio: data.get("bio") });
    app.updateUser(answer.user);
    saved.textContent = "Saved.";
  });

  const file = h("input", { id: "avatar-file", name: "avatar", type: "file", accept: "image/png,image/jpeg,image/gif,image/webp" });
  const uploadErrors = h("p", { id: "avatar-error", class: "error", role: "alert" });
  const upload = h("form", { id: "avatar-form", class: "card" },
    h("h3", {}, "Avatar"), picture, file,
    h("p", { class: "muted" }, "PNG, JPEG, GIF or WebP, up to 2 MiB."),
    h("button", { type: "submit" }, "Upload"), uploadErrors);
  onSubmit(upload, uploadErrors, async (data) => {
    const chosen = data.get("avatar");
    if (!chosen || !chosen.size) throw new Error("Choose an image first.");
    if (chosen.size > MAX_AVATAR) throw new Error("That image is over 2 MiB.");
    const answer = await api.post("/profile/avatar", data);
    app.updateUser(answer.user);
    mount(picture, avatar(answer.user, "large"));
    upload.reset();
  });

  const exportLink = h("a", { id: "export", href: "/api/export/projects.json", download: "nexus-export.json" },
    "Download all my projects as JSON");
  mount(view, h("h1", {}, "Profile"), h("p", { class: "muted" }, user.email),
    h("div", { class: "profile-grid" }, form, upload), h("p", {}, exportLink));
}
