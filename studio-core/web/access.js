// The access panel: who may use or manage one app (admin and staff only).
//
// It lists the app's grants (`GET /api/apps/:id/access`), changes a grant
// (`PUT …/access/:userId` with `{access}`) and revokes one (`DELETE …`). A
// new person is named by their user name (in any case: names ignore it),
// completed from `GET /api/users`; the page resolves the name to the id the
// API takes, and never shows ids. The caller's own row has no controls:
// nobody changes their own access (the server refuses it too).

import * as api from "./api.js";
import { h, panelMessages, replaceChildren } from "./dom.js";

const ACCESS_LABELS = { use: "Use", manage: "Manage" };

let panelCount = 0;

/**
 * Builds the panel for `app` and starts loading it.
 *
 * `options`: `{app, otherApps, currentUserId, onChanged(userId), onClose(),
 * onUnauthenticated()}`. `otherApps` are the caller's other apps, whose
 * grants' names are known before the user list answers.
 */
export function accessPanel(options) {
  const { app, otherApps = [], currentUserId, onChanged = () => {}, onClose = () => {} } = options;
  const onUnauthenticated = options.onUnauthenticated || (() => {});
  panelCount += 1;
  const ids = {
    heading: `access-heading-${panelCount}`,
    user: `access-user-${panelCount}`,
    level: `access-level-${panelCount}`,
    users: `access-users-${panelCount}`,
    hint: `access-hint-${panelCount}`,
  };
  const status = h("p", { class: "status", role: "status", "aria-live": "polite" });
  const alert = h("p", { class: "alert", role: "alert", hidden: true });
  const list = h("div", { class: "grants" });
  const suggestions = h("datalist", { id: ids.users });
  const known = new Map();

  const { say, fail, clearAlert } = panelMessages(status, alert, { onUnauthenticated });

  /** User name → id of everyone the panel can name, for the picker. */
  const byName = new Map();

  function remember(grants) {
    for (const grant of grants) {
      known.set(grant.userId, grant.username);
      byName.set(grant.username.toLowerCase(), grant.userId);
    }
  }

  // Everyone, by name: the picker completes user names, never ids. A name
  // submitted before this answers waits for it: a person who types fast (or
  // a slow server) is never told a real name does not exist.
  const directory = api
    .listUsers()
    .then(({ users }) => {
      for (const person of users || []) {
        if (person.disabled) {
          continue;
        }
        known.set(person.id, person.username);
        byName.set(person.username.toLowerCase(), person.id);
        if (person.id === currentUserId) {
          continue; // nobody grants themselves
        }
        suggestions.appendChild(h("option", { value: person.username, label: person.role }));
      }
    })
    .catch(() => {});

  // `message` (a string, or a function of the fresh grants) is announced only
  // once the list shows the change it describes.
  async function load(message) {
    say(message ? "Updating who has access…" : "Loading who has access…");
    try {
      const { grants } = await api.listAccess(app.id);
      remember(grants);
      render(grants);
      const done = typeof message === "function" ? message(grants) : message;
      say(done ? done : grants.length === 1 ? "1 person has access." : `${grants.length} people have access.`);
    } catch (error) {
      fail(error);
    }
  }

  function render(grants) {
    if (grants.length === 0) {
      replaceChildren(list, h("p", { class: "empty-inline", text: "Nobody has access to this app yet." }));
      return;
    }
    const rows = grants
      .slice()
      .sort((a, b) => a.username.localeCompare(b.username))
      .map((grant) => grantRow(grant));
    replaceChildren(
      list,
      h(
        "table",
        { class: "grants-table" },
        h("caption", { class: "visually-hidden", text: `People with access to ${app.name}` }),
        h(
          "thead",
          {},
          h("tr", {}, h("th", { scope: "col", text: "Person" }), h("th", { scope: "col", text: "Access" }), h("th", { scope: "col", text: "Granted" }), h("th", { scope: "col" }, h("span", { class: "visually-hidden", text: "Actions" }))),
        ),
        h("tbody", {}, rows),
      ),
    );
  }

  function grantRow(grant) {
    const you = grant.userId === currentUserId;
    const granted = new Date(grant.grantedAt * 1000);
    if (you) {
      // Your own access is another admin's or staff member's to change.
      return h(
        "tr",
        { class: "grant-own" },
        h("td", {}, h("span", { class: "grant-name", text: `${grant.username} (you)` })),
        h("td", {}, h("span", { text: ACCESS_LABELS[grant.access] || grant.access })),
        h("td", {}, h("time", { datetime: granted.toISOString(), text: granted.toLocaleDateString() })),
        h("td", { class: "grant-actions" }, h("span", { class: "hint", text: "Only another admin or staff member can change your access." })),
      );
    }
    const selectId = `access-${panelCount}-${grant.userId}`;
    const select = h(
      "select",
      {
        id: selectId,
        "aria-label": `Access for ${grant.username}`,
        onchange: () => change(grant, select.value, select),
      },
      Object.entries(ACCESS_LABELS).map(([value, label]) =>
        h("option", { value, selected: value === grant.access, text: label }),
      ),
    );
    const remove = h("button", {
      type: "button",
      class: "button button-quiet button-danger",
      text: "Remove",
      "aria-label": `Remove ${grant.username}'s access`,
      onclick: () => revoke(grant, remove),
    });
    return h(
      "tr",
      {},
      h("td", {}, h("span", { class: "grant-name", text: grant.username })),
      h("td", {}, select),
      h("td", {}, h("time", { datetime: granted.toISOString(), text: granted.toLocaleDateString() })),
      h("td", { class: "grant-actions" }, remove),
    );
  }

  async function change(grant, access, select) {
    clearAlert();
    select.disabled = true;
    say(`Giving ${grant.username} ${access} access…`);
    try {
      await api.grantAccess(app.id, grant.userId, access);
      await load(`${grant.username} now has ${access} access.`);
      onChanged(grant.userId);
    } catch (error) {
      select.value = grant.access;
      select.disabled = false;
      fail(error);
    }
  }

  async function revoke(grant, button) {
    if (!window.confirm(`Remove ${grant.username}'s access to ${app.name}?`)) {
      return;
    }
    clearAlert();
    button.disabled = true;
    say(`Removing ${grant.username}'s access…`);
    try {
      await api.revokeAccess(app.id, grant.userId);
      onChanged(grant.userId);
      await load(`${grant.username} no longer has access.`);
    } catch (error) {
      button.disabled = false;
      fail(error);
    }
  }

  const userInput = h("input", {
    id: ids.user,
    name: "username",
    type: "text",
    required: true,
    autocomplete: "off",
    spellcheck: "false",
    list: ids.users,
    "aria-describedby": ids.hint,
  });
  const levelSelect = h(
    "select",
    { id: ids.level, name: "access" },
    Object.entries(ACCESS_LABELS).map(([value, label]) => h("option", { value, text: label })),
  );
  const submit = h("button", { type: "submit", class: "button button-primary", text: "Grant access" });
  const form = h(
    "form",
    {
      class: "grant-form",
      novalidate: true,
      onsubmit: async (event) => {
        event.preventDefault();
        clearAlert();
        const typed = userInput.value.trim();
        if (typed === "") {
          fail({ message: "Enter the user name of the person to add." });
          userInput.focus();
          return;
        }
        if (!byName.has(typed.toLowerCase())) {
          submit.disabled = true;
          await directory;
          submit.disabled = false;
        }
        const userId = byName.get(typed.toLowerCase());
        if (!userId) {
          fail({ message: `There is no user called ${typed}. Choose one of the names suggested as you type.` });
          userInput.focus();
          return;
        }
        const access = levelSelect.value;
        const name = typed;
        submit.disabled = true;
        say(`Giving ${name} ${access} access…`);
        try {
          await api.grantAccess(app.id, userId, access);
          userInput.value = "";
          await load(() => `${known.get(userId) || name} now has ${access} access.`);
          onChanged(userId);
        } catch (error) {
          if (error && error.status === 404) {
            fail({ ...error, message: "That person or this app is no longer available." });
          } else {
            fail(error);
          }
        } finally {
          submit.disabled = false;
        }
      },
    },
    h("h3", { class: "form-title", text: "Add a person" }),
    h(
      "div",
      { class: "form-row" },
      h("div", { class: "field field-grow" }, h("label", { for: ids.user, text: "User name" }), userInput),
      h("div", { class: "field" }, h("label", { for: ids.level, text: "Access" }), levelSelect),
      h("div", { class: "field field-action" }, submit),
    ),
    h("p", {
      class: "hint",
      id: ids.hint,
      text: "Type a user name: everyone on this Studio is suggested as you type.",
    }),
    suggestions,
  );

  const panel = h(
    "section",
    { class: "panel access-panel", "aria-labelledby": ids.heading },
    h(
      "div",
      { class: "panel-header" },
      h("h2", { id: ids.heading, text: `Access to ${app.name}` }),
      h("button", { type: "button", class: "button button-quiet", text: "Close access", onclick: onClose }),
    ),
    h("p", {
      class: "hint",
      text: "Use lets a person open the app and work with its data. Manage also lets them change the app's source through Sasha.",
    }),
    status,
    alert,
    list,
    form,
  );

  load();
  // Suggest ids from the caller's other apps (best effort, quietly).
  for (const other of otherApps) {
    if (other.id !== app.id) {
      api.listAccess(other.id).then(({ grants }) => remember(grants), () => {});
    }
  }
  return panel;
}
