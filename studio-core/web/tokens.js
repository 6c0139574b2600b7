// How to connect an MCP client, on the Connected clients page: the MCP URL,
// steps for each client people use (Claude Desktop, claude.ai, ChatGPT, VS
// Code, Cursor), each snippet made from this server's own MCP URL; a plain
// note on what hosted clients need (a public https address, which they reach
// from their own servers) and what to do on a local Studio; the setup for
// other clients that sign in with OAuth; and the person's own personal
// access tokens for clients that cannot (make one, see when each was last
// used, revoke one).
//
// A new token's secret is shown once, inside the ready-to-paste setup, and
// kept nowhere else: the server stores only its hash, and the list never
// shows it.

import * as api from "./api.js";
import { copyButton, errorMessage, fieldError, h, panelMessages, replaceChildren } from "./dom.js";
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

/**
 * Whether hosted clients (claude.ai, ChatGPT, Claude's custom connectors),
 * which connect from their own servers on the internet, can reach `url`:
 * https on a name that is not this computer's or a private network's.
 */
export function reachableFromInternet(url) {
  let parsed;
  try {
    parsed = new URL(url);
  } catch {
    return false;
  }
  if (parsed.protocol !== "https:") {
    return false;
  }
  const host = parsed.hostname.replace(/^\[|\]$/g, "").toLowerCase();
  const local =
    host === "localhost" ||
    host.endsWith(".localhost") ||
    host.endsWith(".local") ||
    host.endsWith(".internal") ||
    host === "::1" ||
    /^127\./.test(host) ||
    /^10\./.test(host) ||
    /^192\.168\./.test(host) ||
    /^172\.(1[6-9]|2\d|3[01])\./.test(host) ||
    /^169\.254\./.test(host) ||
    /^f[cd][0-9a-f]{2}:/.test(host) ||
    /^fe80:/.test(host);
  return !local;
}

/**
 * The setup of each client people use, from this server's `mcpUrl`:
 * `[{id, name, hosted, steps: [text], snippet: {text, label} | null, note}]`.
 * `hosted` clients connect from their own servers (they need a public https
 * URL); the others connect from this computer.
 */
