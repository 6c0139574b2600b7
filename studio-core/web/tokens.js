// How to connect an MCP client, on the Connected clients page: the MCP URL,
// the setup for clients that sign in with OAuth, and the person's own
// personal access tokens for clients that cannot (make one, see when each was
// last used, revoke one).
//
// A new token's secret is shown once, inside the ready-to-paste setup, and
// kept nowhere else: the server stores only its hash, and the list never
// shows it.

import * as api from "./api.js";
import { copyButton, errorText, fieldError, h, panelMessages, replaceChildren } from "./dom.js";
import { SCOPES } from "./vocabulary.js";

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

/** The setup of a client that signs in with OAuth: only the URL. */
export function oauthSetup(mcpUrl) {
  return JSON.stringify({ mcpServers: { sasha: { type: "http", url: mcpUrl } } }, null, 2);
}

/** The setup of a client with a bearer token. */
export function tokenSetup(mcpUrl, secret) {
  return JSON.stringify(
    { mcpServers: { sasha: { type: "http", url: mcpUrl, headers: { Authorization: `Bearer ${secret}` } } } },
    null,
    2,
  );
}

function snippet(id, text, label) {
  return h(
    "div",
    { class: "stack" },
    h("pre", { class: "setup-snippet", id, tabindex: "0", "aria-label": label }, h("code", { text })),
    h("div", {}, copyButton(() => text, "Copy setup")),
  );
}

/**
 * The "Connect a client" and "Personal access tokens" sections; starts
 * loading at once. `options`: `{scopeTitle(scope), onUnauthenticated(),
 * confirm(question)}`; `scopeTitle` gives a scope's plain words.
 */
