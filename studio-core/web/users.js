// People: the Users page (`#/users`, admins) and the card an invitation link
// (`#/invite/<secret>`) or a password reset link (`#/reset/<secret>`) opens.
//
// The Users page lists everyone with where they come from (a password set
// here, the organisation's OpenID provider, or its directory over SCIM), role,
// last sign-in and status; invites a
// person by name and role, optionally with apps they can open as soon as
// they accept, and shows their one-time link to send them; makes an active
// person a one-time password reset link (never a password: only its person
// chooses one); changes a role (making someone an admin asks first, in a
// dialog), disables, enables and removes (asking first). The admin's own row
// has no controls: the server refuses changes to yourself, so an instance
// always keeps the admin who is acting. User names are one name whatever
// their case, as the server compares them. A person the directory provisions
// (SCIM) has their role from the directory's groups, so it shows as text
// saying so; an admin may still disable them here (an emergency brake the
// directory does not undo) and enable them again, which gives them back to
// the directory's word. Below them, the directory's SCIM tokens (minted
// here, the secret shown once, revoked here), then the state of
// replication to object storage (`./replication.js`). Last, the names App
// Studio's Share form suggests (`shareNameList`).
//
// The link's card shows who it is for and asks for a password twice; using
// it signs the person in (a reset link has then signed them out everywhere
// else). The link's secret stays in the fragment and is sent only in a
// request body, never in a URL path.

import * as api from "./api.js";
import { copyButton, errorMessage, fieldError, h, panelMessages, replaceChildren } from "./dom.js";
import { replicationSection } from "./replication.js";
import { ACCESS, ROLES } from "./vocabulary.js";

/** The roles a person may be given, least first. */
const ROLE_CHOICES = [ROLES.MEMBER, ROLES.STAFF, ROLES.ADMIN];

/** Whether two user names are one person's: names ignore case. */
export function sameName(a, b) {
  return String(a || "").toLowerCase() === String(b || "").toLowerCase();
}

/**
 * Asks `question` in a modal dialog titled `title`; resolves true when
 * `confirmText` is chosen, false on Cancel or Escape. The dialog is removed
 * once answered, and focus goes back where it was.
 */
export function confirmDialog({ title, question, confirmText, cancelText = "Cancel" }) {
  return new Promise((resolve) => {
    const before = document.activeElement;
    const titleId = `confirm-dialog-title-${Date.now()}`;
    const dialog = h("dialog", { class: "confirm-dialog", "aria-labelledby": titleId });
    let answer = false;
    const finish = (value) => {
      answer = value;
      dialog.close();
    };
    const cancel = h("button", { type: "button", class: "button", text: cancelText, onclick: () => finish(false) });
    const ok = h("button", { type: "button", class: "button button-primary", text: confirmText, onclick: () => finish(true) });
    replaceChildren(
      dialog,
      h("h2", { id: titleId, class: "confirm-dialog-title", text: title }),
      h("p", { text: question }),
      h("div", { class: "confirm-dialog-actions" }, cancel, ok),
    );
    dialog.addEventListener("close", () => {
      dialog.remove();
      if (before && typeof before.focus === "function") {
        before.focus();
      }
      resolve(answer);
    });
    document.body.appendChild(dialog);
    dialog.showModal();
    cancel.focus();
  });
}

/** Unix seconds as a short local date and time, or `fallback`. */
function when(seconds, fallback) {
  if (typeof seconds !== "number") {
    return fallback;
  }
  const date = new Date(seconds * 1000);
  return h("time", {
    datetime: date.toISOString(),
    text: date.toLocaleString(undefined, { dateStyle: "medium", timeStyle: "short" }),
  });
}

const STATUS_TEXT = { active: "Active", invited: "Invited", disabled: "Disabled" };

/** Where a person comes from (`source` of `/api/users`). */
const SOURCE_TEXT = { password: "Password", oidc: "Single sign-on", scim: "Directory (SCIM)" };

