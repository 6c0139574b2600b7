// Sasha Studio: sign-in, the Apps sidebar, one open app at a time, the
// access panel for admin and staff, the recovery panel for managers, the
// New app form for admin and staff, App Studio (`appstudio.js`: every
// signed-in person's own member apps, and their moderation for admin and
// staff), and the assistant pane (`assistant.js`) for everyone, toggled by
// the header's Assistant button.
//
// Routes live in the location hash so the server serves one page:
// `#/` (no app open), `#/new` (the New app form), `#/studio` (App Studio:
// the caller's member apps, their editor, history and shares, and moderation),
// `#/studio/<id>` (App Studio with that member app's files in the editor),
// `#/apps/<id>` (the app open), `#/apps/<id>/access`
// (the app open with its access panel), `#/apps/<id>/history` (the app's
// revisions, diffs and revert, its own view closed), `#/apps/<id>/draft` (the app's
// draft: review, preview, publish or discard, its own view closed), `#/apps/<id>/recovery` (the app's
// rows in the generic recovery grid, its own view closed), `#/apps/<id>/activity` (its data
// changes and undo, its own view closed), `#/withdrawn` (admins:
// the withdrawn apps, to restore or delete), `#/users` (admins: people),
// `#/invite/<secret>` and `#/reset/<secret>` (an invitation or password
// reset link's card), `#/connections`
// (the MCP clients connected as the user), and `#/connect/<requestId>` (an MCP
// client's authorization request: the consent card on its own, after sign-in,
// without the shell). Every change of state is said in
// text: a live status line for progress, an alert for failures (with the
// envelope's code and diagnostic id).

import * as api from "./api.js";
import { accessPanel } from "./access.js";
import { recoveryPanel } from "./recovery.js";
import { activityPanel } from "./activity.js";
import { historyPanel } from "./history.js";
import { draftPanel } from "./drafts.js";
import { connectionsPanel, consentCard } from "./connect.js";
import { newAppPanel } from "./newapp.js";
import { appStudioPanel } from "./appstudio.js";
import { withdrawConfirm, withdrawnPanel } from "./withdrawn.js";
import { invitationCard, usersPanel } from "./users.js";
import { assistantPane } from "./assistant.js";
import { errorContent, h, replaceChildren } from "./dom.js";
import { checklist, checklistDismissed, createPanel, markOpened, memberPointers, needsAdminPage, WHAT_SASHA_IS } from "./orientation.js";
import { createHost, styleVariables } from "./host.js";
import { ACCESS, ROLES, SCOPES, isAppId } from "./vocabulary.js";

const root = document.getElementById("app");
const versionMeta = document.querySelector('meta[name="sasha-version"]');
const VERSION = versionMeta ? versionMeta.getAttribute("content") : "0";
const darkScheme = window.matchMedia("(prefers-color-scheme: dark)");

const studio = {
  /** The signed-in user: `{id, username, role, scopes}`. */
  user: null,
  /** `GET /api/apps`'s apps, and the sandbox origin they open in. */
  apps: [],
  sandboxOrigin: "",
  /** The open app's id and its host; at most one. */
  openAppId: null,
  host: null,
  /** Bumped by every open and close, so a slower earlier one gives up. */
  generation: 0,
  /** The shell's parts, once signed in. */
  shell: null,
  /**
   * What the page shows: "loading", "fatal", "login", "invite" (an
   * invitation link's card), "shell" or "consent" (the consent card on its
   * own). Only "shell" and "consent" follow the hash; any view opens an
   * invitation link.
   */
  view: "loading",
  /** Said first by the next Withdrawn apps page (what led there), then cleared. */
  withdrawnNotice: "",
  /** Said first by the next App Studio page (such as a deployment), then cleared. */
  studioNotice: "",
  /** The assistant pane of the shell (`assistant.js`), once signed in. */
  assistant: null,
};

/** Stops the assistant's running turn, if any, when its shell goes away. */
function disposeAssistant() {
  if (studio.assistant) {
    studio.assistant.dispose();
    studio.assistant = null;
  }
}

/** Admins: they may withdraw, restore and delete apps. */
function isAdmin() {
  return studio.user !== null && studio.user.role === ROLES.ADMIN;
}

function canManageAccess() {
  return studio.user !== null && (studio.user.role === ROLES.ADMIN || studio.user.role === ROLES.STAFF);
}

/** Admin and staff whose session may write app source: they may create apps. */
function canCreateApps() {
  return canManageAccess() && Array.isArray(studio.user.scopes) && studio.user.scopes.includes(SCOPES.APPS_WRITE);
}

function appById(id) {
  return studio.apps.find((app) => app.id === id) || null;
}

/**
 * The current route from the hash: `page` is "home", "new", "withdrawn",
 * "studio" (with `studioAppId` for one app's editor, or null), "app",
 * "connections" or "connect" (with `requestId`, which the server checks).
 */
function route() {
  const hash = window.location.hash;
  const none = { page: "home", appId: null, access: false, recovery: false, activity: false, history: false, draft: false, requestId: null, studioAppId: null, studioNew: false, inviteToken: null };
  const invite = /^#\/(invite|reset)\/([A-Za-z0-9_-]{1,256})$/.exec(hash);
  if (invite) {
    return { ...none, page: "invite", inviteToken: invite[2], resetLink: invite[1] === "reset" };
  }
  const connect = /^#\/connect\/([^/]*)$/.exec(hash);
  if (connect) {
    return { ...none, page: "connect", requestId: connect[1] };
  }
  if (hash === "#/connections") {
    return { ...none, page: "connections" };
  }
  if (hash === "#/new") {
    return { ...none, page: "new" };
  }
  if (hash === "#/create") {
    return { ...none, page: "create" };
  }
  if (hash === "#/create/studio") {
    return { ...none, page: "studio", studioNew: true };
  }
  if (hash === "#/withdrawn") {
    return { ...none, page: "withdrawn" };
  }
  if (hash === "#/users") {
    return { ...none, page: "users" };
  }
  const studioRoute = /^#\/studio(?:\/([^/]+))?$/.exec(hash);
  if (studioRoute && (studioRoute[1] === undefined || isAppId(studioRoute[1]))) {
    return { ...none, page: "studio", studioAppId: studioRoute[1] || null };
  }
  const match = /^#\/apps\/([^/]+)(\/access|\/recovery|\/activity|\/history|\/draft)?$/.exec(hash);
  if (!match || !isAppId(match[1])) {
    return none;
  }
  return { ...none, page: "app", appId: match[1], access: match[2] === "/access", recovery: match[2] === "/recovery", activity: match[2] === "/activity", history: match[2] === "/history", draft: match[2] === "/draft" };
}

