// The assistant pane: a conversation with the configured model, whose tools
// are the signed-in person's own MCP tools, beside the app pane (a right
// column on wide screens; over the main area on phones).
//
// It lists the person's conversations (newest first; "New conversation"
// starts one on the first Send), shows the transcript (the person's prompts,
// the assistant's text, each tool call as a collapsible block with its
// arguments, its result and whether it worked, failed or was declined), and
// streams a turn (`api.streamTurn`): the text grows as it arrives, and every
// call the gateway does not mark read-only comes as a confirmation card that
// leads with one sentence of what will happen (made by the server from the
// call), then, behind "Show details", what would change (a file's diff, a
// row before and after, what publishing applies, or the call's arguments),
// with Approve and Deny. Only the person's click decides it
// (`POST /api/assistant/confirmations/:id`); the model never sees the
// confirmation's id. The server holds waiting confirmations: a reloaded
// page, another tab or another device lists them
// (`GET /api/assistant/confirmations`) and shows the same cards, and a page
// that did not start a running turn follows it by reading the conversation
// again until it ends. Closing the page does not end a turn; Cancel does
// (`POST …/cancel`), and a call a turn never answered reads "Cancelled".
// A Send always goes to the conversation shown: no load that began before it
// (the pane's first list of conversations included) may switch it after.
//
// The pure parts (`diffLineKind`, `rowFields`, `draftHref`, `prettyJson`,
// `transcriptItems`, `callStatusText`) and the summary rendering are what
// tests/assistant.test.mjs checks; the pane runs in real Chromium in
// tests/browser/assistant.mjs.

import * as api from "./api.js";
import { dismissibleBy, errorContent, h, replaceChildren } from "./dom.js";

const NARROW = "(max-width: 767px)";
/**
 * How often a page reads again a running turn it does not stream: another
 * tab's turn sends this page no events, so it polls while the turn runs.
 */
const WATCH_INTERVAL_MS = 1500;

function list(value) {
  return Array.isArray(value) ? value : [];
}

/** A value as indented JSON; a string holding JSON is parsed first. */
export function prettyJson(value) {
  let parsed = value;
  if (typeof value === "string") {
    try {
      parsed = JSON.parse(value);
    } catch {
      return value;
    }
  }
  if (parsed === undefined) {
    return "";
  }
  return JSON.stringify(parsed, null, 2);
}

/** What one line of a unified diff is: "add", "del", "hunk", "meta" (the ---/+++ headers) or "context". */
export function diffLineKind(line) {
  if (line.startsWith("+++ ") || line.startsWith("--- ")) {
    return "meta";
  }
  if (line.startsWith("@@")) {
    return "hunk";
  }
  if (line.startsWith("+")) {
    return "add";
  }
  if (line.startsWith("-")) {
    return "del";
  }
  return "context";
}

/** A cell's text: strings as they are, anything else as JSON, nothing as "—". */
export function cellText(value) {
  if (value === undefined || value === null) {
    return "—";
  }
  return typeof value === "string" ? value : JSON.stringify(value);
}

/**
 * The fields of a row change, in order (the row's as it was, then any new
 * ones): `[{field, before, after, changed}]`, `before`/`after` as text
 * ("—" for none). With no `after` (a delete) every field is shown as removed.
 */
export function rowFields(before, after) {
  const was = before && typeof before === "object" ? before : {};
  const will = after && typeof after === "object" ? after : null;
  const names = [...Object.keys(was)];
  for (const name of Object.keys(will || {})) {
    if (!names.includes(name)) {
      names.push(name);
    }
  }
  return names.map((field) => {
    const old = Object.prototype.hasOwnProperty.call(was, field) ? was[field] : null;
    // An update names only the fields it changes: the others stay as they are.
    const fresh = will === null ? null : Object.prototype.hasOwnProperty.call(will, field) ? will[field] : old;
    const beforeText = cellText(old);
    const afterText = cellText(fresh);
    return { field, before: beforeText, after: afterText, changed: beforeText !== afterText };
  });
}

/** The Draft page of a confirmation's app when the change is to its draft (or publishes it), else null. */
export function draftHref(app, summary) {
  if (!app || !summary || typeof summary !== "object") {
    return null;
  }
  if (summary.kind === "publish" || summary.draft === true) {
    return `#/apps/${encodeURIComponent(app)}/draft`;
  }
  return null;
}

/** A tool call's state in words. */
export function callStatusText(state) {
  return (
    {
      running: "Running…",
      waiting: "Waiting for your decision",
      ok: "Done",
      error: "Failed",
      declined: "Declined",
      cancelled: "Cancelled",
    }[state] || state
  );
}

/** The state of a finished call from its `{ok, declined, cancelled}`. */
export function resultState(result) {
  if (result && result.cancelled) {
    return "cancelled";
  }
  if (result && result.declined) {
    return "declined";
  }
  return result && result.ok ? "ok" : "error";
}

/**
 * The state of a stored call with no result yet: waiting for a decision
 * when one of `waiting` (call ids) is its, running while its turn runs, else
 * cancelled (its turn ended without answering it).
 */
