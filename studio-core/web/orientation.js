// Orientation: what Sasha says to people who do not know their way around
// yet. The admin's first-run checklist (what Sasha is, then four steps that
// tick themselves off from real state: people invited, a client connected,
// an app there, an app opened; dismissible), the member's empty state (what
// they can do without an app of their own: App Studio, the assistant, asking
// an admin), the one "Create" page (ask the assistant, start from a template,
// write it myself) and the page a person sees on a page that needs an admin.
//
// It only reads (`GET /api/users`, `GET /api/oauth/connections`) and never
// decides who may do what: the server refuses what a role may not do, and a
// step's button only opens the page where the work happens. What it keeps in
// the browser (`localStorage`) is the person's own: that they opened an app
// and that they dismissed the checklist, under their user id.

import * as api from "./api.js";
import { h } from "./dom.js";

/** What Sasha is, in one sentence. */
export const WHAT_SASHA_IS =
  "Sasha runs your team's small internal apps (trackers, forms, lists) on your own server, with an assistant that builds and changes them with you.";

const OPENED_KEY = "sasha.opened-an-app.";
const DISMISSED_KEY = "sasha.checklist-dismissed.";

function stored(key) {
  try {
    return window.localStorage.getItem(key) === "1";
  } catch {
    return false;
  }
}

function store(key) {
  try {
    window.localStorage.setItem(key, "1");
  } catch {
    // Private windows may refuse storage: the checklist then asks again.
  }
}

/** Records that `userId` opened an app (the checklist's last step). */
export function markOpened(userId) {
  store(OPENED_KEY + userId);
}

/** Whether `userId` dismissed the checklist. */
export function checklistDismissed(userId) {
  return stored(DISMISSED_KEY + userId);
}

/**
 * The checklist's steps from what is known: `others` (people besides the
 * admin, invited or active), `clients` (the admin's connected clients),
 * `apps` (apps the admin can open) and `opened` (whether they opened one).
 * `null` counts means "could not be read": the step is shown not done.
 */
export function checklistSteps({ others, clients, apps, opened }) {
  return [
    { id: "invite", title: "Invite people", text: "Add the people you work with; each gets a link to set their password.", done: others > 0, action: "Open Users", hash: "#/users" },
    { id: "connect", title: "Connect a client", text: "Use Sasha's apps from Claude, ChatGPT, VS Code or Cursor as tools.", done: clients > 0, action: "Open Connected clients", hash: "#/connections" },
    { id: "create", title: "Create an app", text: "Ask the assistant, start from a template, or write it yourself.", done: apps > 0, action: "Create an app", hash: "#/create" },
    { id: "open", title: "Open an app", text: "Pick an app in the list to use it here; one app is open at a time.", done: opened, action: null, hash: null },
  ];
}

/**
 * The admin's first-run checklist, for the home page: draws at once with
 * what the page knows, then ticks the steps the server confirms. `options`:
 * `{user, apps, go(hash), onDismiss()}`.
 */
export function checklist({ user, apps, go, onDismiss }) {
  const known = { others: 0, clients: 0, apps: apps.length, opened: stored(OPENED_KEY + user.id) };
  const list = h("ol", { class: "checklist-steps", role: "list" });
  const summary = h("p", { class: "checklist-summary", role: "status", "aria-live": "polite" });
  const draw = () => {
    const steps = checklistSteps(known);
    const done = steps.filter((step) => step.done).length;
    summary.textContent = done === steps.length ? "All done: Sasha is set up. You can dismiss this list." : `${done} of ${steps.length} done.`;
    list.replaceChildren(
      ...steps.map((step) =>
        h(
          "li",
          { class: "checklist-step", dataset: { step: step.id, done: String(step.done) } },
          h("span", { class: "checklist-mark", "aria-hidden": "true", text: step.done ? "✓" : "" }),
          h(
            "div",
            { class: "checklist-body" },
            h("h3", { class: "checklist-title", text: step.title }),
            h("span", { class: "visually-hidden", text: step.done ? " (done)" : " (to do)" }),
            h("p", { class: "hint", text: step.text }),
          ),
          step.action && !step.done ? h("button", { type: "button", class: "button button-small", text: step.action, onclick: () => go(step.hash) }) : null,
        ),
      ),
    );
  };
  draw();
  // What the server knows; a step that cannot be read stays "to do".
  api
    .listUsers()
    .then((answer) => {
      const users = Array.isArray(answer && answer.users) ? answer.users : [];
      known.others = users.filter((person) => person.username !== user.username).length;
      draw();
    })
    .catch(() => {});
  api
    .listConnections()
    .then((answer) => {
      known.clients = Array.isArray(answer && answer.connections) ? answer.connections.length : 0;
      draw();
    })
    .catch(() => {});
  const element = h(
    "section",
    { class: "checklist", "aria-labelledby": "checklist-title" },
    h(
      "div",
      { class: "checklist-head" },
      h("h2", { id: "checklist-title", text: "Get started with Sasha" }),
      h("button", {
        type: "button",
        class: "button button-quiet button-small",
        text: "Dismiss",
        "aria-label": "Dismiss the getting-started list",
        onclick: () => {
          store(DISMISSED_KEY + user.id);
          onDismiss();
        },
      }),
    ),
    h("p", { class: "checklist-intro", text: WHAT_SASHA_IS }),
    summary,
    list,
  );
  return element;
}