function go(hash) {
  if (window.location.hash !== hash) {
    window.location.hash = hash;
  } else {
    render();
  }
}

// ---------------------------------------------------------------------------
// Signing in and out

async function boot() {
  if (route().page === "invite") {
    await showInvitation(route().inviteToken, route().resetLink);
    return;
  }
  let session;
  try {
    // Signed out is an ordinary answer here, not a refused /api/me.
    session = await api.session();
  } catch (error) {
    if (error.status === 401 || error.status === 404) {
      showLogin();
    } else {
      showFatal(error, boot);
    }
    return;
  }
  if (!session || !session.user) {
    showLogin();
    return;
  }
  studio.user = session.user;
  await enterStudio();
}

function showFatal(error, retry) {
  studio.view = "fatal";
  setTitle("Not available");
  const button = h("button", { type: "button", class: "button button-primary", text: "Try again", onclick: retry });
  replaceChildren(
    root,
    h(
      "main",
      { class: "center", id: "main", tabindex: "-1" },
      h(
        "section",
        { class: "card", "aria-labelledby": "fatal-title" },
        h("h1", { class: "card-title", id: "fatal-title", text: "Sasha Studio is not available" }),
        h("p", { class: "alert", role: "alert" }, errorContent(error)),
        button,
      ),
    ),
  );
  button.focus();
}

function showLogin(notice) {
  disposeAssistant();
  studio.view = "login";
  setTitle("Sign in");
  studio.user = null;
  studio.shell = null;
  studio.apps = [];
  const connecting = route().page === "connect";
  const status = h("p", { class: "status", role: "status", "aria-live": "polite", text: notice || "" });
  const alert = h("p", { class: "alert", role: "alert", hidden: true });
  const username = h("input", { id: "login-username", name: "username", type: "text", autocomplete: "username", required: true, autocapitalize: "none", spellcheck: "false" });
  const password = h("input", { id: "login-password", name: "password", type: "password", autocomplete: "current-password", required: true });
  const submit = h("button", { type: "submit", class: "button button-primary button-block", text: "Sign in" });
  const form = h(
    "form",
    {
      class: "stack",
      novalidate: true,
      onsubmit: async (event) => {
        event.preventDefault();
        alert.hidden = true;
        if (username.value.trim() === "" || password.value === "") {
          alert.hidden = false;
          alert.textContent = "Enter your user name and password.";
          (username.value.trim() === "" ? username : password).focus();
          return;
        }
        submit.disabled = true;
        status.textContent = "Signing in…";
        try {
          studio.user = await api.login(username.value.trim(), password.value);
        } catch (error) {
          submit.disabled = false;
          status.textContent = "";
          alert.hidden = false;
          replaceChildren(alert, errorContent(error));
          password.select();
          password.focus();
          return;
        }
        status.textContent = route().page === "connect" ? "Signed in. Loading the connection request…" : "Signed in. Loading your apps…";
        await enterStudio();
      },
    },
    h("div", { class: "field" }, h("label", { for: "login-username", text: "User name" }), username),
    h("div", { class: "field" }, h("label", { for: "login-password", text: "Password" }), password),
    alert,
    submit,
    status,
  );
  // Filled once /api/auth/providers answers: "Sign in with <provider>", and
  // when passwords are off, the form behind a small administrator link.
  const sso = h("div", { class: "stack", id: "login-sso", hidden: true });
  replaceChildren(
    root,
    h(
      "main",
      { class: "center", id: "main", tabindex: "-1" },
      h(
        "section",
        { class: "card login-card", "aria-labelledby": "login-title" },
        h("p", { class: "brand brand-large", text: "Sasha Studio" }),
        h("h1", { class: "card-title", id: "login-title", text: "Sign in" }),
        connecting
          ? h("p", { class: "hint", text: "A client is asking to connect to Sasha as you. Sign in to see what it asks for and to allow or deny it." })
          : null,
        sso,
        form,
      ),
    ),
  );
  username.focus();
  offerProvider(sso, form, username);
}

/**
 * Shows "Sign in with <provider>" above the password form when Studio has an
 * identity provider; the provider sends the person back to this very route
 * (a connection request's consent card included). With passwords off, the
 * form waits behind "Administrator sign-in" for the break-glass admin.
 */
async function offerProvider(sso, form, username) {
  let providers;
  try {
    providers = await api.providers();
  } catch {
    return; // The password form still works; nothing to offer.
  }
  if (!providers.sso || !sso.isConnected) {
    return;
  }
  const returnTo = "/" + (location.hash || "#/");
  const start = `${providers.sso.start}?return_to=${encodeURIComponent(returnTo)}`;
  const button = h("a", {
    class: "button button-primary button-block",
    id: "login-sso-button",
    href: start,
    text: `Sign in with ${providers.sso.name}`,
  });
  replaceChildren(sso, button);
  sso.hidden = false;
  if (providers.passwords) {
    sso.append(h("p", { class: "hint", text: "Or sign in with your Sasha user name and password:" }));
    return;
  }
  form.hidden = true;
  const admin = h("button", {
    type: "button",
    class: "button button-quiet button-inline",
    id: "login-admin-link",
    text: "Administrator sign-in",
    onclick: () => {
      admin.hidden = true;
      form.hidden = false;
      username.focus();
    },
  });
  sso.append(admin);
  button.focus();
}

async function signOut() {
  const shell = studio.shell;
  if (shell) {
    shell.signOut.disabled = true;
    say("Signing out…");
  }
  await closeApp();
  try {
    await api.logout();
  } catch (error) {
    if (shell) {
      shell.signOut.disabled = false;
      showAlert(error);
    }
    return;
  }
  history.replaceState(null, "", "#/");
  showLogin("You have signed out.");
}

/** The session ended under us (401 from /api or /mcp): back to sign-in. */
async function sessionEnded() {
  if (studio.user === null) {
    return;
  }
  studio.user = null;
  await closeApp();
  showLogin("Your session has ended. Sign in again to continue.");
}

/**
 * Signs out from the consent card and asks for another account, keeping the
 * route so the same request shows again after sign-in.
 */
async function switchUser() {
  try {
    await api.logout();
  } catch (error) {
    if (error.status !== 401) {
      showFatal(error, () => switchUser());
      return;
    }
  }
  showLogin("You have signed out. Sign in as the person the client should connect as.");
}