/** Why the directory keeps a SCIM person from signing in, or null. */
export function directoryHold(person) {
  const directory = person.directory;
  if (!directory) {
    return null;
  }
  if (directory.held) {
    return "disabled by an admin here";
  }
  if (!directory.active) {
    return "deactivated in the directory";
  }
  if (person.status === "disabled") {
    return "in no group that gives a role";
  }
  return null;
}

/**
 * The Users page; starts loading at once. `options`: `{me, onUnauthenticated(),
 * confirm(question)}`; `me` is the signed-in admin (`{username}`).
 */
export function usersPanel(options) {
  const me = options.me || {};
  const onUnauthenticated = options.onUnauthenticated || (() => {});
  const confirm = options.confirm || ((question) => window.confirm(question));
  const heading = h("h1", { id: "users-heading", tabindex: "-1", text: "Users" });
  const status = h("p", { class: "status", role: "status", "aria-live": "polite" });
  const alert = h("div", { class: "alert", role: "alert", hidden: true });
  const list = h("div", { class: "grants" });
  const linkBox = h("div", { class: "invitation-link", hidden: true });
  const { say, fail, clearAlert } = panelMessages(status, alert, { onUnauthenticated });

  // The invite form: each refusal sits under its field.
  const username = h("input", {
    id: "invite-username",
    name: "username",
    type: "text",
    required: true,
    autocomplete: "off",
    autocapitalize: "none",
    spellcheck: "false",
    "aria-describedby": "invite-username-hint",
  });
  const usernameError = fieldError(username, "invite-username-error");
  const role = h(
    "select",
    { id: "invite-role", name: "role" },
    ROLE_CHOICES.map((value) => h("option", { value, text: value })),
  );
  const invite = h("button", { type: "submit", class: "button button-primary", text: "Invite" });
  // The apps an invitation can give: the admin's own catalogue apps (a
  // member app is its author's to share). The server checks each again.
  const appChoices = h("div", { class: "invite-apps-list" }, h("p", { class: "hint", text: "Loading your apps…" }));
  const appsError = h("p", { class: "field-error", id: "invite-apps-error", hidden: true });
  const appsField = h(
    "fieldset",
    { class: "invite-apps", "aria-describedby": "invite-apps-hint invite-apps-error" },
    h("legend", { text: "Apps they can open (optional)" }),
    h("p", { class: "hint", id: "invite-apps-hint", text: "They have these as soon as they accept. You can change access later on each app's Access page." }),
    appChoices,
    appsError,
  );
  /** `[{box, level, app}]`: one per app offered. */
  let appRows = [];
  Promise.all([api.listApps(), api.listMemberApps({ all: true }).catch(() => ({ apps: [] }))])
    .then(([{ apps }, members]) => {
      const memberIds = new Set((members.apps || []).map((app) => app.id));
      const offered = (apps || []).filter((app) => !memberIds.has(app.id));
      appRows = offered.map((app) => {
        const id = `invite-app-${app.id}`;
        const level = h(
          "select",
          { id: `${id}-access`, "aria-label": `Access to ${app.name}`, disabled: true },
          [ACCESS.USE, ACCESS.MANAGE].map((value) => h("option", { value, text: value === ACCESS.USE ? "Use" : "Manage" })),
        );
        const box = h("input", {
          type: "checkbox",
          id,
          value: app.id,
          onchange: () => {
            level.disabled = !box.checked;
          },
        });
        return { box, level, app, row: h("div", { class: "invite-app" }, h("label", { class: "field-inline", for: id }, box, app.name), level) };
      });
      replaceChildren(
        appChoices,
        appRows.length === 0 ? h("p", { class: "hint", text: "You have no apps to give yet." }) : appRows.map((choice) => choice.row),
      );
    })
    .catch(() => {
      replaceChildren(appChoices, h("p", { class: "hint", text: "Your apps could not be loaded; invite now and give access from each app's Access page." }));
    });
  const form = h(
    "form",
    {
      class: "grant-form invite-form",
      novalidate: true,
      onsubmit: (event) => {
        event.preventDefault();
        sendInvitation();
      },
    },
    h("h2", { class: "section-title", text: "Invite someone" }),
    h(
      "div",
      { class: "form-row" },
      h(
        "div",
        { class: "field" },
        h("label", { for: "invite-username", text: "User name" }),
        username,
        h("p", { class: "hint", id: "invite-username-hint", text: "3–128 characters: letters, digits, '.', '_', '-', '@' and '+', starting with a letter. Sign-in ignores upper and lower case." }),
        usernameError.element,
      ),
      h("div", { class: "field" }, h("label", { for: "invite-role", text: "Role" }), role),
      invite,
    ),
    appsField,
    linkBox,
  );

  /** Shows a one-time link (an invitation or a reset) under the form, once. */
  function showLink(name, link, kind = "invitation") {
    const reset = kind === "reset";
    const url = h("input", { id: "invitation-url", type: "text", readonly: true, value: link.url, "aria-describedby": "invitation-url-hint" });
    replaceChildren(
      linkBox,
      h("label", { for: "invitation-url", text: reset ? `Password reset link for ${name}` : `Invitation link for ${name}` }),
      h("div", { class: "copy-row" }, url, copyButton(() => link.url, "Copy link")),
      reset
        ? h("p", { class: "hint", id: "invitation-url-hint" }, "Send it to them yourself. It works once, until ", when(link.expiresAt, "it expires"), ". When they choose a new password with it, they are signed out everywhere and their tokens and connected clients stop working. It is not shown again.")
        : h("p", { class: "hint", id: "invitation-url-hint" }, "Send it to them yourself. It works once, until ", when(link.expiresAt, "it expires"), "; it is not shown again."),
    );
    linkBox.hidden = false;
    url.focus();
    url.select();
  }

  async function sendInvitation() {
    clearAlert();
    usernameError.clear();
    const name = username.value.trim();
    if (name === "") {
      usernameError.show("Enter the user name they will sign in with.");
      username.focus();
      return;
    }
    appsError.hidden = true;
    const apps = appRows.filter((choice) => choice.box.checked).map((choice) => ({ appId: choice.app.id, access: choice.level.value }));
    invite.disabled = true;
    say(`Inviting ${name}…`);
    let answer;
    try {
      answer = await api.inviteUser(name, role.value, apps);
    } catch (error) {
      invite.disabled = false;
      const field = error.details && error.details.field;
      if (field === "username") {
        say("");
        usernameError.show(errorMessage(error));
        username.focus();
      } else if (field === "apps") {
        say("");
        appsError.textContent = errorMessage(error);
        appsError.hidden = false;
        const refused = appRows.find((choice) => choice.app.id === error.details.appId);
        (refused ? refused.box : appsField).focus();
      } else {
        fail(error);
      }
      return;
    }
    invite.disabled = false;
    username.value = "";
    for (const choice of appRows) {
      choice.box.checked = false;
      choice.level.disabled = true;
    }
    const given = apps.length === 0 ? "" : ` Once they accept, they can open ${apps.length === 1 ? "1 app" : `${apps.length} apps`}.`;
    await load(`${name} is invited.${given}`);
    showLink(name, answer.invitation);
  }

  function countText(users) {
    return users.length === 1 ? "1 user." : `${users.length} users.`;
  }

  async function load(message) {
    // `message` is announced once the list shows the change it describes.
    say(message ? "Updating the list…" : "Loading the users…");
    let users;
    try {
      ({ users } = await api.listUsers());
    } catch (error) {
      fail(error);
      return;
    }
    render(users);
    say(message ? `${message} ${countText(users)}` : countText(users));
  }

  function render(users) {
    replaceChildren(
      list,
      h(
        "table",
        { class: "grants-table connections-table people-table" },
        h("caption", { class: "visually-hidden", text: "Everyone with an account" }),
        h(
          "thead",
          {},
          h(
            "tr",
            {},
            h("th", { scope: "col", text: "User" }),
            h("th", { scope: "col", text: "Source" }),
            h("th", { scope: "col", text: "Role" }),
            h("th", { scope: "col", text: "Last sign-in" }),
            h("th", { scope: "col", text: "Status" }),
            h("th", { scope: "col" }, h("span", { class: "visually-hidden", text: "Actions" })),
          ),
        ),
        h("tbody", {}, users.map((person) => row(person))),
      ),
    );
  }

  function row(person) {
    const name = person.username;
    const yourself = sameName(name, me.username);
    const managed = person.source === "scim";
    const roleCell = yourself
      ? h("span", { text: `${person.role} (you)` })
      : managed
        ? h("span", {}, person.role, h("span", { class: "hint", text: " · from the directory's groups" }))
        : (() => {
          const select = h(
            "select",
            { "aria-label": `Role of ${name}` },
            ROLE_CHOICES.map((value) => h("option", { value, text: value, selected: value === person.role })),
          );
          select.addEventListener("change", async () => {
            const chosen = select.value;
            // Admin is the one role that can change everyone: asked first.
            if (chosen === ROLES.ADMIN && person.role !== ROLES.ADMIN) {
              const sure = await confirmDialog({
                title: `Make ${name} an admin?`,
                question: `${name} will be able to invite, change and remove everyone (you too), give any app to anyone, and change Studio's settings. Only make admins of people you would trust with all of that.`,
                confirmText: `Make ${name} an admin`,
              });
              if (!sure) {
                select.value = person.role;
                say(`${name} stays ${person.role}.`);
                return;
              }
            }
            change(name, { role: chosen }, `${name} is now ${chosen}.`, select);
          });
          return select;
        })();
    const actions = [];
    if (!yourself) {
      if (person.status === "invited") {
        actions.push(
          h("button", {
            type: "button",
            class: "button button-quiet",
            text: "New link",
            "aria-label": `New invitation link for ${name}`,
            onclick: (event) => renew(name, event.currentTarget),
          }),
        );
      }
      if (person.status === "active" && (person.source || "password") === "password") {
        actions.push(
          h("button", {
            type: "button",
            class: "button button-quiet",
            text: "Reset password…",
            "aria-label": `Reset the password of ${name}`,
            onclick: (event) => reset(name, event.currentTarget),
          }),
        );
      }
      // A SCIM person disabled by the directory (not by an admin here) is
      // enabled there, not here.
      const hold = directoryHold(person);
      const disabled = person.status === "disabled";
      const enableHere = !managed || !disabled || (person.directory && person.directory.held);
      if (enableHere) {
        const enableText = managed ? `${name} is back to the directory's word.` : `${name} may sign in again.`;
        actions.push(
          h("button", {
            type: "button",
            class: "button button-quiet",
            text: disabled ? "Enable" : "Disable",
            "aria-label": `${disabled ? "Enable" : "Disable"} ${name}`,
            onclick: (event) => {
              const until = managed ? "until you enable them here, whatever the directory says" : "until you enable them";
              if (!disabled && !confirm(`Disable ${name}? They are signed out at once, their tokens and connected clients stop working, and they cannot sign in ${until}. Their access to apps is kept.`)) {
                return;
              }
              change(name, { status: disabled ? "active" : "disabled" }, disabled ? enableText : `${name} is disabled.`, event.currentTarget);
            },
          }),
        );
      }
      if (managed && hold && !enableHere) {
        actions.push(h("span", { class: "hint", text: `Enable them in the directory (${hold}).` }));
      }
      actions.push(
        h("button", {
          type: "button",
          class: "button button-quiet button-danger",
          text: "Remove…",
          "aria-label": `Remove ${name}`,
          onclick: (event) => remove(name, event.currentTarget),
        }),
      );
    }
    const invitedUntil =
      person.status === "invited" && typeof person.invitationExpiresAt === "number"
        ? h("span", { class: "hint" }, " · link works until ", when(person.invitationExpiresAt, ""))
        : person.status === "invited"
          ? h("span", { class: "hint", text: " · link expired" })
          : typeof person.resetExpiresAt === "number"
            ? h("span", { class: "hint" }, " · reset link works until ", when(person.resetExpiresAt, ""))
            : null;
    // What the invitation gives once accepted, for every admin to see.
    const gives = person.status === "invited" && Array.isArray(person.invitationApps) && person.invitationApps.length > 0
      ? h("span", { class: "hint", text: ` · gives ${person.invitationApps.map((app) => `${app.appId} (${app.access})`).join(", ")}` })
      : null;
    const groups = person.directory && Array.isArray(person.directory.groups) && person.directory.groups.length > 0
      ? h("span", { class: "hint", text: ` · groups: ${person.directory.groups.join(", ")}` })
      : null;
    const directoryNote = directoryHold(person) ? h("span", { class: "hint", text: ` · ${directoryHold(person)}` }) : null;
    return h(
      "tr",
      { dataset: { user: name, source: person.source || "password" } },
      h("td", {}, h("span", { class: "grant-name", text: name })),
      h("td", { dataset: { label: "Source" } }, h("span", { class: "person-source", text: SOURCE_TEXT[person.source] || SOURCE_TEXT.password }), groups),
      h("td", { dataset: { label: "Role" } }, roleCell),
      h("td", { dataset: { label: "Last sign-in" } }, when(person.lastSignInAt, "Never")),
      h("td", { dataset: { label: "Status" } }, h("span", { class: `person-status person-${person.status}`, text: STATUS_TEXT[person.status] || person.status }), invitedUntil, gives, directoryNote),
      h("td", { class: "grant-actions" }, actions),
    );
  }

  async function change(name, what, done, control) {
    clearAlert();
    control.disabled = true;
    say(`Changing ${name}…`);
    try {
      await api.changeUser(name, what);
    } catch (error) {
      control.disabled = false;
      fail(error);
      await load();
      return;
    }
    await load(done);
    heading.focus();
  }

  async function renew(name, button) {
    clearAlert();
    button.disabled = true;
    say(`Making a new link for ${name}…`);
    let answer;
    try {
      answer = await api.renewInvitation(name);
    } catch (error) {
      button.disabled = false;
      fail(error);
      return;
    }
    await load(`A new link for ${name} is made; the old one no longer works.`);
    showLink(name, answer.invitation);
  }

  async function reset(name, button) {
    if (!confirm(`Make ${name} a password reset link? You send it to them; it works once, for a day. Until they use it nothing changes; when they do, they are signed out everywhere and their tokens and connected clients stop working.`)) {
      return;
    }
    clearAlert();
    button.disabled = true;
    say(`Making a password reset link for ${name}…`);
    let answer;
    try {
      answer = await api.resetPassword(name);
    } catch (error) {
      button.disabled = false;
      fail(error);
      return;
    }
    await load(`A password reset link for ${name} is made; send it to them.`);
    showLink(name, answer.reset, "reset");
  }

  async function remove(name, button) {
    if (!confirm(`Remove ${name}? Their account ends: every app access they have is revoked, and their sessions, tokens and connected clients stop working. Apps they made themselves keep running, but nobody can change them. This cannot be undone.`)) {
      return;
    }
    clearAlert();
    button.disabled = true;
    say(`Removing ${name}…`);
    let answer;
    try {
      answer = await api.removeUser(name);
    } catch (error) {
      button.disabled = false;
      fail(error);
      return;
    }
    const grants = answer.removed.grantsRevoked;
    await load(`${name} is removed; ${grants === 1 ? "1 app access was" : `${grants} app accesses were`} revoked.`);
    heading.focus();
  }

  const panel = h(
    "section",
    { class: "panel users-panel", "aria-labelledby": "users-heading" },
    h("div", { class: "panel-header" }, heading),
    h("p", { class: "hint", text: "Everyone who can sign in to Sasha Studio. Invite people here; give them access to apps from each app's Access page." }),
    status,
    alert,
    list,
    form,
    scimSection({ say, fail, clearAlert, confirm }),
    replicationSection({ onUnauthenticated }),
  );
  load();
  return panel;
}