/**
 * What a member can do while no app is shared with them: App Studio, the
 * assistant, and asking an admin. `options`: `{go(hash), openAssistant()}`.
 */
export function memberPointers({ go, openAssistant }) {
  return h(
    "section",
    { class: "pointers", "aria-labelledby": "pointers-title" },
    h("h2", { id: "pointers-title", text: "What you can do now" }),
    h(
      "ul",
      { class: "pointer-list", role: "list" },
      h(
        "li",
        { class: "pointer" },
        h("h3", { text: "Build your own app" }),
        h("p", { class: "hint", text: "App Studio starts you with a small working app you can change, preview and share with colleagues." }),
        h("button", { type: "button", class: "button button-primary", text: "Open App Studio", onclick: () => go("#/studio") }),
      ),
      h(
        "li",
        { class: "pointer" },
        h("h3", { text: "Ask the assistant" }),
        h("p", { class: "hint", text: "Describe what you need in plain words; the assistant asks you before it changes anything." }),
        h("button", { type: "button", class: "button", text: "Open the assistant", onclick: () => openAssistant() }),
      ),
      h(
        "li",
        { class: "pointer" },
        h("h3", { text: "Use your team's apps" }),
        h("p", { class: "hint", text: "Ask an admin or staff member to give you access; the apps then appear in your list." }),
      ),
    ),
  );
}

/**
 * The Create page: the three ways to a new app. `options`: `{canCreateShared,
 * go(hash), openAssistant()}`; `canCreateShared` (admin and staff with
 * `apps:write`) makes "Start from a template" the shared New app form,
 * otherwise App Studio's starting template.
 */
export function createPanel({ canCreateShared, go, openAssistant }) {
  const option = (id, title, text, label, onclick, primary = false) =>
    h(
      "li",
      { class: "create-option", dataset: { path: id } },
      h("h2", { class: "create-option-title", text: title }),
      h("p", { class: "hint", text }),
      h("button", { type: "button", class: `button${primary ? " button-primary" : ""}`, text: label, onclick }),
    );
  return h(
    "section",
    { class: "panel create-panel", "aria-labelledby": "create-heading" },
    h("div", { class: "panel-header" }, h("h1", { id: "create-heading", class: "app-title", tabindex: "-1", text: "Create an app" })),
    h("p", { class: "hint", text: "Three ways to a new app. Whichever you choose, you can change the app afterwards in any of the other ways." }),
    h(
      "ul",
      { class: "create-options", role: "list" },
      option(
        "assistant",
        "Ask the assistant",
        "Say what the app is for (who uses it, what it keeps); the assistant writes it and shows you every change before it happens.",
        "Ask the assistant",
        () => openAssistant("I'd like an app that "),
        true,
      ),
      option(
        "template",
        "Start from a template",
        canCreateShared
          ? "Give a name and a one-line description: Sasha writes a small working app, with a table of records if you want one, that you can share with the team."
          : "App Studio starts you with a small working app: name it, change it, preview it and share it.",
        "Start from a template",
        () => go(canCreateShared ? "#/new" : "#/create/studio"),
      ),
      option(
        "write",
        "Write it myself",
        "Open App Studio's editor and write the app's HTML, CSS and JavaScript yourself, with Check and Preview before you deploy.",
        "Write it myself",
        () => go("#/create/studio"),
      ),
    ),
  );
}

/**
 * The page shown for a page the person's role does not include, in place of
 * a silent redirect: what the page is for, who may use it, and where to go.
 * `options`: `{title, reason, user, go(hash)}`.
 */
export function needsAdminPage({ title, reason, user, go }) {
  return h(
    "section",
    { class: "empty needs-admin", "aria-labelledby": "needs-admin-title" },
    h("h1", { class: "empty-title", id: "needs-admin-title", tabindex: "-1", text: `${title} needs an admin` }),
    h("p", { text: reason }),
    h("p", { class: "hint", text: `You are signed in as ${user.username} (${user.role}). If you need this page, ask an admin of your Sasha.` }),
    h(
      "div",
      { class: "form-actions needs-admin-actions" },
      h("button", { type: "button", class: "button button-primary", text: "Back to your apps", onclick: () => go("#/") }),
      h("button", { type: "button", class: "button", text: "Create an app", onclick: () => go("#/create") }),
    ),
  );
}