// ---------------------------------------------------------------------------
// An invitation link

/**
 * The card of an invitation link, on its own: whoever is signed in, the
 * link is for the person it names, and accepting signs them in.
 */
async function showInvitation(token, reset = false) {
  await closeApp();
  disposeAssistant();
  studio.shell = null;
  studio.view = "invite";
  setTitle(reset ? "Choose a new password" : "Invitation");
  const card = invitationCard({
    token,
    reset,
    onSignedIn: async (user) => {
      studio.user = user;
      history.replaceState(null, "", "#/");
      await enterStudio();
    },
    onLeave: () => {
      history.replaceState(null, "", "#/");
      showLogin();
    },
  });
  const main = h("main", { class: "center", id: "main", tabindex: "-1" }, card);
  replaceChildren(root, main);
  // The card holds the secret now: it leaves the address bar and this
  // history entry at once, so a shared computer's history, a restored
  // session or a shoulder keeps no working link (reopening the link shows
  // the card again).
  history.replaceState(null, "", "#/");
  main.focus();
}

// ---------------------------------------------------------------------------
// The consent card (an MCP client's authorization request)

/** Shows the consent card for `requestId` on its own, closing any open app. */
async function showConsent(requestId) {
  await closeApp();
  disposeAssistant();
  studio.shell = null;
  studio.view = "consent";
  setTitle("Connect a client");
  const card = consentCard({
    requestId,
    user: studio.user,
    onUnauthenticated: () => {
      sessionEnded();
    },
    onSwitchUser: () => switchUser(),
    onLeave: () => go("#/"),
  });
  const main = h("main", { class: "center", id: "main", tabindex: "-1" }, card);
  replaceChildren(root, main);
  // The card focuses its heading once the request has loaded.
  main.focus();
}

// ---------------------------------------------------------------------------
// The shell

async function enterStudio() {
  const current = route();
  if (current.page === "connect") {
    await showConsent(current.requestId);
    return;
  }
  buildShell();
  studio.shell.main.focus();
  await showApps();
}

/** Loads the apps and draws the route, or offers to try again. */
async function showApps() {
  if (await loadApps()) {
    await render();
    return;
  }
  showAppsFailed();
}

/** The pane when the apps could not be loaded: the alert above says why. */
function showAppsFailed() {
  if (!studio.shell) {
    return;
  }
  const retry = h("button", {
    type: "button",
    class: "button button-primary",
    text: "Try again",
    onclick: () => {
      clearAlert();
      showApps();
    },
  });
  replaceChildren(
    studio.shell.main,
    h(
      "section",
      { class: "empty", "aria-labelledby": "empty-title" },
      h("h1", { class: "empty-title", id: "empty-title", text: "Your apps could not be loaded" }),
      h("p", { class: "stack-gap", text: "The reason is shown above." }),
      retry,
    ),
  );
}

async function loadApps() {
  say("Loading your apps…");
  try {
    const listing = await api.listApps();
    studio.apps = listing.apps;
    studio.sandboxOrigin = listing.sandboxOrigin;
    say("");
    return true;
  } catch (error) {
    if (error.status === 401) {
      await sessionEnded();
    } else {
      showAlert(error);
      say("");
    }
    return false;
  }
}

function buildShell() {
  const picker = h("select", {
    id: "app-picker",
    onchange: () => go(picker.value ? `#/apps/${picker.value}` : "#/"),
  });
  const signOutButton = h("button", { type: "button", class: "button button-quiet", text: "Sign out", onclick: signOut });
  const connectionsLink = h("a", { class: "button button-quiet", href: "#/connections", text: "Connected clients" });
  // Admins' way to the withdrawn apps (on phones, where the sidebar is hidden, the home page has one too).
  // A button, like New app: the sidebar's links are the apps themselves.
  const withdrawnLink = isAdmin()
    ? h("button", { type: "button", class: "button button-quiet button-block sidebar-withdrawn", text: "Withdrawn apps", onclick: () => go("#/withdrawn") })
    : null;
  // Admins' way to the Users page (the home page has one too, for phones).
  const usersLink = isAdmin()
    ? h("button", { type: "button", class: "button button-quiet button-block sidebar-users", text: "Users", onclick: () => go("#/users") })
    : null;
  const appList = h("ul", { class: "app-list", role: "list" });
  // Everyone's way to their own apps (on phones, where the sidebar is hidden, the home page has one too).
  const studioLink = h("button", { type: "button", class: "button button-quiet button-block sidebar-studio", text: "App Studio", onclick: () => go("#/studio") });
  // The one way to a new app for everyone: the Create page offers the assistant, a template and App Studio's editor.
  const newAppButton = h("button", { type: "button", class: "button button-block sidebar-new", text: "Create", onclick: () => go("#/create") });
  // Phones: the sidebar is the menu, and holds what the compact header leaves out.
  const menuConnections = h("a", { class: "button button-quiet button-block sidebar-phone-only", href: "#/connections", text: "Connected clients" });
  const menuSignOut = h("button", { type: "button", class: "button button-quiet button-block sidebar-phone-only", text: "Sign out", onclick: signOut });
  const menuButton = h("button", { type: "button", class: "button menu-toggle", text: "Menu", "aria-expanded": "false", "aria-controls": "sidebar" });
  const main = h("main", { class: "pane", id: "main", tabindex: "-1" });
  // The assistant beside the app pane, for every signed-in user.
  disposeAssistant();
  const assistantButton = h("button", { type: "button", class: "button assistant-toggle", text: "Assistant", "aria-expanded": "false", "aria-controls": "assistant" });
  const layout = h("div", { class: "layout" });
  menuButton.addEventListener("click", () => setMenu(!layout.classList.contains("menu-open")));
  const assistant = assistantPane({
    onAppsChanged: async () => {
      // An approved change ran: an app may be new or changed.
      if (studio.shell && (await loadApps())) {
        renderSidebar(studio.openAppId);
        refreshPaneHeader();
        if (route().page === "home") {
          // The home page's empty state counts the apps.
          render();
        }
      }
    },
    onUnauthenticated: () => {
      sessionEnded();
    },
    onClose: () => {
      layout.classList.remove("assistant-open");
      assistantButton.setAttribute("aria-expanded", "false");
      assistantButton.focus();
    },
  });
  assistantButton.addEventListener("click", () => {
    if (assistant.isOpen()) {
      assistant.close();
      return;
    }
    layout.classList.add("assistant-open");
    assistantButton.setAttribute("aria-expanded", "true");
    assistant.open();
  });
  studio.assistant = assistant;
  // A change the assistant asked about outlives the page that showed it: after
  // a reload (or in another tab) a note beside the closed pane's button says
  // that one waits (beside, so the button keeps its name).
  const waitingNote = h("span", { class: "assistant-waiting", role: "status", hidden: true });
  api
    .listConfirmations()
    .then(({ confirmations = [] } = {}) => {
      if (confirmations.length > 0 && studio.assistant === assistant && !assistant.isOpen()) {
        waitingNote.textContent = confirmations.length === 1 ? "1 change waits for your approval" : `${confirmations.length} changes wait for your approval`;
        waitingNote.hidden = false;
      }
    })
    .catch(() => {
      // The pane shows the cards when opened; nothing more to say here.
    });
  assistantButton.addEventListener("click", () => {
    waitingNote.hidden = true;
  });
  const status = h("p", { class: "status shell-status", role: "status", "aria-live": "polite" });
  const alert = h("div", { class: "alert shell-alert", role: "alert", hidden: true });
  const skip = h("a", {
    class: "skip-link",
    href: "#main",
    text: "Skip to content",
    onclick: (event) => {
      event.preventDefault();
      main.focus();
    },
  });
  replaceChildren(
    root,
    skip,
    h(
      "header",
      { class: "topbar" },
      h("p", { class: "brand" }, "Sasha", h("span", { class: "brand-suffix", text: " Studio" })),
      menuButton,
      h("div", { class: "picker field-inline" }, h("label", { for: "app-picker", text: "App" }), picker),
      assistantButton,
      waitingNote,
      h(
        "div",
        { class: "account" },
        h("span", { class: "account-name", text: studio.user.username }),
        h("span", { class: "badge", text: studio.user.role }),
        connectionsLink,
        signOutButton,
      ),
    ),
    layout,
  );
  replaceChildren(
    layout,
    h(
      "nav",
      {
        class: "sidebar",
        id: "sidebar",
        "aria-labelledby": "apps-heading",
        // Phones: choosing anything in the menu closes it, the page already shown included.
        onclick: (event) => {
          if (event.target instanceof Element && event.target.closest("a, button")) {
            setMenu(false);
          }
        },
      },
      h("h2", { class: "sidebar-title", id: "apps-heading", text: "Apps" }),
      appList,
      newAppButton,
      studioLink,
      usersLink,
      withdrawnLink,
      h("div", { class: "sidebar-account sidebar-phone-only" }, h("p", { class: "account-name", text: `${studio.user.username} · ${studio.user.role}` }), menuConnections, menuSignOut),
    ),
    h("div", { class: "pane-wrap" }, status, alert, main),
    assistant.element,
  );
  studio.shell = { picker, appList, main, status, alert, signOut: signOutButton, connectionsLink, withdrawnLink, usersLink, studioLink, newAppButton, menuButton, layout, assistantButton, assistant, pane: null };
  studio.view = "shell";
}