export function clientGuides(mcpUrl) {
  const json = (value) => JSON.stringify(value, null, 2);
  // mcp-remote refuses plain http except on this computer unless told.
  const loopback = /^http:\/\/(localhost|127\.0\.0\.1|\[::1\])(:\d+)?\//.test(mcpUrl);
  const remoteArgs = ["-y", "mcp-remote", mcpUrl, ...(mcpUrl.startsWith("http:") && !loopback ? ["--allow-http"] : [])];
  return [
    {
      id: "claude-desktop",
      name: "Claude Desktop",
      hosted: false,
      steps: [
        "In Claude Desktop open Settings, then Developer, then Edit Config; it opens claude_desktop_config.json.",
        "Add Sasha as below (Node.js must be installed: npx runs the small mcp-remote bridge), save, and restart Claude Desktop.",
        "Claude opens Sasha Studio in your browser: sign in and choose what it may do.",
      ],
      snippet: { text: json({ mcpServers: { sasha: { command: "npx", args: remoteArgs } } }), label: "claude_desktop_config.json for Claude Desktop" },
      note: "With a public https address you can instead add it like claude.ai does: Settings, then Connectors, then Add custom connector.",
    },
    {
      id: "claude-ai",
      name: "claude.ai",
      hosted: true,
      steps: [
        "On claude.ai open Settings, then Connectors, then Add custom connector.",
        "Name it Sasha and paste the MCP URL above, then Add.",
        "Choose Connect: Sasha Studio opens; sign in and choose what it may do. In a chat, turn Sasha on from the tools menu.",
      ],
      snippet: null,
      note: "",
    },
    {
      id: "chatgpt",
      name: "ChatGPT",
      hosted: true,
      steps: [
        "In ChatGPT open Settings, then Apps & Connectors, then Advanced settings, and turn on Developer mode.",
        "Back in Apps & Connectors choose Create: name it Sasha, paste the MCP URL above, choose OAuth for authentication, and confirm you trust it.",
        "ChatGPT opens Sasha Studio: sign in and choose what it may do. In a chat, pick Sasha from the tools (+) menu.",
      ],
      snippet: null,
      note: "",
    },
    {
      id: "vscode",
      name: "VS Code",
      hosted: false,
      steps: [
        "Create .vscode/mcp.json in your project (or run “MCP: Open User Configuration” from the Command Palette for every project) with the setup below.",
        "Choose Start above the sasha entry: VS Code opens Sasha Studio; sign in and choose what it may do.",
        "Sasha's tools appear in Copilot Chat's agent mode.",
      ],
      snippet: { text: json({ servers: { sasha: { type: "http", url: mcpUrl } } }), label: ".vscode/mcp.json for VS Code" },
      note: "",
    },
    {
      id: "cursor",
      name: "Cursor",
      hosted: false,
      steps: [
        "Open Cursor Settings, then Tools & MCP, then New MCP Server; it opens ~/.cursor/mcp.json (or use .cursor/mcp.json in a project).",
        "Add the setup below and save.",
        "Sasha shows Needs login: choose it, sign in to Sasha Studio and choose what Cursor may do.",
      ],
      snippet: { text: json({ mcpServers: { sasha: { url: mcpUrl } } }), label: "mcp.json for Cursor" },
      note: "",
    },
  ];
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

  function hostedNote() {
    const url = info.mcpUrl;
    if (reachableFromInternet(url)) {
      return h(
        "div",
        { class: "callout hosted-note", id: "hosted-note" },
        h("p", { text: "claude.ai and ChatGPT connect to Sasha from their own servers on the internet. This address is public https, so they can reach it." }),
      );
    }
    return h(
      "div",
      { class: "callout hosted-note hosted-note-local", id: "hosted-note" },
      h("p", {}, h("strong", { text: "claude.ai and ChatGPT need a public https address. " }), `They connect to Sasha from their own servers on the internet, and cannot reach ${url}, which only this computer or your network can.`),
      h(
        "p",
        { text: "To use them, serve Sasha at a public https address (your organisation's reverse proxy, or a tunnel while you try it out) and set SASHA_PUBLIC_ORIGIN to that address (or MCP_PUBLIC_ORIGIN, for MCP clients only). Until then, connect Claude Desktop, VS Code or Cursor on this computer: they reach it from here." },
      ),
    );
  }

  function clientSection(guide) {
    return h(
      "details",
      { class: "client-guide", id: `client-${guide.id}`, dataset: { client: guide.id } },
      h("summary", {}, h("span", { class: "client-name", text: guide.name }), h("span", { class: "client-where", text: guide.hosted ? " · connects from the internet: needs public https" : " · connects from this computer" })),
      h("ol", { class: "client-steps" }, guide.steps.map((step) => h("li", { text: step }))),
      guide.snippet ? snippet(`setup-${guide.id}`, guide.snippet.text, guide.snippet.label) : null,
      guide.note ? h("p", { class: "hint", text: guide.note }) : null,
    );
  }

  function renderSetup() {
    replaceChildren(
      setup,
      h("h2", { id: "connect-heading", text: "Connect a client" }),
      h("p", { text: "MCP clients, such as Claude or ChatGPT, reach Sasha at:" }),
      h("div", { class: "copy-row" }, h("code", { class: "mcp-url", text: info.mcpUrl }), copyButton(() => info.mcpUrl, "Copy URL")),
      hostedNote(),
      h("h3", { text: "Step by step" }),
      h("p", { text: "Each client signs in with your Sasha account: you choose what it may do, and it appears under Connected clients, where you can revoke it." }),
      h("div", { class: "client-guides" }, clientGuides(info.mcpUrl).map(clientSection)),
      h("h3", { text: "Other clients that sign in (OAuth)" }),
      h("p", { text: "Add Sasha as a custom connector with the URL above. Clients configured by a file take:" }),
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
          labelError.show(errorMessage(error));
          label.focus();
        } else if (field === "scopes") {
          showScopesError(errorMessage(error));
        } else if (field === "expiresInDays") {
          daysError.show(errorMessage(error));
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
