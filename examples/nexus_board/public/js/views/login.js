// Sign in or create an account.
import { api } from "../api.js";
import { h, mount, onSubmit } from "../dom.js";

export function showLogin(view, app) {
  let registering = false;
  const nameRow = h("label", { hidden: true }, "Name", h("input", { id: "name", name: "name", autocomplete: "name", maxlength: "60" }));
  const submit = h("button", { id: "submit", type: "submit" }, "Sign in");
  const toggle = h("button", { id: "toggle-mode", type: "button", class: "link" }, "No account yet? Register");
  const errorLine = h("p", { id: "auth-error", class: "error", role: "alert" });
  const form = h("form", { id: "auth", class: "card narrow" },
    h("h1", {}, "Welcome to Nexus Board"),
    nameRow,
    h("label", {}, "Email", h("input", { id: "email", name: "email", type: "email", required: true, autocomplete: "email" })),
    h("label", {}, "Password", h("input", { id: "password", name: "password", type: "password", required: true, minlength: "8", autocomplete: "current-password" })),
    submit, errorLine, toggle);
  toggle.addEventListener("click", () => {
    registering = !registering;
    nameRow.hidden = !registering;
    nameRow.querySelector("input").required = registering;
    submit.textContent = registering ? "Create account" : "Sign in";
    toggle.textContent = registering ? "Have an account? Sign in" : "No account yet? Register";
  });
  onSubmit(form, errorLine, async (data) => {
    const body = { email: data.get("email"), password: data.get("password") };
    if (registering) body.name = data.get("name");
    const { user } = await api.post(registering ? "/auth/register" : "/auth/login", body);
    app.signedIn(user);
  });
  mount(view, form);
}