function say(text) {
  if (studio.shell) {
    studio.shell.status.textContent = text;
  }
}

/** The tab's title: the page, then "Sasha", so tabs and history tell pages apart. */
function setTitle(page) {
  document.title = page ? `${page} — Sasha` : "Sasha";
}

/** Opens or closes the phones' menu (the sidebar under the compact header). */
function setMenu(open) {
  if (!studio.shell) {
    return;
  }
  studio.shell.layout.classList.toggle("menu-open", open);
  studio.shell.menuButton.setAttribute("aria-expanded", String(open));
}

/** Opens the assistant pane (if closed) and puts `starter` in an empty message box. */
function openAssistant(starter = "") {
  if (!studio.shell) {
    return;
  }
  if (!studio.shell.assistant.isOpen()) {
    studio.shell.assistantButton.click();
  }
  const prompt = document.getElementById("assistant-prompt");
  if (prompt && starter && prompt.value === "") {
    prompt.value = starter;
    prompt.focus();
    prompt.setSelectionRange(starter.length, starter.length);
  }
}

function showAlert(error) {
  if (!studio.shell) {
    return;
  }
  const alert = studio.shell.alert;
  alert.hidden = false;
  replaceChildren(
    alert,
    h("span", {}, errorContent(error)),
    h("button", {
      type: "button",
      class: "button button-quiet",
      text: "Dismiss",
      onclick: () => {
        alert.hidden = true;
        alert.textContent = "";
      },
    }),
  );
}

function clearAlert() {
  if (studio.shell) {
    studio.shell.alert.hidden = true;
    studio.shell.alert.textContent = "";
  }
}

function renderSidebar(openId) {
  const { appList, picker } = studio.shell;
  if (studio.apps.length === 0) {
    replaceChildren(appList, h("li", { class: "app-list-empty", text: "No apps yet" }));
  } else {
    replaceChildren(
      appList,
      studio.apps.map((app) =>
        h(
          "li",
          {},
          h(
            "a",
            {
              class: "app-link",
              href: `#/apps/${app.id}`,
              "aria-current": app.id === openId ? "page" : false,
            },
            h("span", { class: "app-link-name", text: app.name }),
            h("span", { class: "app-link-description", text: app.description }),
            h("span", { class: "badge badge-small", text: app.access }),
          ),
        ),
      ),
    );
  }
  replaceChildren(
    picker,
    h("option", { value: "", text: studio.apps.length === 0 ? "No apps yet" : "Choose an app" }),
    studio.apps.map((app) => h("option", { value: app.id, selected: app.id === openId, text: app.name })),
  );
  picker.disabled = studio.apps.length === 0;
}

/** The Create button of the empty states (the sidebar is hidden on phones). */
function newAppAction() {
  return h("button", { type: "button", class: "button button-primary empty-action", text: "Create", onclick: () => go("#/create") });
}

/** The App Studio button of the empty states, for everyone (the sidebar is hidden on phones). */
function studioAction() {
  return h("button", { type: "button", class: "button button-quiet empty-action empty-studio", text: "App Studio", onclick: () => go("#/studio") });
}

/** The Withdrawn apps link of the empty states, for admins (the sidebar is hidden on phones). */
function withdrawnAction() {
  return isAdmin() ? h("button", { type: "button", class: "button button-quiet empty-action empty-withdrawn", text: "Withdrawn apps", onclick: () => go("#/withdrawn") }) : null;
}

