// MCP clients connecting as the signed-in user (OAuth 2.1): the consent card
// an authorization request lands on (`#/connect/<requestId>`), and the
// "Connected clients" page (`#/connections`): how to connect a client
// (tokens.js), the connected ones, each with Revoke, and the person's own
// personal access tokens.
//
// The consent card says who is asking (the client's own, self-chosen name),
// where the browser goes afterwards (the redirect host, prominently: a
// look-alike name cannot fake it), what the client will reach (the MCP
// resource), and offers one checkbox per scope the user's role may hold.
// Scopes the role cannot hold are listed, never offered. Allow and Deny both
// end in the client's redirect, which the server builds.

import * as api from "./api.js";
import { h, panelMessages, replaceChildren } from "./dom.js";
import { connectSections } from "./tokens.js";
import { SCOPES } from "./vocabulary.js";

/** Plain-language words for the scopes Sasha offers MCP clients. */
const SCOPE_WORDS = {
  [SCOPES.APPS_INVOKE]: {
    title: "Use your apps",
    description:
      "Open the apps you have access to, and read and change their data as you can in Studio.",
  },
  [SCOPES.APPS_WRITE]: {
    title: "Change how apps are built",
    description:
      "Read, change and delete the source files of the apps you manage, and check them for errors. Needs “Use your apps” too.",
  },
  [SCOPES.APPS_AUTHOR]: {
    title: "Build your own apps",
    description: "Make, change, share and delete apps of your own, each change with your approval.",
  },
};

function scopeTitle(scope) {
  return SCOPE_WORDS[scope] ? SCOPE_WORDS[scope].title : scope;
}

/** "a", "a and b", "a, b and c". */
function listText(items) {
  if (items.length <= 1) {
    return items.join("");
  }
  return `${items.slice(0, -1).join(", ")} and ${items[items.length - 1]}`;
}

function dateTime(unix) {
  const date = new Date(unix * 1000);
  return h("time", {
    datetime: date.toISOString(),
    text: date.toLocaleString(undefined, { dateStyle: "medium", timeStyle: "short" }),
  });
}

let cardCount = 0;

/**
 * The consent card for one authorization request; starts loading it at once.
 *
 * `options`: `{requestId, user, onUnauthenticated(), onSwitchUser(),
 * onLeave(), navigate(url)}`. `user` is the signed-in user (`{username,
 * role}`); `onSwitchUser` (optional) signs out keeping the route, `onLeave`
 * goes to the Studio home; `navigate` defaults to `window.location.assign`.
 */
