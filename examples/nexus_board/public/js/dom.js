// Building elements: text always goes in as textContent, never as HTML.

/** h("li", {class: "card", dataset: {id: 3}}, "text", child) -> an element. */
export function h(tag, props = {}, ...children) {
  const element = document.createElement(tag);
  for (const [key, value] of Object.entries(props)) {
    if (value === undefined || value === null || value === false) continue;
    if (key === "class") element.className = value;
    else if (key === "dataset") Object.assign(element.dataset, value);
    else if (key.startsWith("on")) element.addEventListener(key.slice(2), value);
    else if (key in element && typeof value !== "string") element[key] = value;
    else element.setAttribute(key, value === true ? "" : value);
  }
  element.append(...children.flat().filter((c) => c !== null && c !== undefined && c !== false));
  return element;
}

/** Replace everything inside `parent` with `children`. */
export function mount(parent, ...children) {
  parent.replaceChildren(...children.flat());
}

/** A form's submit handler that shows the error message of a failed call in `errorLine`. */
export function onSubmit(form, errorLine, action) {
  form.addEventListener("submit", async (event) => {
    event.preventDefault();
    errorLine.textContent = "";
    try {
      await action(new FormData(form));
    } catch (error) {
      errorLine.textContent = error.message;
    }
  });
}

export function avatar(user, size = "small") {
  if (user && user.avatar_url) return h("img", { class: `avatar ${size}`, src: user.avatar_url, alt: "" });
  const initial = ((user && user.name) || "?").trim().charAt(0).toUpperCase();
  return h("span", { class: `avatar ${size} initial`, "aria-hidden": "true" }, initial);
}