/** The Users link of the empty states, for admins (the sidebar is hidden on phones). */
function usersAction() {
  return isAdmin() ? h("button", { type: "button", class: "button button-quiet empty-action empty-users", text: "Users", onclick: () => go("#/users") }) : null;
}

/** The admin's getting-started list above the home page, until dismissed. */
function adminChecklist() {
  if (!isAdmin() || checklistDismissed(studio.user.id)) {
    return null;
  }
  return checklist({
    user: studio.user,
    apps: studio.apps,
    go,
    onDismiss: () => {
      const list = studio.shell ? studio.shell.main.querySelector(".checklist") : null;
      if (list) {
        list.remove();
      }
      const heading = studio.shell ? studio.shell.main.querySelector("h1") : null;
      if (heading) {
        heading.setAttribute("tabindex", "-1");
        heading.focus();
      }
    },
  });
}

function emptyState() {
  setTitle("Apps");
  if (studio.apps.length === 0) {
    const manager = canManageAccess();
    return h(
      "div",
      { class: "home" },
      h(
        "section",
        { class: "empty", "aria-labelledby": "empty-title" },
        h("h1", { class: "empty-title", id: "empty-title", text: `Welcome, ${studio.user.username}` }),
        manager ? null : h("p", { class: "empty-intro", text: WHAT_SASHA_IS }),
        h("p", {
          text: canCreateApps()
            ? "No apps yet — create one with Create, or ask another admin or staff member for access to theirs."
            : manager
              ? "No apps yet — add a valid app package to the apps folder, or ask another admin or staff member for access."
              : "No apps yet — ask an admin or staff member for access.",
        }),
        manager ? newAppAction() : null,
        manager ? studioAction() : null,
        usersAction(),
        withdrawnAction(),
      ),
      adminChecklist(),
      manager ? null : memberPointers({ go, openAssistant }),
    );
  }
  return h(
    "div",
    { class: "home" },
    h(
      "section",
      { class: "empty", "aria-labelledby": "empty-title" },
      h("h1", { class: "empty-title", id: "empty-title", text: "Choose an app" }),
      h("p", { text: "Pick an app from the list to open it here, or create a new one. One app is open at a time." }),
      newAppAction(),
      studioAction(),
      usersAction(),
      withdrawnAction(),
    ),
    adminChecklist(),
  );
}

/**
 * A page the person's role does not include: said on the page, the address
 * kept, instead of a silent redirect home.
 */
function showNeedsAdmin(title, reason) {
  setTitle(`${title} needs an admin`);
  const page = needsAdminPage({ title, reason, user: studio.user, go });
  replaceChildren(studio.shell.main, page);
  page.querySelector("h1").focus();
}

/** The Create page: ask the assistant, start from a template, or write it myself. */
async function showCreate() {
  await closeApp();
  renderSidebar(null);
  studio.shell.pane = null;
  setTitle("Create an app");
  const panel = createPanel({ canCreateShared: canCreateApps(), go, openAssistant });
  replaceChildren(studio.shell.main, panel);
  panel.querySelector("h1").focus();
}

/** The New app form in the pane; once created, the app opens. */
async function showNewApp() {
  await closeApp();
  renderSidebar(null);
  studio.shell.pane = null;
  if (!canCreateApps()) {
    showNeedsAdmin(
      "New shared app",
      "A shared app from a template is created by admin and staff members. You can build your own app in App Studio, or ask the assistant, from Create.",
    );
    return;
  }
  setTitle("New app");
  const panel = newAppPanel({
    onCancel: () => go("#/"),
    onUnauthenticated: () => {
      sessionEnded();
    },
    onCreated: async (created) => {
      clearAlert();
      if (!(await loadApps())) {
        return;
      }
      if (!appById(created.app)) {
        // Created but not usable yet (it does not validate): say why.
        const problems = (created.status && created.status.diagnostics) || [];
        showAlert({
          message: `The app ${created.app} was created but cannot be opened yet${problems.length > 0 ? `: ${problems[0].file} ${problems[0].reason}` : "."}`,
          code: problems.length > 0 ? problems[0].code : "",
        });
        go("#/");
        return;
      }
      go(`#/apps/${created.app}`);
    },
  });
  replaceChildren(studio.shell.main, panel);
  const name = panel.querySelector("#new-app-name");
  if (name) {
    name.focus();
  }
}

/**
 * App Studio (everyone): the caller's member apps, with `studioAppId`'s files
 * in its editor. A preview it opens is the open host while it lasts, so
 * leaving the page (closeApp) closes it.
 */
async function showStudio(studioAppId, startNew = false) {
  await closeApp();
  renderSidebar(null);
  studio.shell.pane = null;
  setTitle("App Studio");
  const generation = studio.generation;
  const notice = studio.studioNotice;
  studio.studioNotice = "";
  const panel = appStudioPanel({
    editId: studioAppId,
    startNew,
    notice,
    sandboxOrigin: studio.sandboxOrigin,
    hostVersion: VERSION,
    onOpenApp: (appId) => go(`#/apps/${appId}`),
    onNavigate: (hash, text) => {
      studio.studioNotice = text || "";
      go(hash);
    },
    onAppsChanged: async () => {
      // A member app was made, changed, shared, disabled or deleted: the sidebar follows.
      if (studio.shell && (await loadApps())) {
        renderSidebar(null);
      }
    },
    onPreviewHost: (host) => {
      if (host && generation !== studio.generation) {
        host.close();
        return;
      }
      studio.host = host;
    },
    onUnauthenticated: () => {
      sessionEnded();
    },
  });
  replaceChildren(studio.shell.main, panel);
  panel.querySelector("h1").focus();
}

/** The Withdrawn apps page (admins): restore or delete; the sidebar follows. */
async function showWithdrawn() {
  await closeApp();
  renderSidebar(null);
  studio.shell.pane = null;
  const notice = studio.withdrawnNotice;
  studio.withdrawnNotice = "";
  if (!isAdmin()) {
    showNeedsAdmin("Withdrawn apps", "Withdrawn apps lists the apps an admin has hidden from everyone, to restore or delete them. Only admins can see it.");
    return;
  }
  setTitle("Withdrawn apps");
  // The list of apps changes under the page: a restored app is back, a withdrawn one gone.
  const refresh = async () => {
    if (await loadApps()) {
      renderSidebar(null);
    }
  };
  const panel = withdrawnPanel({
    notice,
    onRestored: refresh,
    onDeleted: refresh,
    onUnauthenticated: () => {
      sessionEnded();
    },
  });
  replaceChildren(studio.shell.main, panel);
  panel.querySelector("h1").focus();
}