/**
 * The directory's SCIM tokens: the provisioning URL to paste into Entra ID,
 * Okta, Google or Keycloak, a token minted for it (its secret shown once),
 * and the tokens made so far, each revocable.
 */
function scimSection({ say, fail, clearAlert, confirm }) {
  const list = h("div", { class: "scim-tokens" });
  const secretBox = h("div", { class: "token-secret", hidden: true });
  const label = h("input", { id: "scim-label", type: "text", required: true, autocomplete: "off", placeholder: "Entra ID" });
  const labelError = fieldError(label, "scim-label-error");
  const mint = h("button", { type: "submit", class: "button", text: "Mint a SCIM token" });
  let base = "";

  async function load() {
    let answer;
    try {
      answer = await api.listScimTokens();
    } catch (error) {
      fail(error);
      return;
    }
    base = answer.base;
    const tokens = answer.tokens || [];
    replaceChildren(
      list,
      h("p", { class: "hint" }, "Tenant URL for the directory: ", h("code", { text: base })),
      tokens.length === 0
        ? h("p", { class: "hint", text: "No SCIM token yet." })
        : h(
            "table",
            { class: "grants-table" },
            h("caption", { class: "visually-hidden", text: "SCIM tokens" }),
            h("thead", {}, h("tr", {}, ["Name", "Made", "Last used", "Status"].map((text) => h("th", { scope: "col", text })), h("th", { scope: "col" }, h("span", { class: "visually-hidden", text: "Actions" })))),
            h(
              "tbody",
              {},
              tokens.map((token) =>
                h(
                  "tr",
                  { dataset: { scimToken: String(token.id) } },
                  h("td", { text: token.label }),
                  h("td", {}, when(token.createdAt, "")),
                  h("td", {}, when(token.lastUsedAt, "Never")),
                  h("td", { text: token.revokedAt ? "Revoked" : "Active" }),
                  h(
                    "td",
                    { class: "grant-actions" },
                    token.revokedAt
                      ? null
                      : h("button", {
                          type: "button",
                          class: "button button-quiet button-danger",
                          text: "Revoke…",
                          "aria-label": `Revoke the SCIM token ${token.label}`,
                          onclick: (event) => revoke(token, event.currentTarget),
                        }),
                  ),
                ),
              ),
            ),
          ),
    );
  }

  async function revoke(token, button) {
    if (!confirm(`Revoke the SCIM token ${token.label}? The directory's next call is refused, and nobody is provisioned or deprovisioned through it until you mint a new one.`)) {
      return;
    }
    clearAlert();
    button.disabled = true;
    try {
      await api.revokeScimToken(token.id);
    } catch (error) {
      button.disabled = false;
      fail(error);
      return;
    }
    secretBox.hidden = true;
    say(`The SCIM token ${token.label} is revoked.`);
    await load();
  }

  async function mintToken() {
    clearAlert();
    labelError.clear();
    const name = label.value.trim();
    if (name === "") {
      labelError.show("Name it after the directory that will use it.");
      label.focus();
      return;
    }
    mint.disabled = true;
    let answer;
    try {
      answer = await api.mintScimToken(name);
    } catch (error) {
      mint.disabled = false;
      if (error.details && error.details.field === "label") {
        labelError.show(errorMessage(error));
        label.focus();
      } else {
        fail(error);
      }
      return;
    }
    mint.disabled = false;
    label.value = "";
    const secret = h("input", { id: "scim-secret", type: "text", readonly: true, value: answer.secret, "aria-describedby": "scim-secret-hint" });
    replaceChildren(
      secretBox,
      h("label", { for: "scim-secret", text: `Secret token for ${name}` }),
      h("div", { class: "copy-row" }, secret, copyButton(() => answer.secret, "Copy token")),
      h("p", { class: "hint", id: "scim-secret-hint" }, "Paste it into the directory's provisioning settings with the tenant URL ", h("code", { text: answer.base }), ". Whoever holds it can create, change and remove people and make admins through groups. It is not shown again."),
    );
    secretBox.hidden = false;
    secret.focus();
    secret.select();
    say(`A SCIM token for ${name} is minted.`);
    await load();
  }

  load();
  return h(
    "section",
    { class: "scim-section", "aria-labelledby": "scim-heading" },
    h("h2", { class: "section-title", id: "scim-heading", text: "Provisioning from your directory (SCIM)" }),
    h("p", { class: "hint", text: "Entra ID, Okta, Google Workspace and Keycloak can create, deactivate and remove people here, and set their role through the groups that SASHA_SSO_ADMIN_GROUPS, SASHA_SSO_STAFF_GROUPS and SASHA_SSO_MEMBER_GROUPS name. A person in no such group cannot sign in." }),
    list,
    h(
      "form",
      {
        class: "grant-form",
        novalidate: true,
        onsubmit: (event) => {
          event.preventDefault();
          mintToken();
        },
      },
      h("div", { class: "form-row" }, h("div", { class: "field" }, h("label", { for: "scim-label", text: "Token name" }), label, labelError.element), mint),
    ),
    secretBox,
  );
}

