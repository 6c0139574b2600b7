// People: the Users page (`#/users`, admins) and the invitation card an
// invited person's link opens (`#/invite/<secret>`).
//
// The Users page lists everyone with role, last sign-in and status; invites a
// person by name and role and shows their one-time link to send them;
// changes a role, disables, enables and removes (asking first). The admin's
// own row has no controls: the server refuses changes to yourself, so an
// instance always keeps the admin who is acting. Below them, the state of
// replication to object storage (`./replication.js`).
//
// The invitation card shows who the link is for and asks for a password
// twice; accepting signs the person in. The link's secret stays in the
// fragment and is sent only in a request body, never in a URL path.

import * as api from "./api.js";
import { copyButton, errorText, fieldError, h, panelMessages, replaceChildren } from "./dom.js";
import { replicationSection } from "./replication.js";
import { ROLES } from "./vocabulary.js";

/** The roles a person may be given, least first. */
const ROLE_CHOICES = [ROLES.MEMBER, ROLES.STAFF, ROLES.ADMIN];

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
        h("p", { class: "hint", id: "invite-username-hint", text: "3–64 characters: lower-case letters, digits, '.', '_' and '-', starting with a letter." }),
        usernameError.element,
      ),
      h("div", { class: "field" }, h("label", { for: "invite-role", text: "Role" }), role),
      invite,
    ),
    linkBox,
  );

  function showLink(name, invitation) {
    const url = h("input", { id: "invitation-url", type: "text", readonly: true, value: invitation.url, "aria-describedby": "invitation-url-hint" });
    replaceChildren(
      linkBox,
      h("label", { for: "invitation-url", text: `Invitation link for ${name}` }),
      h("div", { class: "copy-row" }, url, copyButton(() => invitation.url, "Copy link")),
      h("p", { class: "hint", id: "invitation-url-hint" }, "Send it to them yourself. It works once, until ", when(invitation.expiresAt, "it expires"), "; it is not shown again."),
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
    invite.disabled = true;
    say(`Inviting ${name}…`);
    let answer;
    try {
      answer = await api.inviteUser(name, role.value);
    } catch (error) {
      invite.disabled = false;
      if (error.details && error.details.field === "username") {
        say("");
        usernameError.show(errorText(error));
        username.focus();
      } else {
        fail(error);
      }
      return;
    }
    invite.disabled = false;
    username.value = "";
    await load(`${name} is invited.`);
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
    const yourself = name === me.username;
    const roleCell = yourself
      ? h("span", { text: `${person.role} (you)` })
      : (() => {
          const select = h(
            "select",
            { "aria-label": `Role of ${name}` },
            ROLE_CHOICES.map((value) => h("option", { value, text: value, selected: value === person.role })),
          );
          select.addEventListener("change", () => change(name, { role: select.value }, `${name} is now ${select.value}.`, select));
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
      const disabled = person.status === "disabled";
      actions.push(
        h("button", {
          type: "button",
          class: "button button-quiet",
          text: disabled ? "Enable" : "Disable",
          "aria-label": `${disabled ? "Enable" : "Disable"} ${name}`,
          onclick: (event) => {
            if (!disabled && !confirm(`Disable ${name}? They are signed out at once, their tokens and connected clients stop working, and they cannot sign in until you enable them. Their access to apps is kept.`)) {
              return;
            }
            change(name, { status: disabled ? "active" : "disabled" }, disabled ? `${name} may sign in again.` : `${name} is disabled.`, event.currentTarget);
          },
        }),
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
          : null;
    return h(
      "tr",
      { dataset: { user: name } },
      h("td", {}, h("span", { class: "grant-name", text: name })),
      h("td", { dataset: { label: "Role" } }, roleCell),
      h("td", { dataset: { label: "Last sign-in" } }, when(person.lastSignInAt, "Never")),
      h("td", { dataset: { label: "Status" } }, h("span", { class: `person-status person-${person.status}`, text: STATUS_TEXT[person.status] || person.status }), invitedUntil),
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
    replicationSection({ onUnauthenticated }),
  );
  load();
  return panel;
}

/**
 * The card an invitation link opens. `options`: `{token, onSignedIn(user),
 * onLeave()}`.
 */
export function invitationCard({ token, onSignedIn = () => {}, onLeave = () => {} }) {
  const heading = h("h1", { class: "card-title", id: "invite-title", tabindex: "-1", text: "Welcome to Sasha Studio" });
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
    heading.textContent = "This invitation link no longer works";
    replaceChildren(
      body,
      h("p", { text: "It was already used, has expired, or a newer link replaced it. Ask the admin who invited you for a new link." }),
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
    heading.textContent = `Welcome, ${invited.username}`;
    replaceChildren(
      body,
      h("p", {}, "You are invited to Sasha Studio as ", h("strong", { text: invited.username }), ` (${invited.role}). Choose a password to sign in.`),
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
                passwordError.show(errorText(error));
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