/** The Users page (admins): invite, change, disable and remove people. */
async function showUsers() {
  await closeApp();
  renderSidebar(null);
  studio.shell.pane = null;
  if (!isAdmin()) {
    showNeedsAdmin("Users", "Users is where admins invite people, change their roles and remove them. Only admins can open it.");
    return;
  }
  setTitle("Users");
  const panel = usersPanel({
    me: studio.user,
    onUnauthenticated: () => {
      sessionEnded();
    },
  });
  replaceChildren(studio.shell.main, panel);
  panel.querySelector("h1").focus();
}

/** The renders in order: each waits for the one before (which may be closing an app). */
let rendering = Promise.resolve();

/**
 * Draws the current route. Renders run one at a time and each reads the route
 * when it starts, so quick clicks end on the last one without opening every
 * app on the way.
 */
function render() {
  rendering = rendering.then(renderNow, renderNow);
  return rendering;
}

/**
 * Draws the route: the consent card on its own; or the shell with its
 * sidebar and pane (empty state, connected clients, or an open app).
 */
async function renderNow() {
  const current = route();
  if (current.page === "invite") {
    await showInvitation(current.inviteToken, current.resetLink);
    return;
  }
  if (studio.view !== "shell" && studio.view !== "consent") {
    return;
  }
  if (current.page === "connect") {
    await showConsent(current.requestId);
    return;
  }
  if (studio.view === "consent") {
    // Leaving the consent card for the Studio itself.
    buildShell();
    studio.shell.main.focus();
    if (!(await loadApps())) {
      showAppsFailed();
      return;
    }
  }
  if (!studio.shell) {
    return;
  }
  // Any new page closes the phones' menu it was chosen from.
  setMenu(false);
  if (current.page === "create") {
    studio.shell.newAppButton.setAttribute("aria-current", "page");
  } else {
    studio.shell.newAppButton.removeAttribute("aria-current");
  }
  if (current.page === "studio") {
    studio.shell.studioLink.setAttribute("aria-current", "page");
  } else {
    studio.shell.studioLink.removeAttribute("aria-current");
  }
  if (studio.shell.usersLink) {
    if (current.page === "users") {
      studio.shell.usersLink.setAttribute("aria-current", "page");
    } else {
      studio.shell.usersLink.removeAttribute("aria-current");
    }
  }
  if (studio.shell.withdrawnLink) {
    if (current.page === "withdrawn") {
      studio.shell.withdrawnLink.setAttribute("aria-current", "page");
    } else {
      studio.shell.withdrawnLink.removeAttribute("aria-current");
    }
  }
  if (current.page === "new") {
    studio.shell.connectionsLink.removeAttribute("aria-current");
    await showNewApp();
    return;
  }
  if (current.page === "create") {
    studio.shell.connectionsLink.removeAttribute("aria-current");
    await showCreate();
    return;
  }
  if (current.page === "withdrawn") {
    studio.shell.connectionsLink.removeAttribute("aria-current");
    await showWithdrawn();
    return;
  }
  if (current.page === "users") {
    studio.shell.connectionsLink.removeAttribute("aria-current");
    await showUsers();
    return;
  }
  if (current.page === "studio") {
    studio.shell.connectionsLink.removeAttribute("aria-current");
    await showStudio(current.studioAppId, current.studioNew);
    return;
  }
  const onConnections = current.page === "connections";
  if (onConnections) {
    studio.shell.connectionsLink.setAttribute("aria-current", "page");
  } else {
    studio.shell.connectionsLink.removeAttribute("aria-current");
  }
  if (onConnections) {
    await closeApp();
    renderSidebar(null);
    studio.shell.pane = null;
    const panel = connectionsPanel({
      onUnauthenticated: () => {
        sessionEnded();
      },
    });
    replaceChildren(studio.shell.main, panel);
    setTitle("Connected clients");
    panel.querySelector("h1").focus();
    return;
  }
  const { appId, access, recovery, activity, history: historyRoute, draft: draftRoute } = current;
  const app = appId ? appById(appId) : null;
  renderSidebar(app ? app.id : null);
  if (!app) {
    await closeApp();
    if (appId) {
      showAlert({ message: "That app is not available to you.", code: "APP_NOT_FOUND" });
      history.replaceState(null, "", "#/");
    }
    replaceChildren(studio.shell.main, emptyState());
    studio.shell.pane = null;
    return;
  }
  const mode =
    recovery && app.access === ACCESS.MANAGE
      ? "recovery"
      : activity && app.access === ACCESS.MANAGE
        ? "activity"
        : historyRoute && canSeeHistory(app)
        ? "history"
        : draftRoute && canSeeHistory(app)
          ? "draft"
          : "view";
  if (studio.openAppId !== app.id || studio.shell.pane === null || studio.shell.pane.mode !== mode) {
    await openApp(app, false, mode);
  }
  showAccess(access && canManageAccess());
  // A page of the app the person's access does not include is said, not
  // silently swapped for the app itself.
  const asked = recovery ? "Recovery" : activity ? "Activity" : historyRoute ? "History" : draftRoute ? "The draft" : null;
  if (asked && mode === "view") {
    showAlert({ message: `${asked} of ${app.name} is for the people who manage it; here is the app itself.` });
    history.replaceState(null, "", `#/apps/${app.id}`);
  } else if (access && !canManageAccess()) {
    showAlert({ message: `Who may use ${app.name} is changed by an admin or a staff member; here is the app itself.` });
    history.replaceState(null, "", `#/apps/${app.id}`);
  }
}

// ---------------------------------------------------------------------------
// The open app

/** Managers of `app` whose session may write apps: the History and Draft pages' users. */
function canSeeHistory(app) {
  return app.access === ACCESS.MANAGE && canCreateApps();
}

/** The button that turns the app's pane to `target` (History, Draft, …), and back. */
function modeButton(app, mode, target, text, title) {
  const here = mode === target;
  return h("button", {
    type: "button",
    class: "button",
    text: here ? "Back to the app" : text,
    title: here ? null : title,
    onclick: () => go(here ? `#/apps/${app.id}` : `#/apps/${app.id}/${target}`),
  });
}