export function openCallState(callId, { running = false, waiting = new Set() } = {}) {
  if (waiting.has(callId)) {
    return "waiting";
  }
  return running ? "running" : "cancelled";
}

/** A deploy summary's files by change: `{added, changed, removed}`, each a list of paths. */
export function fileChanges(summary) {
  const changes = { added: [], changed: [], removed: [] };
  for (const file of list(summary && summary.files)) {
    const path = String((file && file.path) || "");
    const kind = { create: "added", delete: "removed" }[file && file.change] || "changed";
    changes[kind].push(path);
  }
  return changes;
}

/**
 * A stored transcript (`GET /api/assistant/conversations/:id`'s `messages`)
 * as what the pane shows, in order: `{kind: "user"|"assistant", text}` and
 * `{kind: "call", id, tool, arguments, result: {ok, declined, cancelled, text}|null}`
 * (each tool message joined to its call by `tool_call_id`).
 */
export function transcriptItems(messages) {
  const items = [];
  const calls = new Map();
  for (const message of list(messages)) {
    if (!message || typeof message !== "object") {
      continue;
    }
    if (message.role === "user") {
      items.push({ kind: "user", text: String(message.content ?? "") });
    } else if (message.role === "assistant") {
      if (typeof message.content === "string" && message.content !== "") {
        items.push({ kind: "assistant", text: message.content });
      }
      for (const call of list(message.tool_calls)) {
        const fn = (call && call.function) || {};
        const item = { kind: "call", id: call.id, tool: fn.name || "(tool)", arguments: fn.arguments ?? "", result: null };
        calls.set(call.id, item);
        items.push(item);
      }
    } else if (message.role === "tool") {
      const ui = message.ui || {};
      const result = { ok: Boolean(ui.ok), declined: Boolean(ui.declined), cancelled: Boolean(ui.cancelled), text: typeof ui.shown === "string" ? ui.shown : String(message.content ?? "") };
      const item = calls.get(message.tool_call_id);
      if (item) {
        item.result = result;
        if (ui.tool) {
          item.tool = ui.tool;
        }
      } else {
        items.push({ kind: "call", id: message.tool_call_id, tool: ui.tool || "(tool)", arguments: "", result });
      }
    }
  }
  return items;
}

// ---------------------------------------------------------------------------
// Summaries: what a confirmation would change

/** A unified diff as a <pre>, one span per line marked by kind. */
export function renderDiff(diff, label) {
  const lines = String(diff).replace(/\n$/, "").split("\n");
  return h(
    "pre",
    { class: "assistant-diff", "aria-label": label },
    lines.map((line) => h("span", { class: `diff-line diff-${diffLineKind(line)}`, text: `${line}\n` })),
  );
}

const FILE_CHANGE = { create: "New file", change: "Changed file", delete: "Deleted file" };
const ROW_CHANGE = { create: "New row", update: "Changed row", delete: "Deleted row" };

function fileSummary(summary) {
  const path = String(summary.path || "");
  return h(
    "div",
    { class: "assistant-summary assistant-summary-file" },
    h(
      "p",
      { class: "assistant-summary-line" },
      h("span", { class: "assistant-summary-what", text: `${FILE_CHANGE[summary.change] || "File"} ` }),
      h("code", { text: path }),
      summary.draft ? h("span", { class: "badge badge-small", text: "in the draft" }) : h("span", { class: "badge badge-small badge-warning", text: "live app" }),
    ),
    typeof summary.diff === "string" && summary.diff !== ""
      ? renderDiff(summary.diff, `Changes to ${path}`)
      : h("p", { class: "hint", text: summary.change === "delete" ? "The file is removed." : "No text diff to show." }),
  );
}

/** A member app deploy: new app or new version, each changed file's diff, and whether it validates. */
function deploySummary(summary) {
  const files = Array.isArray(summary.files) ? summary.files : [];
  const problems = Array.isArray(summary.diagnostics) ? summary.diagnostics : [];
  return h(
    "div",
    { class: "assistant-summary assistant-summary-deploy" },
    h(
      "p",
      { class: "assistant-summary-line" },
      h("span", { class: "assistant-summary-what", text: { update: "New version of your member app ", draft: "A draft (not live) of your member app " }[summary.change] || "New member app " }),
      h("strong", { text: String(summary.name || summary.app || "") }),
      summary.app ? " " : null,
      summary.app ? h("code", { text: String(summary.app) }) : null,
    ),
    summary.ok === false
      ? h("ul", { class: "assistant-list", "aria-label": "Problems" }, problems.map((p) => h("li", { text: `${p.file ? `${p.file}${p.line ? `:${p.line}` : ""}: ` : ""}${p.reason}` })))
      : null,
    files.length === 0
      ? h("p", { class: "hint", text: "No file changes." })
      : files.map((file) =>
          h(
            "div",
            { class: "assistant-deploy-file" },
            h("p", { class: "assistant-summary-line" }, h("span", { class: "assistant-summary-what", text: `${FILE_CHANGE[file.change] || "File"} ` }), h("code", { text: String(file.path || "") })),
            typeof file.diff === "string" && file.diff !== "" ? renderDiff(file.diff, `Changes to ${file.path}`) : null,
          ),
        ),
  );
}

