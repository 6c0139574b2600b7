// The New app form (admin and staff with `apps:write`): a name, an app id
// (suggested from the name until edited), a short description and whether the
// app keeps rows in a table. It posts `POST /api/apps`; the caller opens the
// new app. The name and description bounds are the platform's, read from the
// page's `<meta name="sasha-app-name-max|sasha-app-description-max">`.

import * as api from "./api.js";
import { h, panelMessages } from "./dom.js";
import { APP_ID_MAX_CHARS, isAppId } from "./vocabulary.js";

/** A bound the server put into the page, or `fallback` without one. */
function bound(name, fallback) {
  const meta = document.querySelector(`meta[name="${name}"]`);
  const value = meta ? Number(meta.getAttribute("content")) : Number.NaN;
  return Number.isInteger(value) && value > 0 ? value : fallback;
}

/** An app id suggested from a name: its ASCII letters and digits as kebab-case words. */
export function suggestId(name) {
  const words =
    String(name)
      .normalize("NFKD")
      .replace(/[\u0300-\u036f]/g, "")
      .toLowerCase()
      .match(/[a-z0-9]+/g) || [];
  let id = words.join("-").replace(/^[0-9-]+/, "");
  if (id.length > APP_ID_MAX_CHARS) {
    id = id.slice(0, APP_ID_MAX_CHARS).replace(/-+$/, "");
  }
  return id;
}

/** Why `id` is not an app id, or "" when it is one. */
export function idProblem(id) {
  if (id === "") {
    return "Enter an app id.";
  }
  if (!isAppId(id)) {
    return `The app id must be lowercase letters a–z and digits in words joined by single hyphens, starting with a letter, at most ${APP_ID_MAX_CHARS} characters (for example expense-claims).`;
  }
  return "";
}

/**
 * The form, as a panel. `options`: `{onCreated(created, name), onCancel(),
 * onUnauthenticated()}`; `created` is the answer `{app, status}`.
 */
export function newAppPanel({ onCreated = () => {}, onCancel = () => {}, onUnauthenticated = () => {} } = {}) {
  const nameMax = bound("sasha-app-name-max", 80);
  const descriptionMax = bound("sasha-app-description-max", 300);
  const status = h("p", { class: "status", role: "status", "aria-live": "polite" });
  const alert = h("p", { class: "alert", role: "alert", hidden: true });
  const { say, fail, clearAlert } = panelMessages(status, alert, { onUnauthenticated });

  const name = h("input", { id: "new-app-name", name: "name", type: "text", required: true, maxlength: nameMax, autocomplete: "off", "aria-describedby": "new-app-name-hint" });
  const id = h("input", {
    id: "new-app-id",
    name: "app",
    type: "text",
    required: true,
    maxlength: APP_ID_MAX_CHARS,
    autocomplete: "off",
    autocapitalize: "none",
    spellcheck: "false",
    "aria-describedby": "new-app-id-hint",
  });
  const description = h("textarea", { id: "new-app-description", name: "description", required: true, maxlength: descriptionMax, rows: 3, "aria-describedby": "new-app-description-hint" });
  const withTable = h("input", { id: "new-app-table", name: "withTable", type: "checkbox", "aria-describedby": "new-app-table-hint" });
  const submit = h("button", { type: "submit", class: "button button-primary", text: "Create app" });
  const cancel = h("button", { type: "button", class: "button button-quiet", text: "Cancel", onclick: () => onCancel() });

  // The id follows the name until the person types one of their own.
  let idEdited = false;
  name.addEventListener("input", () => {
    if (!idEdited) {
      id.value = suggestId(name.value);
    }
  });
  id.addEventListener("input", () => {
    idEdited = id.value !== "";
  });

  // Editing a refused field clears its refusal.
  for (const field of [name, id, description]) {
    field.addEventListener("input", () => {
      if (field.getAttribute("aria-invalid") === "true") {
        field.removeAttribute("aria-invalid");
        clearAlert();
      }
    });
  }

  function refuse(field, text) {
    alert.hidden = false;
    alert.textContent = text;
    field.setAttribute("aria-invalid", "true");
    field.focus();
  }

  const form = h(
    "form",
    {
      class: "stack new-app-form",
      novalidate: true,
      onsubmit: async (event) => {
        event.preventDefault();
        clearAlert();
        for (const field of [name, id, description]) {
          field.removeAttribute("aria-invalid");
        }
        const values = { app: id.value.trim(), name: name.value.trim(), description: description.value.trim(), withTable: withTable.checked };
        if (values.name === "") {
          refuse(name, "Enter a name for the app.");
          return;
        }
        const problem = idProblem(values.app);
        if (problem) {
          refuse(id, problem);
          return;
        }
        if (values.description === "") {
          refuse(description, "Enter a short description: what the app is for.");
          return;
        }
        submit.disabled = true;
        say(`Creating ${values.name}…`);
        let created;
        try {
          created = await api.createApp(values);
        } catch (error) {
          submit.disabled = false;
          fail(error);
          const field = { app: id, name, description }[error.details && error.details.field];
          if (field) {
            field.setAttribute("aria-invalid", "true");
            field.focus();
          } else if (error.code === "APP_CONFLICT") {
            id.setAttribute("aria-invalid", "true");
            id.focus();
          }
          return;
        }
        say(`${values.name} is created. Opening it…`);
        await onCreated(created, values.name);
      },
    },
    h(
      "div",
      { class: "field" },
      h("label", { for: "new-app-name", text: "Name" }),
      name,
      h("p", { class: "hint", id: "new-app-name-hint", text: `What people see, at most ${nameMax} characters.` }),
    ),
    h(
      "div",
      { class: "field" },
      h("label", { for: "new-app-id", text: "App id" }),
      id,
      h("p", {
        class: "hint",
        id: "new-app-id-hint",
        text: "Lowercase letters, digits and single hyphens, starting with a letter. It names the app's folder and tools and cannot be changed or reused.",
      }),
    ),
    h(
      "div",
      { class: "field" },
      h("label", { for: "new-app-description", text: "Description" }),
      description,
      h("p", { class: "hint", id: "new-app-description-hint", text: `One line on what the app is for, at most ${descriptionMax} characters.` }),
    ),
    h(
      "div",
      { class: "check-field" },
      withTable,
      h(
        "div",
        {},
        h("label", { for: "new-app-table", text: "Keep records in a table" }),
        h("p", {
          class: "hint",
          id: "new-app-table-hint",
          text: "Adds a table of items in which each person sees only their own rows, and a page that lists and adds them.",
        }),
      ),
    ),
    alert,
    h("div", { class: "form-actions" }, submit, cancel),
    status,
  );

  return h(
    "section",
    { class: "panel new-app-panel", "aria-labelledby": "new-app-heading" },
    h("div", { class: "panel-header" }, h("h1", { class: "app-title", id: "new-app-heading", tabindex: "-1", text: "New app" })),
    h("p", {
      class: "hint",
      text: "Sasha writes a small working app you can then change with an assistant through the source tools. Every admin and staff member can manage it; grant other people access afterwards.",
    }),
    form,
  );
}