function appPane(app, mode) {
  const historyButton = canSeeHistory(app) ? modeButton(app, mode, "history", "History", "The app's revisions: see what changed and revert") : null;
  const draftButton = canSeeHistory(app) ? modeButton(app, mode, "draft", "Draft", "The app's draft: review, preview and publish or discard it") : null;
  const recoveryButton = app.access === ACCESS.MANAGE ? modeButton(app, mode, "recovery", "Recovery", "Work with the app's rows directly, without its own view") : null;
  const activityButton = app.access === ACCESS.MANAGE ? modeButton(app, mode, "activity", "Activity", "Who changed the app's data, through what; undo a selection") : null;
  const accessButton = canManageAccess()
    ? h("button", {
        type: "button",
        class: "button",
        text: "Manage access",
        "aria-expanded": "false",
        onclick: () => go(route().access ? `#/apps/${app.id}` : `#/apps/${app.id}/access`),
      })
    : null;
  const withdrawButton = isAdmin()
    ? h("button", {
        type: "button",
        class: "button button-danger",
        text: "Withdraw…",
        title: "Hide the app from everyone, keeping its data, history and grants",
        "aria-expanded": "false",
      })
    : null;
  const closeButton = h("button", { type: "button", class: "button button-quiet", text: "Close app", onclick: () => go("#/") });
  const status = h("p", { class: "status", role: "status", "aria-live": "polite" });
  const alert = h("div", { class: "alert", role: "alert", hidden: true });
  const frameSlot = h("div", { class: "frame-slot" });
  const accessSlot = h("div", { class: "access-slot" });
  const heading = {
    title: h("h1", { class: "app-title", id: "app-title", text: app.name }),
    description: h("p", { class: "app-description", text: app.description }),
    meta: h("p", { class: "app-meta", text: `Version ${app.version} · ${app.access} access` }),
  };
  const lifecycleSlot = h("div", { class: "lifecycle-slot" });
  if (withdrawButton) {
    withdrawButton.addEventListener("click", () => toggleWithdraw(app, withdrawButton, lifecycleSlot));
  }
  const element = h(
    "section",
    { class: "app-view", "aria-labelledby": "app-title" },
    h(
      "header",
      { class: "app-header" },
      h(
        "div",
        { class: "app-heading" },
        heading.title,
        heading.description,
        heading.meta,
      ),
      h("div", { class: "app-actions" }, recoveryButton, activityButton, historyButton, draftButton, accessButton, withdrawButton, closeButton),
    ),
    lifecycleSlot,
    accessSlot,
    status,
    alert,
    frameSlot,
  );
  return { app, mode, element, status, alert, frameSlot, accessSlot, accessButton, accessOpen: false, heading };
}

/**
 * After the apps were read again: the open app's header says what the app is
 * now (a deploy, publish or revert may change its name, description and
 * version), and the tab's title follows.
 */
function refreshPaneHeader() {
  const pane = studio.shell ? studio.shell.pane : null;
  const fresh = pane ? appById(pane.app.id) : null;
  if (!pane || !fresh) {
    return;
  }
  pane.app = fresh;
  pane.heading.title.textContent = fresh.name;
  pane.heading.description.textContent = fresh.description;
  pane.heading.meta.textContent = `Version ${fresh.version} · ${fresh.access} access`;
  if (pane.mode === "view") {
    setTitle(fresh.name);
  }
}

/** Opens or closes the in-pane withdraw confirmation under the app's header. */
function toggleWithdraw(app, button, slot) {
  if (button.getAttribute("aria-expanded") === "true") {
    replaceChildren(slot);
    button.setAttribute("aria-expanded", "false");
    button.focus();
    return;
  }
  const confirm = withdrawConfirm({
    app,
    // Cancel and Escape put the focus back on Withdraw…; work elsewhere keeps it there.
    onCancel: ({ refocus }) => {
      replaceChildren(slot);
      button.setAttribute("aria-expanded", "false");
      if (refocus) {
        button.focus();
      }
    },
    onWithdrawn: async () => {
      // Gone for everyone, admins too: close it, reload the list, show the withdrawn apps.
      await closeApp();
      studio.withdrawnNotice = `Withdrew ${app.name}: it is hidden from everyone until it is restored.`;
      if (await loadApps()) {
        renderSidebar(null);
      }
      go("#/withdrawn");
    },
    onUnauthenticated: () => {
      sessionEnded();
    },
  });
  replaceChildren(slot, confirm.element);
  button.setAttribute("aria-expanded", "true");
  confirm.dismissOn(button);
  confirm.focus();
}

function paneSay(pane, text) {
  pane.status.textContent = text;
}

function paneFail(pane, error, retry) {
  pane.alert.hidden = false;
  replaceChildren(
    pane.alert,
    h("p", {}, errorContent(error)),
    retry ? h("button", { type: "button", class: "button", text: "Try again", onclick: retry }) : null,
  );
  paneSay(pane, "");
}

const STATE_TEXT = {
  loading: (name) => `Starting ${name}…`,
  initializing: (name) => `Starting ${name}…`,
  ready: (name) => `${name} is open.`,
  closing: (name) => `Closing ${name}…`,
  closed: (name) => `${name} is closed.`,
  failed: () => "",
};

/** Closes the open app (teardown, at most two seconds), if any. */
async function closeApp() {
  studio.generation += 1;
  const host = studio.host;
  const pane = studio.shell ? studio.shell.pane : null;
  studio.host = null;
  studio.openAppId = null;
  if (host) {
    await host.close();
  }
  if (pane && studio.shell && studio.shell.pane === pane) {
    studio.shell.pane = null;
  }
}