/**
 * The card an invitation link (or, with `reset`, a password reset link)
 * opens. `options`: `{token, reset, onSignedIn(user), onLeave()}`.
 */
export function invitationCard({ token, reset = false, onSignedIn = () => {}, onLeave = () => {} }) {
  const heading = h("h1", { class: "card-title", id: "invite-title", tabindex: "-1", text: reset ? "Choose a new password" : "Welcome to Sasha Studio" });
  const status = h("p", { class: "status", role: "status", "aria-live": "polite" });
  const alert = h("p", { class: "alert", role: "alert", hidden: true });
  const body = h("div", { class: "stack" });
  const { say, fail, clearAlert } = panelMessages(status, alert);
  const card = h(
    "section",
    { class: "card login-card", "aria-labelledby": "invite-title" },
    h("p", { class: "brand brand-large", text: "Sasha Studio" }),
    heading,
    body,
    alert,
    status,
  );

  function gone() {
    heading.textContent = reset ? "This password reset link no longer works" : "This invitation link no longer works";
    replaceChildren(
      body,
      h("p", { text: `It was already used, has expired, was replaced by a newer link, or the admin who made it is no longer one. Ask an admin for a new ${reset ? "one" : "link"}.` }),
      h("button", { type: "button", class: "button", text: "Go to sign-in", onclick: onLeave }),
    );
    heading.focus();
  }

  function showForm(invited) {
    const password = h("input", { id: "invite-password", type: "password", autocomplete: "new-password", required: true, "aria-describedby": "invite-password-hint" });
    const again = h("input", { id: "invite-password-again", type: "password", autocomplete: "new-password", required: true });
    const passwordError = fieldError(password, "invite-password-error");
    const againError = fieldError(again, "invite-password-again-error");
    const submit = h("button", { type: "submit", class: "button button-primary button-block", text: "Set password and sign in" });
    const username = h("input", { type: "text", name: "username", autocomplete: "username", value: invited.username, hidden: true, readonly: true });
    const resetting = invited.purpose === "reset";
    heading.textContent = resetting ? `Choose a new password, ${invited.username}` : `Welcome, ${invited.username}`;
    replaceChildren(
      body,
      resetting
        ? h("p", {}, "An admin made this link so that ", h("strong", { text: invited.username }), " can choose a new password. Once you do, you are signed out everywhere else, and your tokens and connected clients stop working; connect them again afterwards.")
        : h("p", {}, "You are invited to Sasha Studio as ", h("strong", { text: invited.username }), ` (${invited.role}). Choose a password to sign in.`),
      h(
        "form",
        {
          class: "stack",
          novalidate: true,
          onsubmit: async (event) => {
            event.preventDefault();
            clearAlert();
            passwordError.clear();
            againError.clear();
            if (password.value.length < 12) {
              passwordError.show("Use at least 12 characters.");
              password.focus();
              return;
            }
            if (again.value !== password.value) {
              againError.show("The two passwords are not the same.");
              again.focus();
              return;
            }
            submit.disabled = true;
            say("Signing you in…");
            let user;
            try {
              user = await api.acceptInvitation(token, password.value);
            } catch (error) {
              submit.disabled = false;
              say("");
              if (error.status === 404) {
                gone();
              } else if (error.details && error.details.field === "password") {
                passwordError.show(errorMessage(error));
                password.focus();
              } else {
                fail(error);
              }
              return;
            }
            say("Signed in. Loading your apps…");
            await onSignedIn(user);
          },
        },
        username,
        h(
          "div",
          { class: "field" },
          h("label", { for: "invite-password", text: "Password" }),
          password,
          h("p", { class: "hint", id: "invite-password-hint", text: "At least 12 characters." }),
          passwordError.element,
        ),
        h("div", { class: "field" }, h("label", { for: "invite-password-again", text: "The same password again" }), again, againError.element),
        submit,
      ),
      h("p", { class: "hint" }, "This link works once, until ", when(invited.expiresAt, "it expires"), "."),
    );
    password.focus();
  }

  async function load() {
    say("Checking your invitation…");
    let invited;
    try {
      invited = await api.invitation(token);
    } catch (error) {
      say("");
      if (error.status === 404) {
        gone();
      } else {
        fail(error);
      }
      return;
    }
    say("");
    showForm(invited);
  }

  load();
  return card;
}