function rowSummary(summary) {
  const fields = rowFields(summary.before, summary.after);
  const head = h("tr", {}, h("th", { scope: "col", text: "Field" }), h("th", { scope: "col", text: "Before" }), h("th", { scope: "col", text: "After" }));
  return h(
    "div",
    { class: "assistant-summary assistant-summary-row" },
    h("p", { class: "assistant-summary-line", text: ROW_CHANGE[summary.change] || "Row change" }),
    fields.length === 0
      ? h("p", { class: "hint", text: "No values to show." })
      : h(
          "div",
          { class: "assistant-table-wrap" },
          h(
            "table",
            { class: "assistant-row-table", "aria-label": ROW_CHANGE[summary.change] || "Row change" },
            h("thead", {}, head),
            h(
              "tbody",
              {},
              fields.map((row) =>
                h(
                  "tr",
                  { class: row.changed ? "row-changed" : null },
                  h("th", { scope: "row", text: row.field }),
                  h("td", { text: row.before }),
                  h("td", { text: row.after }),
                ),
              ),
            ),
          ),
        ),
  );
}

function columnText(column) {
  const name = column.column || "(column)";
  const parts = [name, ": ", column.change || "changed"];
  if (column.after !== undefined && column.after !== null) {
    parts.push(` (${column.after})`);
  }
  return parts.join("");
}

function publishSummary(summary) {
  const changes = list(summary.changes);
  const migrations = list(summary.migrations);
  const tables = list(summary.tables);
  const widened = list(summary.readWidened);
  return h(
    "div",
    { class: "assistant-summary assistant-summary-publish" },
    h("p", { class: "assistant-summary-line", text: "Publishing makes the draft the live app for every user." }),
    h("h4", { text: "Files changed" }),
    changes.length === 0
      ? h("p", { class: "hint", text: "No file differs from the live app." })
      : h(
          "ul",
          { class: "assistant-list", "aria-label": "Files changed" },
          changes.map((change) =>
            h(
              "li",
              {},
              h("code", { text: String(change.path) }),
              ` — ${change.change}`,
              // What goes live is shown, not only named: each text file's diff.
              typeof change.unified === "string" && change.unified !== ""
                ? h("details", { class: "assistant-publish-diff", open: changes.length <= 4 }, h("summary", { text: "Show the changes" }), renderDiff(change.unified, `Changes to ${change.path}`))
                : null,
            ),
          ),
        ),
    migrations.length > 0 ? h("h4", { text: "Migrations" }) : null,
    migrations.map((migration) =>
      h(
        "details",
        { class: "assistant-migration", open: true },
        h("summary", { text: String(migration.file) }),
        h("pre", { class: "assistant-diff", "aria-label": `SQL of ${migration.file}`, text: String(migration.sql || "") }),
      ),
    ),
    tables.length > 0 ? h("h4", { text: "Table changes" }) : null,
    tables.length > 0
      ? h(
          "ul",
          { class: "assistant-list", "aria-label": "Table changes" },
          tables.map((table) =>
            h(
              "li",
              {},
              `Table ${table.table}: ${table.change}`,
              list(table.columns).length > 0 ? h("ul", {}, list(table.columns).map((column) => h("li", { text: columnText(column) }))) : null,
            ),
          ),
        )
      : null,
    widened.length > 0
      ? h(
          "div",
          { class: "assistant-warning", role: "note" },
          h("p", { class: "assistant-strong", text: "This lets more people read records the app already holds:" }),
          h("ul", { class: "assistant-list", "aria-label": "Read widening" }, widened.map((reason) => h("li", { text: typeof reason === "string" ? reason : JSON.stringify(reason) }))),
        )
      : null,
  );
}

/** A confirmation's summary, readable: a file diff, a row table, a publish review or the arguments. */
export function renderSummary(summary) {
  const value = summary && typeof summary === "object" ? summary : { kind: "arguments", arguments: summary };
  switch (value.kind) {
    case "file":
      return fileSummary(value);
    case "row":
      return rowSummary(value);
    case "publish":
      return publishSummary(value);
    case "deploy":
      return deploySummary(value);
    default:
      return h(
        "div",
        { class: "assistant-summary assistant-summary-arguments" },
        h("pre", { class: "assistant-json", "aria-label": "Arguments", text: prettyJson(value.arguments ?? {}) }),
      );
  }
}

/** A deploy's files added, changed and removed, counted and named, before any diff. */
function fileChangeList(summary) {
  if (!summary || summary.kind !== "deploy") {
    return null;
  }
  const changes = fileChanges(summary);
  const rows = [
    ["added", "Added"],
    ["changed", "Changed"],
    ["removed", "Removed"],
  ]
    .filter(([key]) => changes[key].length > 0)
    .map(([key, label]) => h("li", {}, h("span", { class: "assistant-strong", text: `${label} (${changes[key].length}): ` }), changes[key].join(", ")));
  return h(
    "ul",
    { class: "assistant-list assistant-file-changes", "aria-label": "Files" },
    rows.length > 0 ? rows : h("li", { text: "No file changes." }),
    summary.ok === false ? h("li", { class: "assistant-strong", text: "It does not validate: see the problems in the details." }) : null,
  );
}