async function openApp(app, retried = false, mode = "view") {
  await closeApp();
  const generation = studio.generation;
  clearAlert();
  const pane = appPane(app, mode);
  setTitle(mode === "recovery" ? `Recovery of ${app.name}` : mode === "activity" ? `Activity of ${app.name}` : mode === "history" ? `History of ${app.name}` : mode === "draft" ? `Draft of ${app.name}` : app.name);
  studio.openAppId = app.id;
  studio.shell.pane = pane;
  replaceChildren(studio.shell.main, pane.element);
  if (mode === "recovery") {
    // The app's own view stays closed: recovery must work when it is broken.
    const panel = recoveryPanel({
      app,
      me: studio.user,
      onClose: () => go(`#/apps/${app.id}`),
      onUnauthenticated: () => {
        sessionEnded();
      },
    });
    replaceChildren(pane.frameSlot, panel);
    paneSay(pane, `${app.name}'s own view is closed while recovery is open.`);
    const heading = panel.querySelector("h2");
    if (heading) {
      heading.setAttribute("tabindex", "-1");
      heading.focus();
    }
    return;
  }
  if (mode === "activity") {
    // The app's own view stays closed: an undo changes rows under it.
    const panel = activityPanel({
      app,
      onClose: () => go(`#/apps/${app.id}`),
      onUnauthenticated: () => {
        sessionEnded();
      },
    });
    replaceChildren(pane.frameSlot, panel);
    paneSay(pane, `${app.name}'s own view is closed while its activity is open.`);
    return;
  }
  if (mode === "history") {
    // The app's own view stays closed while its files may change under it.
    const panel = historyPanel({
      app,
      onClose: () => go(`#/apps/${app.id}`),
      onReverted: async () => {
        // The app's revision changed: the sidebar and the next open use the new one.
        if (await loadApps()) {
          const fresh = appById(app.id);
          renderSidebar(fresh ? fresh.id : null);
          refreshPaneHeader();
        }
      },
      onUnauthenticated: () => {
        sessionEnded();
      },
    });
    replaceChildren(pane.frameSlot, panel);
    paneSay(pane, `${app.name}'s own view is closed while its history is open.`);
    const heading = panel.querySelector("h2");
    if (heading) {
      heading.setAttribute("tabindex", "-1");
      heading.focus();
    }
    return;
  }
  if (mode === "draft") {
    // The app's own view stays closed: the page may preview the draft instead.
    const panel = draftPanel({
      app,
      sandboxOrigin: studio.sandboxOrigin,
      hostVersion: VERSION,
      userRole: studio.user.role,
      onPreviewHost: (host) => {
        // The preview is the open host while it lasts; closing the app closes it.
        if (host && generation !== studio.generation) {
          host.close();
          return;
        }
        studio.host = host;
      },
      onPublished: async () => {
        // The app's revision changed: the sidebar and the next open use the new one.
        if (await loadApps()) {
          const fresh = appById(app.id);
          renderSidebar(fresh ? fresh.id : null);
          refreshPaneHeader();
        }
      },
      onClose: () => go(`#/apps/${app.id}`),
      onUnauthenticated: () => {
        sessionEnded();
      },
    });
    replaceChildren(pane.frameSlot, panel);
    paneSay(pane, `${app.name}'s own view is closed while its draft is open.`);
    const heading = panel.querySelector("h2");
    if (heading) {
      heading.setAttribute("tabindex", "-1");
      heading.focus();
    }
    return;
  }
  paneSay(pane, `Loading ${app.name}…`);
  let resource;
  try {
    resource = await api.appResource(app.id, app.revision);
  } catch (error) {
    if (generation !== studio.generation) {
      return;
    }
    if (error.status === 401) {
      await sessionEnded();
      return;
    }
    if (error.status === 404 && !retried) {
      // The app changed (a new revision) or access went away: look again.
      if (await loadApps()) {
        const fresh = appById(app.id);
        renderSidebar(fresh ? fresh.id : null);
        if (fresh && fresh.revision !== app.revision) {
          await openApp(fresh, true, mode);
          return;
        }
        if (!fresh) {
          paneFail(pane, { message: "This app is no longer available to you.", code: error.code });
          return;
        }
      }
    }
    paneFail(pane, error, () => reopen(app.id));
    return;
  }
  if (generation !== studio.generation) {
    return;
  }
  const host = createHost({
    iframeParent: pane.frameSlot,
    sandboxOrigin: studio.sandboxOrigin,
    app: { id: app.id, revision: app.revision, name: app.name },
    resource,
    hostVersion: VERSION,
    // The open app is the page's subject: its frame takes its whole height.
    fullHeight: true,
    onStateChange: (state) => {
      if (state === "ready") {
        markOpened(studio.user.id);
      }
      const text = STATE_TEXT[state];
      if (text) {
        paneSay(pane, text(app.name));
      }
    },
    onError: (envelope) => paneFail(pane, envelope, () => reopen(app.id)),
    onAccessLost: () => accessLost(app, host, generation, pane),
    onUnauthenticated: () => {
      sessionEnded();
    },
  });
  studio.host = host;
}

/**
 * After a refusal that can mean the person lost `app` (a revoked grant, a
 * withdrawn or deleted app): reads the apps again and, when it is gone,
 * closes it with a plain sentence and refreshes the sidebar. A refusal of
 * one action of an app the person still has leaves the app open.
 */
async function accessLost(app, host, generation, pane) {
  if (!(await loadApps()) || generation !== studio.generation || studio.host !== host) {
    return;
  }
  if (appById(app.id)) {
    return;
  }
  studio.host = null;
  await host.close();
  renderSidebar(null);
  paneFail(pane, { message: `Your access to ${app.name} was removed.` });
}

/** Opens `appId` afresh (after a failure), if it is still the route's app. */
function reopen(appId) {
  if (studio.shell && route().appId === appId) {
    studio.shell.pane = null;
    render();
  }
}

function showAccess(open) {
  const pane = studio.shell ? studio.shell.pane : null;
  if (!pane || pane.accessOpen === open) {
    return;
  }
  pane.accessOpen = open;
  if (pane.accessButton) {
    pane.accessButton.setAttribute("aria-expanded", String(open));
    pane.accessButton.textContent = open ? "Hide access" : "Manage access";
  }
  if (!open) {
    const hadFocus = pane.accessSlot.contains(document.activeElement);
    pane.accessSlot.textContent = "";
    if (hadFocus && pane.accessButton) {
      pane.accessButton.focus();
    }
    return;
  }
  const panel = accessPanel({
    app: pane.app,
    otherApps: studio.apps,
    currentUserId: studio.user.id,
    onClose: () => go(`#/apps/${pane.app.id}`),
    onUnauthenticated: () => {
      sessionEnded();
    },
    onChanged: async (userId) => {
      if (userId === studio.user.id) {
        // The caller's own access changed: the sidebar may change too.
        await loadApps();
        render();
      }
    },
  });
  replaceChildren(pane.accessSlot, panel);
  const heading = panel.querySelector("h2");
  if (heading) {
    heading.setAttribute("tabindex", "-1");
    heading.focus();
  }
}

// ---------------------------------------------------------------------------

window.addEventListener("hashchange", () => {
  render();
});

darkScheme.addEventListener("change", () => {
  if (studio.host) {
    const theme = darkScheme.matches ? "dark" : "light";
    studio.host.updateHostContext({ theme, styles: { variables: styleVariables(theme) } });
  }
});

// Closing the tab: ask the view to tear down (best effort; the page is going).
window.addEventListener("pagehide", () => {
  if (studio.host) {
    studio.host.close();
  }
});

boot();