export function consentCard(options) {
  const { requestId, user } = options;
  const onUnauthenticated = options.onUnauthenticated || (() => {});
  const onLeave = options.onLeave || (() => {});
  const navigate = options.navigate || ((url) => window.location.assign(url));
  cardCount += 1;
  const ids = {
    heading: `consent-heading-${cardCount}`,
    scopes: `consent-scopes-${cardCount}`,
  };
  const heading = h("h1", { class: "card-title", id: ids.heading, tabindex: "-1", text: "Connect a client" });
  const status = h("p", { class: "status", role: "status", "aria-live": "polite" });
  const alert = h("div", { class: "alert", role: "alert", hidden: true });
  const body = h("div", { class: "stack" });
  const card = h(
    "section",
    { class: "card consent-card", "aria-labelledby": ids.heading },
    h("p", { class: "brand brand-large", text: "Sasha Studio" }),
    heading,
    body,
    alert,
    status,
  );

  const { say, fail, clearAlert } = panelMessages(status, alert);

  function focusHeading() {
    if (card.isConnected) {
      heading.focus();
    }
  }

  /** Unknown, expired or already answered: the hidden 404. */
  function showGone() {
    clearAlert();
    say("");
    heading.textContent = "This connection request has expired";
    replaceChildren(
      body,
      h("p", {
        class: "consent-gone",
        text: "This connection request has expired or was already used; start again from your client.",
      }),
      h("button", { type: "button", class: "button", text: "Go to Sasha Studio", onclick: onLeave }),
    );
    focusHeading();
  }

  function showLoadFailure(error) {
    heading.textContent = "The connection request could not be loaded";
    replaceChildren(
      body,
      h("button", {
        type: "button",
        class: "button button-primary",
        text: "Try again",
        onclick: () => {
          clearAlert();
          replaceChildren(body);
          load();
        },
      }),
    );
    fail(error);
    focusHeading();
  }

  async function load() {
    say("Loading the connection request…");
    let pending;
    try {
      pending = await api.oauthRequest(requestId);
    } catch (error) {
      if (error.status === 401) {
        onUnauthenticated();
      } else if (error.status === 404) {
        showGone();
      } else {
        showLoadFailure(error);
      }
      return;
    }
    showRequest(pending);
  }

  function showRequest(pending) {
    const clientName = (pending.client && pending.client.name) || "An unnamed client";
    const redirectHost = pending.redirectHost || "";
    const offered = Array.isArray(pending.offeredScopes) ? pending.offeredScopes : [];
    const unavailable = Array.isArray(pending.unavailableScopes) ? pending.unavailableScopes : [];
    const requested = Array.isArray(pending.requestedScopes) ? pending.requestedScopes : [];
    heading.textContent = `Connect ${clientName} to Sasha?`;

    const boxes = [];
    const choices = offered.map((offer, index) => {
      const boxId = `consent-scope-${cardCount}-${index}`;
      const descriptionId = `${boxId}-description`;
      const known = SCOPE_WORDS[offer.scope];
      const description = known
        ? known.description
        : typeof offer.description === "string" && offer.description !== ""
          ? offer.description
          : "No description.";
      // What the client asked for is ticked; with no scope asked for at all,
      // only the least: using apps.
      const preChecked = requested.length === 0 ? offer.scope === SCOPES.APPS_INVOKE : Boolean(offer.requested);
      const box = h("input", {
        type: "checkbox",
        id: boxId,
        name: "scope",
        value: offer.scope,
        checked: preChecked,
        "aria-describedby": descriptionId,
      });
      boxes.push(box);
      return h(
        "div",
        { class: "scope-option" },
        box,
        h(
          "div",
          { class: "scope-text" },
          h(
            "label",
            { for: boxId },
            h("span", { class: "scope-title", text: scopeTitle(offer.scope) }),
            " ",
            h("code", { class: "scope-code", text: offer.scope }),
          ),
          h(
            "p",
            { class: "scope-description", id: descriptionId },
            description,
            offer.requested ? null : h("span", { class: "scope-unasked", text: " The client did not ask for this." }),
          ),
        ),
      );
    });

    const note =
      unavailable.length > 0
        ? h(
            "div",
            { class: "consent-note", role: "note" },
            h("p", {
              text:
                `${clientName} asked for ${listText(unavailable)}, which your role cannot hold` +
                ` (${listText(unavailable.map((scope) => scopeTitle(scope).toLowerCase()))}).` +
                " It will not get " +
                (unavailable.length === 1 ? "it." : "them."),
            }),
          )
        : null;

    const allow = h("button", { type: "submit", class: "button button-primary", text: "Allow" });
    const deny = h("button", { type: "button", class: "button", text: "Deny", onclick: () => answer("deny") });

    function busy(on) {
      allow.disabled = on || boxes.length === 0;
      deny.disabled = on;
      for (const box of boxes) {
        box.disabled = on;
      }
    }

    function answerFailed(error) {
      if (error && error.status === 401) {
        onUnauthenticated();
        return;
      }
      if (error && error.status === 404) {
        showGone();
        return;
      }
      busy(false);
      fail(error);
    }

    async function answer(kind) {
      clearAlert();
      let scopes = [];
      if (kind === "allow") {
        scopes = boxes.filter((box) => box.checked).map((box) => box.value);
        if (scopes.length === 0) {
          fail({ message: `Tick at least one thing ${clientName} may do, or choose Deny.` });
          if (boxes[0]) {
            boxes[0].focus();
          }
          return;
        }
        if (scopes.includes(SCOPES.APPS_WRITE) && !scopes.includes(SCOPES.APPS_INVOKE)) {
          fail({ message: "“Change how apps are built” works only together with “Use your apps”: tick both, or only “Use your apps”." });
          const invoke = boxes.find((box) => box.value === SCOPES.APPS_INVOKE);
          if (invoke) {
            invoke.focus();
          }
          return;
        }
      }
      busy(true);
      say(kind === "allow" ? `Allowing ${clientName}…` : `Denying ${clientName}…`);
      let answered;
      try {
        answered =
          kind === "allow"
            ? await api.approveOAuthRequest(requestId, scopes)
            : await api.denyOAuthRequest(requestId);
      } catch (error) {
        answerFailed(error);
        return;
      }
      if (!answered || typeof answered.redirectTo !== "string") {
        busy(false);
        fail({ message: "Studio did not say where to return you. Start again from your client." });
        return;
      }
      say(
        kind === "allow"
          ? `Allowed. Returning you to ${redirectHost}…`
          : `Denied. Returning you to ${redirectHost}…`,
      );
      navigate(answered.redirectTo);
    }

    const signedIn = h(
      "p",
      { class: "consent-account" },
      h("span", {}, "Signed in as ", h("strong", { text: user ? user.username : "" }), user && user.role ? ` (${user.role})` : ""),
      options.onSwitchUser
        ? h("button", {
            type: "button",
            class: "button button-quiet button-inline",
            text: "Use another account",
            onclick: () => options.onSwitchUser(),
          })
        : null,
    );

    const form = h(
      "form",
      {
        class: "stack",
        novalidate: true,
        onsubmit: (event) => {
          event.preventDefault();
          answer("allow");
        },
      },
      offered.length > 0
        ? h(
            "fieldset",
            { class: "scope-list", id: ids.scopes },
            h("legend", { text: `Allow ${clientName} to:` }),
            choices,
          )
        : h("p", {
            class: "consent-note",
            role: "note",
            text: `Your role cannot give ${clientName} anything it can use. You can only deny it.`,
          }),
      note,
      h("div", { class: "consent-actions" }, allow, deny),
    );

    const expires =
      typeof pending.expiresAt === "number"
        ? h("p", { class: "hint" }, "This request expires at ", dateTime(pending.expiresAt), ".")
        : null;

    replaceChildren(
      body,
      signedIn,
      h(
        "div",
        { class: "consent-redirect" },
        h("p", { text: "Whether you allow or deny it, this will return you to" }),
        h("p", { class: "consent-host", text: redirectHost }),
        pending.redirectUri ? h("p", { class: "hint consent-uri", text: pending.redirectUri }) : null,
      ),
      h(
        "p",
        { class: "hint" },
        `If you allow it, ${clientName} reaches Sasha's MCP endpoint `,
        h("code", { class: "consent-resource", text: pending.resource || "" }),
        " as you, with your access to apps. Allow it only if you just started connecting this client.",
      ),
      form,
      expires,
    );
    busy(false);
    say("");
    focusHeading();
  }

  load();
  return card;
}