export function connectSections(options = {}) {
  const scopeTitle = options.scopeTitle || ((scope) => scope);
  const onUnauthenticated = options.onUnauthenticated || (() => {});
  const confirm = options.confirm || ((question) => window.confirm(question));
  const status = h("p", { class: "status", role: "status", "aria-live": "polite" });
  const alert = h("div", { class: "alert", role: "alert", hidden: true });
  const { say, fail, clearAlert } = panelMessages(status, alert, { onUnauthenticated });
  const setup = h("section", { class: "connect-section", "aria-labelledby": "connect-heading" });
  const tokens = h("section", { class: "connect-section", "aria-labelledby": "tokens-heading" });
  let info = null;

  function renderSetup() {
    replaceChildren(
      setup,
      h("h2", { id: "connect-heading", text: "Connect a client" }),
      h("p", { text: "MCP clients, such as Claude or ChatGPT, reach Sasha at:" }),
      h("div", { class: "copy-row" }, h("code", { class: "mcp-url", text: info.mcpUrl }), copyButton(() => info.mcpUrl, "Copy URL")),
      h("h3", { text: "Clients that sign in (OAuth)" }),
      h("p", { text: "Add Sasha as a custom connector with the URL above. The client opens Sasha Studio, you sign in and choose what it may do, and it appears under Connected clients. Clients configured by a file take:" }),
      snippet("setup-oauth", oauthSetup(info.mcpUrl), "Setup for a client that signs in"),
      h("h3", { text: "Clients with a token" }),
      h("p", { text: "For a script or a client without OAuth, make a personal access token below; its setup is shown once, ready to paste." }),
    );
  }

  function renderTokens(list) {
    const label = h("input", { id: "token-label", type: "text", maxlength: 80, autocomplete: "off", placeholder: "e.g. Laptop script" });
    const labelError = fieldError(label, "token-label-error");
    const boxes = info.scopes.map((scope) =>
      h("input", { type: "checkbox", id: `token-scope-${scope.replace(":", "-")}`, value: scope, checked: scope === SCOPES.APPS_INVOKE }),
    );
    const scopeSet = h(
      "fieldset",
      { class: "scope-choices", "aria-describedby": "token-scopes-error" },
      h("legend", { text: "It may" }),
      boxes.map((box) => h("label", { class: "field-inline", for: box.id }, box, scopeTitle(box.value))),
    );
    const scopesError = h("p", { class: "field-error", id: "token-scopes-error", hidden: true });
    const days = h("input", { id: "token-days", type: "number", min: 1, max: info.maxDays, value: info.defaultDays, inputmode: "numeric" });
    const daysError = fieldError(days, "token-days-error");
    const make = h("button", { type: "submit", class: "button button-primary", text: "Make token" });
    const secretBox = h("div", { class: "token-secret", hidden: true });

    const showScopesError = (text) => {
      scopesError.hidden = false;
      scopesError.textContent = text;
    };

    async function submit() {
      clearAlert();
      labelError.clear();
      daysError.clear();
      scopesError.hidden = true;
      const name = label.value.trim();
      const scopes = boxes.filter((box) => box.checked).map((box) => box.value);
      const lifetime = Number(days.value);
      if (name === "") {
        labelError.show("Name the token after where you will use it.");
        label.focus();
        return;
      }
      if (scopes.length === 0) {
        showScopesError("Tick at least one thing the token may do.");
        boxes[0].focus();
        return;
      }
      if (!Number.isInteger(lifetime) || lifetime < 1 || lifetime > info.maxDays) {
        daysError.show(`Between 1 and ${info.maxDays} days.`);
        days.focus();
        return;
      }
      make.disabled = true;
      say(`Making ${name}…`);
      let made;
      try {
        made = await api.createToken(name, scopes, lifetime);
      } catch (error) {
        make.disabled = false;
        say("");
        const field = error.details && error.details.field;
        if (field === "label") {
          labelError.show(errorText(error));
          label.focus();
        } else if (field === "scopes") {
          showScopesError(errorText(error));
        } else if (field === "expiresInDays") {
          daysError.show(errorText(error));
          days.focus();
        } else {
          fail(error);
        }
        return;
      }
      await load(`${name} is made.`);
      showSecret(name, made.secret);
    }

    function showSecret(name, secret) {
      const box = tokens.querySelector(".token-secret");
      replaceChildren(
        box,
        h("p", {}, h("strong", { text: `The setup for ${name}` }), " — copy it now: the token is not shown again."),
        snippet("setup-token", tokenSetup(info.mcpUrl, secret), `Setup with the token ${name}`),
      );
      box.hidden = false;
      box.querySelector("pre").focus();
    }

    const table =
      list.length === 0
        ? h("p", { class: "empty-inline", text: "You have no personal access tokens." })
        : h(
            "table",
            { class: "grants-table connections-table tokens-table" },
            h("caption", { class: "visually-hidden", text: "Your personal access tokens" }),
            h(
              "thead",
              {},
              h(
                "tr",
                {},
                h("th", { scope: "col", text: "Token" }),
                h("th", { scope: "col", text: "It may" }),
                h("th", { scope: "col", text: "Made" }),
                h("th", { scope: "col", text: "Last used" }),
                h("th", { scope: "col", text: "Expires" }),
                h("th", { scope: "col" }, h("span", { class: "visually-hidden", text: "Actions" })),
              ),
            ),
            h(
              "tbody",
              {},
              list.map((token) => {
                const name = token.label || `Token ${token.id} (made by an operator)`;
                const revoke = h("button", {
                  type: "button",
                  class: "button button-quiet button-danger",
                  text: "Revoke",
                  "aria-label": `Revoke ${name}`,
                  onclick: async () => {
                    if (!confirm(`Revoke ${name}? Anything using it stops working at once.`)) {
                      return;
                    }
                    clearAlert();
                    revoke.disabled = true;
                    say(`Revoking ${name}…`);
                    try {
                      await api.revokeToken(token.id);
                    } catch (error) {
                      if (error.status !== 404) {
                        revoke.disabled = false;
                        fail(error);
                        return;
                      }
                    }
                    await load(`${name} is revoked.`);
                    tokens.querySelector("h2").focus();
                  },
                });
                return h(
                  "tr",
                  { dataset: { token: String(token.id) } },
                  h("td", {}, h("span", { class: "grant-name", text: name })),
                  h("td", { dataset: { label: "It may" } }, token.scopes.split(" ").map(scopeTitle).join(", ")),
                  h("td", { dataset: { label: "Made" } }, when(token.createdAt, "—")),
                  h("td", { dataset: { label: "Last used" } }, when(token.lastUsedAt, "Not yet")),
                  h("td", { dataset: { label: "Expires" } }, when(token.expiresAt, "Never")),
                  h("td", { class: "grant-actions" }, revoke),
                );
              }),
            ),
          );

    replaceChildren(
      tokens,
      h("h2", { id: "tokens-heading", tabindex: "-1", text: "Personal access tokens" }),
      table,
      h(
        "form",
        {
          class: "grant-form",
          novalidate: true,
          onsubmit: (event) => {
            event.preventDefault();
            submit();
          },
        },
        h("h3", { text: "Make a token" }),
        h("div", { class: "field" }, h("label", { for: "token-label", text: "Name" }), label, labelError.element),
        scopeSet,
        scopesError,
        h("div", { class: "field" }, h("label", { for: "token-days", text: "Expires after (days)" }), days, daysError.element),
        h("div", {}, make),
      ),
      secretBox,
    );
  }

  async function load(message) {
    // `message` is announced once the list shows the change it describes.
    say(message ? "Updating your tokens…" : "Loading your tokens…");
    let answer;
    try {
      answer = await api.listTokens();
    } catch (error) {
      fail(error);
      return;
    }
    const first = info === null;
    info = answer;
    if (first) {
      renderSetup();
    }
    renderTokens(answer.tokens);
    say(message || "");
  }

  load();
  return h("div", { class: "stack connect-sections" }, status, alert, setup, tokens);
}