// ---------------------------------------------------------------------------
// The names App Studio's Share form suggests as a person types: the names
// they already shared any of their own apps with and, for admin and staff
// (who may list everyone on the Users and Access pages anyway), every
// active person. A member is never shown a name they did not type before,
// so suggestions tell nobody which names have accounts: Share keeps
// answering alike whether or not a name exists.

/**
 * The suggested names, sorted and without case duplicates: from `apps` (the
 * caller's own member apps, each with `shares`), and everyone active when
 * `canListPeople`.
 */
export async function shareNames(apps, canListPeople, listUsers = api.listUsers) {
  const names = new Map();
  const add = (name) => {
    if (typeof name === "string" && name !== "" && !names.has(name.toLowerCase())) {
      names.set(name.toLowerCase(), name);
    }
  };
  for (const app of apps || []) {
    for (const name of Array.isArray(app.shares) ? app.shares : []) {
      add(name);
    }
  }
  if (canListPeople) {
    try {
      const { users } = await listUsers();
      for (const person of users || []) {
        if (person.status === "active") {
          add(person.username);
        }
      }
    } catch {
      // Suggestions are a convenience: typing a name still works.
    }
  }
  return [...names.values()].sort((a, b) => a.localeCompare(b));
}

/**
 * A `<datalist id>` filled with [`shareNames`] once they are known, for an
 * input's `list` attribute.
 */
export function shareNameList(id, apps, canListPeople) {
  const list = h("datalist", { id });
  shareNames(apps, canListPeople).then((names) => {
    replaceChildren(list, names.map((name) => h("option", { value: name })));
  });
  return list;
}