/**
 * The card for one confirmation (a turn's `confirmation` event, or one of
 * `GET /api/assistant/confirmations`): its title, the sentence of what will
 * happen, a deploy's files by change, then the details behind "Show
 * details", with Approve and Deny. `decide(approve)` posts the decision
 * (both buttons are disabled at the click). Answers `{element,
 * decided(approved), settle(text)}`: `decided` shows the server's `decided`
 * event, `settle` ends a card no longer waiting.
 */
export function confirmationCard(event, { decide, onUnauthenticated = () => {}, onOpenDraft = () => {} }) {
  const title = event.title || event.tool || "A change";
  const status = h("p", { class: "assistant-card-status", role: "status" });
  const alert = h("p", { class: "alert", role: "alert", hidden: true });
  const approve = h("button", { type: "button", class: "button button-primary", text: "Approve" });
  const deny = h("button", { type: "button", class: "button", text: "Deny" });
  const href = draftHref(event.app, event.summary);
  let settled = false;
  const element = h(
    "section",
    { class: "assistant-card", "aria-label": `Confirm: ${title}`, dataset: { confirmation: "waiting", tool: String(event.tool || "") } },
    h("h3", { class: "assistant-card-title", text: title }),
    event.sentence ? h("p", { class: "assistant-card-sentence", text: String(event.sentence) }) : null,
    fileChangeList(event.summary),
    href ? h("p", {}, h("a", { href, text: "Open the draft", onclick: () => onOpenDraft() })) : null,
    h(
      "details",
      { class: "assistant-card-details" },
      h("summary", { text: "Show details" }),
      h(
        "p",
        { class: "assistant-card-meta" },
        event.app ? `App ${event.app} · ` : "",
        "tool ",
        h("code", { text: String(event.tool || "") }),
      ),
      renderSummary(event.summary),
    ),
    alert,
    h("div", { class: "assistant-card-actions" }, approve, deny),
    status,
  );
  const show = (approved) => {
    settled = true;
    approve.disabled = true;
    deny.disabled = true;
    element.dataset.confirmation = approved ? "approved" : "declined";
    status.textContent = approved ? "Approved" : "Declined";
  };
  const click = async (yes) => {
    approve.disabled = true;
    deny.disabled = true;
    alert.hidden = true;
    status.textContent = yes ? "Approving…" : "Declining…";
    try {
      const answer = await decide(yes);
      show(answer && typeof answer.approved === "boolean" ? answer.approved : yes);
    } catch (error) {
      if (error && error.status === 401) {
        onUnauthenticated();
        return;
      }
      status.textContent = "";
      alert.hidden = false;
      replaceChildren(alert, ...errorContent(error));
      if (error && (error.status === 404 || error.status === 409)) {
        settled = true;
        element.dataset.confirmation = "gone";
      } else {
        approve.disabled = false;
        deny.disabled = false;
      }
    }
  };
  approve.addEventListener("click", () => click(true));
  deny.addEventListener("click", () => click(false));
  return {
    element,
    decided(approved) {
      if (!settled || element.dataset.confirmation === "gone") {
        show(approved);
      }
    },
    settle(text) {
      if (!settled) {
        settled = true;
        approve.disabled = true;
        deny.disabled = true;
        element.dataset.confirmation = "gone";
        status.textContent = text;
      }
    },
    get waiting() {
      return !settled;
    },
  };
}

// ---------------------------------------------------------------------------
// The transcript's parts

function bubble(kind, text) {
  const body = h("div", { class: "assistant-text", text });
  return {
    element: h("li", { class: `assistant-message assistant-${kind}` }, h("p", { class: "assistant-who", text: kind === "user" ? "You" : "Assistant" }), body),
    set(value) {
      body.textContent = value;
    },
  };
}

/**
 * A tool call as a collapsible block: its tool, status, arguments and
 * (later) result; `open` is the state of a call with no result yet.
 */
export function callBlock({ id, tool, arguments: args, result = null, open = "running" }) {
  const state = h("span", { class: "assistant-call-status" });
  const resultSlot = h("div", { class: "assistant-call-result" });
  const element = h(
    "details",
    { class: "assistant-call", dataset: { callId: String(id || ""), tool: String(tool || "") } },
    h("summary", {}, h("code", { class: "assistant-call-tool", text: String(tool || "(tool)") }), " ", state),
    h("p", { class: "assistant-call-label", text: "Arguments" }),
    h("pre", { class: "assistant-json", "aria-label": `Arguments of ${tool}`, text: prettyJson(args ?? {}) }),
    resultSlot,
  );
  const setState = (value) => {
    element.dataset.state = value;
    state.textContent = callStatusText(value);
  };
  const setResult = (outcome) => {
    setState(resultState(outcome));
    replaceChildren(
      resultSlot,
      h("p", { class: "assistant-call-label", text: "Result" }),
      h("pre", { class: "assistant-json", "aria-label": `Result of ${tool}`, text: String(outcome.text ?? "") }),
    );
  };
  if (result) {
    setResult(result);
  } else {
    setState(open);
  }
  return { element, setState, setResult };
}