/**
 * The "Connected clients" page: the signed-in user's connected MCP clients,
 * each with a Revoke button. Starts loading at once.
 *
 * `options`: `{onUnauthenticated(), confirm(question)}`; `confirm` defaults
 * to `window.confirm`.
 */
export function connectionsPanel(options = {}) {
  const onUnauthenticated = options.onUnauthenticated || (() => {});
  const confirm = options.confirm || ((question) => window.confirm(question));
  const heading = h("h1", { id: "connections-heading", tabindex: "-1", text: "Connected clients" });
  const status = h("p", { class: "status", role: "status", "aria-live": "polite" });
  const alert = h("div", { class: "alert", role: "alert", hidden: true });
  const list = h("div", { class: "grants" });

  const { say, fail, clearAlert } = panelMessages(status, alert, { onUnauthenticated });

  function countText(count) {
    if (count === 0) {
      return "No clients are connected.";
    }
    return count === 1 ? "1 client is connected." : `${count} clients are connected.`;
  }

  // `message` is announced once the list shows the change it describes.
  async function load(message) {
    say(message ? "Updating your connected clients…" : "Loading your connected clients…");
    let connections;
    try {
      ({ connections } = await api.listConnections());
    } catch (error) {
      fail(error);
      if (!(error && error.status === 401)) {
        replaceChildren(
          list,
          h("button", {
            type: "button",
            class: "button",
            text: "Try again",
            onclick: () => {
              clearAlert();
              load();
            },
          }),
        );
      }
      return;
    }
    render(connections);
    say(message ? `${message} ${countText(connections.length)}` : countText(connections.length));
  }

  function render(connections) {
    if (connections.length === 0) {
      replaceChildren(
        list,
        h("p", {
          class: "empty-inline",
          text: "No clients are connected. When an AI assistant or another MCP client connects to Sasha as you, it is listed here.",
        }),
      );
      return;
    }
    const rows = connections
      .slice()
      .sort((a, b) => (b.connectedAt || 0) - (a.connectedAt || 0))
      .map((connection) => row(connection));
    replaceChildren(
      list,
      h(
        "table",
        { class: "grants-table connections-table" },
        h("caption", { class: "visually-hidden", text: "Clients connected to Sasha as you" }),
        h(
          "thead",
          {},
          h(
            "tr",
            {},
            h("th", { scope: "col", text: "Client" }),
            h("th", { scope: "col", text: "Returns to" }),
            h("th", { scope: "col", text: "Allowed to" }),
            h("th", { scope: "col", text: "Connected" }),
            h("th", { scope: "col", text: "Last used" }),
            h("th", { scope: "col" }, h("span", { class: "visually-hidden", text: "Actions" })),
          ),
        ),
        h("tbody", {}, rows),
      ),
    );
  }

  function row(connection) {
    const name = connection.clientName || "An unnamed client";
    const revokeButton = h("button", {
      type: "button",
      class: "button button-quiet button-danger",
      text: "Revoke",
      "aria-label": `Revoke ${name}`,
      onclick: () => revoke(connection, name, revokeButton),
    });
    const scopes = Array.isArray(connection.scopes) ? connection.scopes : [];
    return h(
      "tr",
      {},
      h(
        "td",
        {},
        h("span", { class: "grant-name", text: name }),
        connection.clientId ? h("code", { class: "grant-id", text: connection.clientId }) : null,
      ),
      h("td", { dataset: { label: "Returns to" } }, h("span", { class: "connection-host", text: connection.redirectHost || "" })),
      h(
        "td",
        { dataset: { label: "Allowed to" } },
        h(
          "ul",
          { class: "connection-scopes", role: "list" },
          scopes.map((scope) =>
            h("li", {}, scopeTitle(scope), " ", h("code", { class: "scope-code", text: scope })),
          ),
        ),
      ),
      h("td", { dataset: { label: "Connected" } }, connection.connectedAt ? dateTime(connection.connectedAt) : "—"),
      h("td", { dataset: { label: "Last used" } }, connection.lastUsedAt ? dateTime(connection.lastUsedAt) : "Not yet"),
      h("td", { class: "grant-actions" }, revokeButton),
    );
  }

  async function revoke(connection, name, button) {
    const question = `Revoke ${name}? It stops working at once and has to ask you again before it can reach Sasha as you.`;
    if (!confirm(question)) {
      return;
    }
    clearAlert();
    button.disabled = true;
    say(`Revoking ${name}…`);
    try {
      await api.revokeConnection(connection.id);
    } catch (error) {
      if (error && error.status === 404) {
        // Revoked elsewhere meanwhile (another tab, or the client itself).
        await load(`${name} was already disconnected.`);
        heading.focus();
        return;
      }
      button.disabled = false;
      fail(error);
      return;
    }
    await load(`${name} is disconnected.`);
    // Its row (and the focused button) is gone: focus goes back to the page's heading.
    heading.focus();
  }

  const panel = h(
    "section",
    { class: "panel connections-panel", "aria-labelledby": "connections-heading" },
    h("div", { class: "panel-header" }, heading),
    h("p", {
      class: "hint",
      text: "Clients you have allowed to use Sasha as you, such as AI assistants. Revoking one stops it at once; to connect again it has to ask you again.",
    }),
    status,
    alert,
    list,
    connectSections({ scopeTitle, onUnauthenticated, confirm }),
  );
  load();
  return panel;
}