// ---------------------------------------------------------------------------
// The pane

function when(seconds) {
  const date = new Date(Number(seconds) * 1000);
  return Number.isNaN(date.getTime()) ? "" : date.toLocaleString([], { dateStyle: "short", timeStyle: "short" });
}

/**
 * The pane. `options`: `{onAppsChanged(), onUnauthenticated(), onClose()}`:
 * `onAppsChanged` after a turn in which an approved change ran (the apps may
 * have changed), `onClose` when its own close button closes it. Answers
 * `{element, open(), close(), isOpen(), dispose()}`.
 */
export function assistantPane({ onAppsChanged = () => {}, onUnauthenticated = () => {}, onClose = () => {} } = {}) {
  const picker = h("select", { id: "assistant-conversation", class: "assistant-picker" });
  const newButton = h("button", { type: "button", class: "button", text: "New conversation" });
  const deleteButton = h("button", { type: "button", class: "button button-quiet", text: "Delete" });
  const closeButton = h("button", { type: "button", class: "button button-quiet assistant-close", text: "Close", "aria-label": "Close the assistant" });
  const model = h("p", { class: "assistant-model" });
  const confirmSlot = h("div", { class: "assistant-confirm-delete" });
  const alert = h("div", { class: "alert", role: "alert", hidden: true });
  const transcript = h("ol", { class: "assistant-transcript", "aria-label": "Transcript", tabindex: "0" });
  const status = h("p", { class: "status assistant-status", role: "status", "aria-live": "polite" });
  const prompt = h("textarea", { id: "assistant-prompt", rows: "3", placeholder: "Ask the assistant… (Enter sends, Shift+Enter for a new line)" });
  const sendButton = h("button", { type: "submit", class: "button button-primary", text: "Send" });
  const cancelButton = h("button", { type: "button", class: "button", text: "Cancel", hidden: true });
  const form = h(
    "form",
    { class: "assistant-form", novalidate: true },
    h("label", { for: "assistant-prompt", text: "Message" }),
    prompt,
    h("div", { class: "assistant-form-actions" }, sendButton, cancelButton),
  );
  const unavailable = h("div", { class: "assistant-unavailable", hidden: true });
  const element = h(
    "aside",
    { class: "assistant", id: "assistant", "aria-labelledby": "assistant-title", hidden: true },
    h("header", { class: "assistant-head" }, h("h2", { class: "assistant-title", id: "assistant-title", tabindex: "-1", text: "Assistant" }), model, closeButton),
    h(
      "div",
      { class: "assistant-conversations" },
      h("label", { for: "assistant-conversation", text: "Conversation" }),
      h("div", { class: "assistant-conversation-row" }, picker, newButton, deleteButton),
      confirmSlot,
    ),
    alert,
    transcript,
    status,
    form,
    unavailable,
  );

  const pane = {
    available: false,
    loaded: false,
    loading: null,
    conversations: [],
    currentId: null,
    /** The running turn this page streams: `{controller, bubble, calls, cards, changed}`. */
    turn: null,
    /** A running turn this page follows (started elsewhere, or before a reload): `{id, timer, seen}`. */
    watch: null,
    /**
     * Bumped whenever the conversation shown changes (a transcript load, or
     * a Send that begins a turn), so a slower earlier load gives up rather
     * than replace what the person now sees.
     */
    generation: 0,
    /** The transcript load in flight (`showConversation`), which a Send waits for. */
    reading: null,
  };

  const say = (text) => {
    status.textContent = text;
  };
  const clearAlert = () => {
    alert.hidden = true;
    alert.textContent = "";
  };
  const fail = (error) => {
    if (error && error.status === 401) {
      onUnauthenticated();
      return;
    }
    alert.hidden = false;
    replaceChildren(alert, ...errorContent(error));
    say("");
  };

  const nearBottom = () => transcript.scrollHeight - transcript.scrollTop - transcript.clientHeight < 80;
  const add = (node) => {
    const follow = nearBottom();
    transcript.appendChild(node);
    if (follow) {
      transcript.scrollTop = transcript.scrollHeight;
    }
    return node;
  };
  const follow = () => {
    if (nearBottom()) {
      transcript.scrollTop = transcript.scrollHeight;
    }
  };

  const emptyNote = () => h("li", { class: "assistant-empty hint", text: "Ask for an app, a change to one, or something about your data. Every change is shown to you to approve first." });

  const renderPicker = () => {
    const options = pane.conversations.map((conversation) =>
      h("option", { value: conversation.id, selected: conversation.id === pane.currentId, text: `${conversation.title || "Untitled"}${when(conversation.updatedAt) ? ` · ${when(conversation.updatedAt)}` : ""}` }),
    );
    const fresh = pane.currentId === null ? h("option", { value: "", selected: true, text: "New conversation" }) : null;
    replaceChildren(picker, fresh, options);
    picker.value = pane.currentId || "";
    deleteButton.disabled = pane.currentId === null || pane.turn !== null;
  };

  const setBusy = (busy) => {
    sendButton.disabled = busy;
    cancelButton.hidden = !busy;
    picker.disabled = busy;
    newButton.disabled = busy;
    deleteButton.disabled = busy || pane.currentId === null;
  };

  const showUnavailable = (text) => {
    form.hidden = true;
    unavailable.hidden = false;
    replaceChildren(unavailable, h("p", { class: "assistant-strong", text: "The assistant is not set up." }), h("p", { text: text || "No model is configured." }));
  };

  /** The transcript, then the cards of `waiting` (this conversation's confirmations); `running` says whether its turn runs. */
  const renderItems = (items, { running = false, waiting = [] } = {}) => {
    if (items.length === 0 && waiting.length === 0) {
      replaceChildren(transcript, emptyNote());
      return;
    }
    const open = { running, waiting: new Set(waiting.map((card) => card.callId)) };
    const cards = waiting.map((card) => {
      const shown = confirmationCard(card, {
        decide: (approve) => api.decideConfirmation(card.id, approve, card.conversation),
        onUnauthenticated,
        onOpenDraft: openedDraft,
      });
      return h("li", { class: "assistant-card-item" }, shown.element);
    });
    const atBottom = nearBottom();
    replaceChildren(
      transcript,
      items.map((item) =>
        item.kind === "call"
          ? h("li", { class: "assistant-call-item" }, callBlock({ ...item, open: openCallState(item.id, open) }).element)
          : bubble(item.kind, item.text).element,
      ),
      cards,
    );
    if (atBottom || waiting.length > 0) {
      transcript.scrollTop = transcript.scrollHeight;
    }
  };

  const openedDraft = () => {
    if (window.matchMedia(NARROW).matches) {
      close();
    }
  };

  /** The conversation `id` and the person's confirmations waiting in it. */
  async function readConversation(id) {
    const [conversation, waiting] = await Promise.all([api.getConversation(id), api.listConfirmations()]);
    return { conversation, waiting: list(waiting && waiting.confirmations).filter((card) => card && card.conversation === id) };
  }

  const stopWatching = () => {
    if (pane.watch) {
      clearTimeout(pane.watch.timer);
      pane.watch = null;
    }
  };

  /**
   * Follows conversation `id`'s running turn, which this page does not
   * stream: reads it again every few seconds and redraws what changed,
   * until the turn ends (or the person opens another conversation).
   */
  function watch(id, seen) {
    stopWatching();
    const watching = { id, timer: 0, seen };
    pane.watch = watching;
    setBusy(true);
    // Following is only reading: another conversation may be opened.
    picker.disabled = false;
    newButton.disabled = false;
    const tick = async () => {
      let read;
      try {
        read = await readConversation(id);
      } catch (error) {
        if (pane.watch !== watching) {
          return;
        }
        if (error && error.status === 401) {
          stopWatching();
          onUnauthenticated();
          return;
        }
        watching.timer = setTimeout(tick, WATCH_INTERVAL_MS);
        return;
      }
      if (pane.watch !== watching) {
        return;
      }
      const running = Boolean(read.conversation.running);
      const signature = JSON.stringify([read.conversation.messages, read.waiting.map((card) => card.id), running]);
      if (signature !== watching.seen) {
        watching.seen = signature;
        renderItems(transcriptItems(read.conversation.messages), { running, waiting: read.waiting });
      }
      if (running) {
        say(read.waiting.length > 0 ? "Waiting for your decision." : "The assistant is working…");
        watching.timer = setTimeout(tick, WATCH_INTERVAL_MS);
      } else {
        stopWatching();
        setBusy(false);
        say("");
        await refreshList();
        await onAppsChanged();
      }
    };
    watching.timer = setTimeout(tick, WATCH_INTERVAL_MS);
  }

  /**
   * Shows conversation `id` (`null`: a new one, started by the next Send).
   * While its transcript loads, `pane.reading` holds the load.
   */
  function showConversation(id) {
    const shown = readAndShow(id).finally(() => {
      if (pane.reading === shown) {
        pane.reading = null;
      }
    });
    pane.reading = shown;
    return shown;
  }

  async function readAndShow(id) {
    stopWatching();
    if (!pane.turn) {
      setBusy(false);
    }
    pane.currentId = id;
    renderPicker();
    clearAlert();
    replaceChildren(confirmSlot);
    const generation = ++pane.generation;
    if (id === null) {
      replaceChildren(transcript, emptyNote());
      return;
    }
    say("Loading the conversation…");
    let read;
    try {
      read = await readConversation(id);
    } catch (error) {
      if (generation === pane.generation) {
        fail(error);
      }
      return;
    }
    if (generation !== pane.generation) {
      return;
    }
    const running = Boolean(read.conversation.running);
    say(read.waiting.length > 0 ? "Waiting for your decision." : "");
    renderItems(transcriptItems(read.conversation.messages), { running, waiting: read.waiting });
    if (running && !pane.turn) {
      watch(id, JSON.stringify([read.conversation.messages, read.waiting.map((card) => card.id), running]));
    }
  }

  async function load() {
    say("Loading the assistant…");
    clearAlert();
    // The person may start a conversation (or choose one) before the list
    // comes back: then that one stays shown, whatever the list says.
    const generation = pane.generation;
    let answer;
    let listing;
    let waiting;
    try {
      [answer, listing, waiting] = await Promise.all([api.assistantStatus(), api.listConversations(), api.listConfirmations()]);
    } catch (error) {
      fail(error);
      pane.loaded = false;
      return;
    }
    pane.loaded = true;
    pane.available = Boolean(answer.available);
    model.textContent = answer.model ? `Model ${answer.model}` : "";
    if (!pane.available) {
      showUnavailable(answer.configure);
    } else {
      form.hidden = false;
      unavailable.hidden = true;
    }
    if (generation !== pane.generation) {
      // The person started or chose a conversation while the list was
      // read: it stays shown, and listed even if the list predates it.
      const listed = list(listing.conversations);
      pane.conversations = [...pane.conversations.filter((c) => !listed.some((l) => l.id === c.id)), ...listed];
      renderPicker();
      return;
    }
    pane.conversations = list(listing.conversations);
    say("");
    // A change waiting for the person comes first: its conversation opens.
    const first = list(waiting && waiting.confirmations).find((card) => pane.conversations.some((c) => c.id === card.conversation));
    await showConversation(first ? first.conversation : pane.conversations.length > 0 ? pane.conversations[0].id : null);
  }

  async function refreshList() {
    try {
      const listing = await api.listConversations();
      pane.conversations = list(listing.conversations);
      renderPicker();
    } catch (error) {
      if (error && error.status === 401) {
        onUnauthenticated();
      }
    }
  }

  function onEvent(turn, event) {
    switch (event.type) {
      case "text": {
        if (!turn.bubble) {
          turn.bubble = bubble("assistant", "");
          add(turn.bubble.element);
        }
        turn.bubble.set(String(event.text ?? ""));
        follow();
        break;
      }
      case "toolCall": {
        turn.bubble = null;
        const block = callBlock({ id: event.id, tool: event.tool, arguments: event.arguments });
        turn.calls.set(event.id, block);
        add(h("li", { class: "assistant-call-item" }, block.element));
        say(`Running ${event.tool}…`);
        break;
      }
      case "confirmation": {
        turn.bubble = null;
        const block = turn.calls.get(event.callId);
        if (block) {
          block.setState("waiting");
        }
        const card = confirmationCard(event, {
          decide: (approve) => api.decideConfirmation(event.id, approve, event.conversation),
          onUnauthenticated,
          onOpenDraft: openedDraft,
        });
        turn.cards.set(event.id, card);
        turn.cardsByCall.set(event.callId, card);
        add(h("li", { class: "assistant-card-item" }, card.element));
        say(`Waiting for your decision: ${event.title || event.tool}.`);
        break;
      }
      case "decided": {
        const card = turn.cards.get(event.id);
        if (card) {
          card.decided(Boolean(event.approved));
        }
        say(event.approved ? "Approved. Running it…" : "Declined.");
        break;
      }
      case "toolResult": {
        const block = turn.calls.get(event.id);
        if (block) {
          block.setResult(event);
        }
        if (event.ok && !event.declined && turn.cardsByCall.has(event.id)) {
          turn.changed = true;
        }
        say("The assistant is answering…");
        follow();
        break;
      }
      case "done":
        turn.ended = true;
        say("");
        break;
      case "error":
        turn.ended = true;
        // The server stored every call the turn did not answer as cancelled.
        for (const block of turn.calls.values()) {
          if (block.element.dataset.state === "running" || block.element.dataset.state === "waiting") {
            block.setState("cancelled");
          }
        }
        add(h("li", { class: "assistant-error alert", role: "alert" }, ...errorContent(event.error || {})));
        say("");
        break;
      default:
        break;
    }
  }

  async function send() {
    if (pane.turn || pane.watch) {
      return;
    }
    clearAlert();
    const text = prompt.value;
    if (text.trim() === "") {
      fail({ message: "Write a message first." });
      prompt.focus();
      return;
    }
    const turn = { controller: new AbortController(), bubble: null, calls: new Map(), cards: new Map(), cardsByCall: new Map(), changed: false, ended: false };
    pane.turn = turn;
    setBusy(true);
    // The prompt goes to the conversation the person sees: one whose
    // transcript is still loading is drawn first, and no load begun before
    // this Send may replace it afterwards (the pane's first load, whose list
    // predates a conversation this Send starts, included).
    while (pane.reading) {
      await pane.reading;
    }
    pane.generation += 1;
    let id = pane.currentId;
    if (id === null) {
      say("Starting a conversation…");
      try {
        const created = await api.createConversation(text);
        id = created.id;
        pane.conversations = [created, ...pane.conversations.filter((c) => c.id !== created.id)];
        pane.currentId = id;
        renderPicker();
      } catch (error) {
        pane.turn = null;
        setBusy(false);
        fail(error);
        return;
      }
    }
    const empty = transcript.querySelector(".assistant-empty");
    if (empty) {
      empty.remove();
    }
    const mine = bubble("user", text);
    add(mine.element);
    transcript.scrollTop = transcript.scrollHeight;
    prompt.value = "";
    say("The assistant is answering…");
    let cutOff = false;
    try {
      await api.streamTurn(id, text, { signal: turn.controller.signal, onEvent: (event) => onEvent(turn, event) });
      // The stream ended early (a network cut): the turn may well go on on
      // the server, so the conversation is read again and followed.
      cutOff = !turn.ended;
    } catch (error) {
      if (error && error.name === "AbortError") {
        for (const block of turn.calls.values()) {
          if (block.element.dataset.state === "running" || block.element.dataset.state === "waiting") {
            block.setState("cancelled");
          }
        }
        add(h("li", { class: "assistant-note hint", text: "Cancelled. Nothing waiting for a decision was run." }));
        say("Cancelled.");
      } else if (error && error.status === 401) {
        onUnauthenticated();
        return;
      } else if (error instanceof api.ApiError && !turn.ended) {
        // Refused before the stream began: the prompt was not taken.
        mine.element.remove();
        if (prompt.value === "") {
          prompt.value = text;
        }
        fail(error);
      } else {
        add(h("li", { class: "assistant-error alert", role: "alert" }, ...errorContent(error)));
        say("");
      }
    } finally {
      for (const card of turn.cards.values()) {
        card.settle("No longer waiting: the turn ended.");
      }
      if (pane.turn === turn) {
        pane.turn = null;
      }
      setBusy(false);
    }
    if (cutOff && pane.currentId === id) {
      await showConversation(id);
    }
    await refreshList();
    if (turn.changed) {
      await onAppsChanged();
    }
  }

  form.addEventListener("submit", (event) => {
    event.preventDefault();
    send();
  });
  prompt.addEventListener("keydown", (event) => {
    if (event.key === "Enter" && !event.shiftKey && !event.isComposing) {
      event.preventDefault();
      send();
    }
  });
  cancelButton.addEventListener("click", async () => {
    const id = pane.currentId;
    if (!id || (!pane.turn && !pane.watch)) {
      return;
    }
    say("Cancelling…");
    cancelButton.disabled = true;
    try {
      // Closing the stream alone leaves the turn running on the server.
      await api.cancelTurn(id);
    } catch (error) {
      if (error && error.status === 401) {
        onUnauthenticated();
        return;
      }
      fail(error);
    } finally {
      cancelButton.disabled = false;
    }
    if (pane.turn) {
      pane.turn.controller.abort();
    } else if (pane.watch) {
      await showConversation(id);
    }
  });
  picker.addEventListener("change", () => {
    showConversation(picker.value || null);
  });
  newButton.addEventListener("click", () => {
    showConversation(null);
    prompt.focus();
  });
  deleteButton.addEventListener("click", () => {
    const id = pane.currentId;
    if (id === null) {
      return;
    }
    const yes = h("button", { type: "button", class: "button button-danger", text: "Yes, delete" });
    const no = h("button", { type: "button", class: "button button-quiet", text: "Keep it" });
    // Escape, or work elsewhere on the page, keeps it too.
    const done = dismissibleBy(confirmSlot, no, deleteButton);
    no.addEventListener("click", () => {
      replaceChildren(confirmSlot);
      deleteButton.focus();
    });
    yes.addEventListener("click", async () => {
      done();
      yes.disabled = true;
      no.disabled = true;
      try {
        await api.deleteConversation(id);
      } catch (error) {
        replaceChildren(confirmSlot);
        fail(error);
        return;
      }
      replaceChildren(confirmSlot);
      pane.conversations = pane.conversations.filter((c) => c.id !== id);
      say("The conversation is deleted.");
      await showConversation(pane.conversations.length > 0 ? pane.conversations[0].id : null);
    });
    replaceChildren(confirmSlot, h("p", { text: "Delete this conversation and its transcript?" }), h("div", { class: "assistant-card-actions" }, yes, no));
    no.focus();
  });

  function open() {
    element.hidden = false;
    if (!pane.loaded && !pane.loading) {
      pane.loading = load().finally(() => {
        pane.loading = null;
      });
    }
    if (!form.hidden) {
      prompt.focus();
    } else {
      element.querySelector("#assistant-title").focus();
    }
  }

  function close() {
    element.hidden = true;
    onClose();
  }

  closeButton.addEventListener("click", () => close());

  return {
    element,
    open,
    close,
    isOpen: () => !element.hidden,
    /**
     * Stops following turns (signing out, the shell going away). A turn goes
     * on without the page; its confirmations wait for the person's next
     * visit or lapse.
     */
    dispose() {
      stopWatching();
      if (pane.turn) {
        pane.turn.controller.abort();
      }
    },
  };
}
