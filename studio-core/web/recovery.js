// The recovery panel: a generic grid over an app's declared tables, for when
// the app's own UI is broken.
//
// It reads the schema-derived descriptor (`GET /api/apps/:id/recovery`, which
// needs `manage` on the app) and reaches the rows only through the app's
// governed data tools on Studio's `/mcp` (`…__list`, `__create`, `__update`,
// `__delete`), with the session cookie and `Sasha-App`, exactly as any other
// caller: owner scoping, versions, receipts and audit all apply. It shares no
// code with the app frame's host. Updates and deletes send the row's version;
// a conflict reloads the table and says so instead of overwriting.

import * as api from "./api.js";
import { h, panelMessages, replaceChildren } from "./dom.js";
import { ROLES } from "./vocabulary.js";

const MCP_PROTOCOL_VERSION = "2026-07-28";
const CLIENT_INFO = { name: "sasha-studio-recovery", version: "1" };
const PAGE_SIZE = 50;
// Most audit entries the panel loads for one row (four pages of the history
// tool); a row edited more often than that shows its first ones.
const HISTORY_SHOWN = 200;
const CONFLICT_TEXT =
  "This row changed since it was loaded, so nothing was overwritten. The table now shows the latest values; apply your change again.";

let panelCount = 0;
let requestId = 0;

/** A failure with the closed envelope's fields. */
class ToolFailure extends Error {
  constructor({ code, message, diagnosticId, status, details }) {
    super(message);
    this.code = code;
    this.diagnosticId = diagnosticId || "";
    this.status = status || 0;
    this.details = details && typeof details === "object" ? details : null;
  }
}

/** A version conflict (the row moved on), as opposed to another conflict such as a unique value. */
function isStale(error) {
  return Boolean(error && error.code === "APP_CONFLICT" && error.details && "currentVersion" in error.details);
}

/** Calls one of the app's tools (or an undo tool, which names the app in its arguments) on `/mcp` as the app's managing page; answers `structuredContent`. */
export async function callTool(appId, name, args) {
  requestId += 1;
  const id = requestId;
  let response;
  try {
    response = await fetch("/mcp", {
      method: "POST",
      credentials: "same-origin",
      cache: "no-store",
      headers: {
        "Content-Type": "application/json",
        Accept: "application/json, text/event-stream",
        "MCP-Protocol-Version": MCP_PROTOCOL_VERSION,
        "Mcp-Method": "tools/call",
        "Mcp-Name": name,
        "Sasha-App": appId,
        "Sasha-View": "recovery",
      },
      body: JSON.stringify({
        jsonrpc: "2.0",
        id,
        method: "tools/call",
        params: {
          name,
          arguments: args,
          _meta: {
            "io.modelcontextprotocol/protocolVersion": MCP_PROTOCOL_VERSION,
            "io.modelcontextprotocol/clientCapabilities": {},
            "io.modelcontextprotocol/clientInfo": CLIENT_INFO,
          },
        },
      }),
    });
  } catch {
    throw new ToolFailure({ code: "APP_NOT_READY", message: "Studio cannot be reached. Check your connection and try again." });
  }
  let body = null;
  try {
    const text = await response.text();
    body = JSON.parse(text.startsWith("data:") || text.startsWith("event:") ? lastEventData(text) : text);
  } catch {
    body = null;
  }
  if (!response.ok && !(body && body.jsonrpc === "2.0")) {
    const envelope = body && typeof body === "object" ? body : {};
    throw new ToolFailure({
      status: response.status,
      code: typeof envelope.code === "string" ? envelope.code : "APP_INTERNAL",
      message: typeof envelope.message === "string" ? envelope.message : `Studio answered ${response.status}.`,
      diagnosticId: envelope.diagnosticId,
    });
  }
  if (!body || body.id !== id) {
    throw new ToolFailure({ code: "APP_INTERNAL", message: "The answer could not be read." });
  }
  if (body.error) {
    throw new ToolFailure({ code: "APP_INPUT_INVALID", message: String(body.error.message || "The request was refused.") });
  }
  const result = body.result || {};
  const structured = result.structuredContent;
  if (result.isError) {
    const envelope = structured && typeof structured.error === "object" && structured.error ? structured.error : {};
    throw new ToolFailure({
      code: typeof envelope.code === "string" ? envelope.code : "APP_INTERNAL",
      message: typeof envelope.message === "string" ? envelope.message : "The operation failed.",
      diagnosticId: envelope.diagnosticId,
      details: envelope.details,
    });
  }
  return structured;
}

/** The JSON of the last `data:` lines of an event stream. */
function lastEventData(text) {
  const blocks = text.replace(/\r\n/g, "\n").split("\n\n").filter((block) => block.includes("data:"));
  const last = blocks[blocks.length - 1] || "";
  return last
    .split("\n")
    .filter((line) => line.startsWith("data:"))
    .map((line) => line.slice(line.startsWith("data: ") ? 6 : 5))
    .join("\n");
}

function describeKinds(field) {
  if (field.format === "date") {
    return "date (YYYY-MM-DD)";
  }
  if (field.kinds.length === 1 && field.kinds[0] === "integer") {
    return "whole number";
  }
  if (field.kinds.length === 1 && field.kinds[0] === "number") {
    return "number";
  }
  if (field.kinds.length === 1 && field.kinds[0] === "string") {
    return "text";
  }
  return "text or number";
}

/** One input for `field`, holding `value`. */
function fieldInput(field, id, value, label) {
  const numeric = field.kinds.length === 1 && (field.kinds[0] === "integer" || field.kinds[0] === "number");
  return h("input", {
    id,
    name: field.name,
    type: numeric ? "number" : field.format === "date" ? "date" : "text",
    step: numeric ? (field.kinds[0] === "integer" ? "1" : "any") : null,
    inputmode: numeric ? (field.kinds[0] === "integer" ? "numeric" : "decimal") : null,
    value: value === null || value === undefined ? "" : String(value),
    required: field.required,
    "aria-label": label,
    autocomplete: "off",
  });
}

/**
 * The value an input stands for: `undefined` (leave out) for an empty optional
 * field on create, `null` for an emptied nullable field on edit, else a number
 * or the text. Throws a readable error for text in a number field.
 */
function inputValue(field, input, editing) {
  const raw = input.value;
  if (raw.trim() === "") {
    if (field.required) {
      throw new ToolFailure({ code: "APP_INPUT_INVALID", message: `${field.name} is required.` });
    }
    return editing && field.nullable ? null : undefined;
  }
  if (field.kinds.length === 1 && (field.kinds[0] === "integer" || field.kinds[0] === "number")) {
    const number = Number(raw);
    if (!Number.isFinite(number) || (field.kinds[0] === "integer" && !Number.isInteger(number))) {
      throw new ToolFailure({
        code: "APP_INPUT_INVALID",
        message: `${field.name} must be a ${describeKinds(field)}.`,
      });
    }
    return number;
  }
  return raw;
}

function showValue(value) {
  if (value === null || value === undefined) {
    return h("span", { class: "recovery-null", text: "empty" });
  }
  return String(value);
}

/**
 * What a cell shows: a person's name for a user id, a referenced row's name
 * beside its id (`Apollo (3)`), else the value. `name(value)` answers the
 * name, or "" when none is known (the raw value then stays, nothing is guessed).
 */
export function cellText(value, name) {
  if (value === null || value === undefined) {
    return null;
  }
  const known = name ? name(value) : "";
  return known ? known : String(value);
}

/**
 * The name of a row for the grids of the tables that refer to it: its first
 * text field that is not its owner, else "".
 */
export function rowName(table, row) {
  for (const field of table.fields) {
    if (field.readOnly || field.name === table.ownerField || !field.kinds.includes("string")) {
      continue;
    }
    const value = row[field.name];
    if (typeof value === "string" && value.trim() !== "") {
      return value;
    }
  }
  return "";
}

/**
 * Builds the recovery panel for `app` (`{id, name}`) and starts loading it.
 * `options`: `{app, onClose(), onUnauthenticated()}`.
 */
export function recoveryPanel(options) {
  const { app, onClose = () => {}, me = null } = options;
  const onUnauthenticated = options.onUnauthenticated || (() => {});
  panelCount += 1;
  const prefix = `recovery-${panelCount}`;
  const status = h("p", { class: "status", role: "status", "aria-live": "polite" });
  const alert = h("p", { class: "alert", role: "alert", hidden: true });
  const body = h("div", { class: "recovery-tables" });

  const { say, fail, clearAlert } = panelMessages(status, alert, {
    onUnauthenticated,
    describe: (error) => (isStale(error) ? { ...error, code: "APP_CONFLICT", message: CONFLICT_TEXT } : error),
  });

  // Names in place of ids: people by user id (the signed-in person, and for
  // admin and staff everyone, from the users list they may read) and rows of
  // referenced tables by id (as each table loads). Each grid redraws when a
  // name arrives.
  const people = new Map(me ? [[me.id, me.username]] : []);
  const rowNames = new Map();
  const redraws = [];
  const redrawAll = () => redraws.forEach((redraw) => redraw());
  if (me && (me.role === ROLES.ADMIN || me.role === ROLES.STAFF)) {
    api
      .listUsers()
      .then((answer) => {
        for (const person of (answer && answer.users) || []) {
          people.set(person.id, person.username);
        }
        redrawAll();
      })
      .catch(() => {});
  }
  const personName = (id) => people.get(String(id)) || "";

  function tableSection(descriptor, table) {
    const versionField = descriptor.versionField;
    /** How a field's value reads: owners by name, references by the row's name and id. */
    const namer = (field) => {
      if (field.name === table.ownerField) {
        return personName;
      }
      if (field.refersTo) {
        return (id) => {
          const named = (rowNames.get(field.refersTo) || new Map()).get(String(id));
          return named ? `${named} (${id})` : "";
        };
      }
      return null;
    };
    const showCell = (field, value) => {
      const text = cellText(value, namer(field));
      return text === null ? showValue(value) : h("span", { title: namer(field) && text !== String(value) ? String(value) : null, text });
    };
    const headingId = `${prefix}-${table.name}`;
    const grid = h("div", { class: "recovery-grid" });
    const more = h("button", { type: "button", class: "button button-quiet", text: "Show more rows", hidden: true });
    const state = { rows: [], cursor: null, editing: null };
    const history = h("div", { class: "recovery-history-panel" });
    const shown = table.fields.map((field) => field.name);

    // `message` is announced once the grid shows the change it describes.
    async function load(message, append = false) {
      say(append ? `Loading more ${table.name} rows…` : `Loading ${table.name}…`);
      try {
        const args = { limit: PAGE_SIZE, orderBy: [{ field: "id", direction: "asc" }] };
        if (append && state.cursor) {
          args.cursor = state.cursor;
        }
        const page = await callTool(app.id, table.tools.list, args);
        state.rows = append ? state.rows.concat(page.rows) : page.rows;
        state.cursor = page.nextCursor || null;
        state.editing = null;
        rowNames.set(table.name, new Map(state.rows.map((row) => [String(row.id), rowName(table, row)]).filter(([, name]) => name)));
        render();
        // The tables that refer to this one can name its rows now.
        redrawAll();
        say(message || `${table.name}: ${state.rows.length} ${state.rows.length === 1 ? "row" : "rows"} shown.`);
      } catch (error) {
        fail(error);
      }
    }
    more.addEventListener("click", () => load(null, true));

    function render() {
      more.hidden = !state.cursor;
      if (state.rows.length === 0) {
        replaceChildren(grid, h("p", { class: "empty-inline", text: `No rows in ${table.name} that you can see.` }));
        return;
      }
      replaceChildren(
        grid,
        h(
          "table",
          { class: "recovery-table" },
          h("caption", { class: "visually-hidden", text: `Rows of ${table.name}` }),
          h(
            "thead",
            {},
            h(
              "tr",
              {},
              shown.map((name) => h("th", { scope: "col", text: name })),
              h("th", { scope: "col", text: "version" }),
              h("th", { scope: "col" }, h("span", { class: "visually-hidden", text: "Actions" })),
            ),
          ),
          h("tbody", {}, state.rows.map((row) => (state.editing === row ? editRow(row) : viewRow(row)))),
        ),
      );
    }

    function viewRow(row) {
      const label = `${table.name} row ${row.id}`;
      return h(
        "tr",
        {},
        table.fields.map((field) => h("td", {}, showCell(field, row[field.name]))),
        h("td", { class: "recovery-version", text: String(row[versionField]) }),
        h(
          "td",
          { class: "recovery-actions" },
          h("button", {
            type: "button",
            class: "button button-quiet",
            text: "History",
            "aria-label": `History of ${label}`,
            onclick: () => showHistory(row),
          }),
          table.writable
            ? [
              table.tools.update
                ? h("button", {
                    type: "button",
                    class: "button button-quiet",
                    text: "Edit",
                    "aria-label": `Edit ${label}`,
                    onclick: () => {
                      state.editing = row;
                      render();
                      const first = grid.querySelector("tbody input");
                      if (first) {
                        first.focus();
                      }
                    },
                  })
                : null,
              table.tools.delete
                ? h("button", {
                    type: "button",
                    class: "button button-quiet button-danger",
                    text: "Delete",
                    "aria-label": `Delete ${label}`,
                    onclick: (event) => remove(row, event.currentTarget),
                  })
                : null,
            ]
            : null,
        ),
      );
    }

    // One row's audit entries (the `history` tool: who, when, through which
    // surface, before and after), oldest first, a page at a time.
    async function showHistory(row) {
      const label = `${table.name} row ${row.id}`;
      clearAlert();
      say(`Loading the history of ${label}…`);
      const entries = [];
      let cursor = null;
      try {
        do {
          const args = { id: row.id };
          if (cursor) {
            args.cursor = cursor;
          }
          const page = await callTool(app.id, table.tools.history, args);
          entries.push(...page.entries);
          cursor = page.nextCursor || null;
        } while (cursor && entries.length < HISTORY_SHOWN);
      } catch (error) {
        fail(error);
        return;
      }
      const changed = (entry) => {
        const fields = new Set([...Object.keys(entry.before || {}), ...Object.keys(entry.after || {})]);
        return [...fields]
          .filter((name) => name !== versionField)
          .filter((name) => JSON.stringify((entry.before || {})[name]) !== JSON.stringify((entry.after || {})[name]))
          .map((name) =>
            h(
              "li",
              {},
              `${name}: `,
              entry.before ? showValue(entry.before[name]) : "—",
              " → ",
              entry.after ? showValue(entry.after[name]) : "—",
            ),
          );
      };
      replaceChildren(
        history,
        h("h4", { class: "form-title", text: `History of ${label}` }),
        h(
          "ol",
          { class: "recovery-history", "aria-label": `History of ${label}` },
          entries.map((entry) =>
            h(
              "li",
              {},
              h("strong", { text: entry.operation }),
              ` ${entry.at} by ${personName(entry.actor) || entry.actor} via ${entry.source}`,
              h("ul", {}, changed(entry)),
            ),
          ),
        ),
        h("button", { type: "button", class: "button button-quiet", text: "Close history", onclick: () => replaceChildren(history) }),
      );
      say(`History of ${label}: ${entries.length} ${entries.length === 1 ? "entry" : "entries"}.`);
    }

    function editRow(row) {
      const inputs = new Map();
      const cells = table.fields.map((field) => {
        if (field.readOnly) {
          return h("td", {}, showCell(field, row[field.name]));
        }
        const input = fieldInput(field, `${prefix}-${table.name}-edit-${field.name}`, row[field.name], `${field.name} of ${table.name} row ${row.id}`);
        inputs.set(field.name, input);
        return h("td", {}, input);
      });
      const save = h("button", { type: "button", class: "button button-primary", text: "Save" });
      save.addEventListener("click", async () => {
        clearAlert();
        const changes = {};
        try {
          for (const field of table.fields) {
            const input = inputs.get(field.name);
            if (!input) {
              continue;
            }
            const value = inputValue(field, input, true);
            const before = row[field.name] === undefined ? null : row[field.name];
            if (value !== undefined && value !== before) {
              changes[field.name] = value;
            }
          }
        } catch (error) {
          fail(error);
          return;
        }
        if (Object.keys(changes).length === 0) {
          state.editing = null;
          render();
          say("Nothing changed.");
          return;
        }
        save.disabled = true;
        say(`Saving ${table.name} row ${row.id}…`);
        try {
          await callTool(app.id, table.tools.update, {
            id: row.id,
            changes,
            expectedVersion: row[versionField],
            idempotencyKey: crypto.randomUUID(),
          });
          await load(`Saved ${table.name} row ${row.id}.`);
        } catch (error) {
          save.disabled = false;
          if (isStale(error) || error.code === "APP_NOT_FOUND") {
            await load();
          }
          fail(error);
        }
      });
      const cancel = h("button", {
        type: "button",
        class: "button button-quiet",
        text: "Cancel",
        onclick: () => {
          state.editing = null;
          render();
        },
      });
      return h(
        "tr",
        { class: "recovery-editing" },
        cells,
        h("td", { class: "recovery-version", text: String(row[versionField]) }),
        h("td", { class: "recovery-actions" }, save, cancel),
      );
    }

    async function remove(row, button) {
      if (!window.confirm(`Delete ${table.name} row ${row.id}? This cannot be undone here.`)) {
        return;
      }
      clearAlert();
      button.disabled = true;
      say(`Deleting ${table.name} row ${row.id}…`);
      try {
        await callTool(app.id, table.tools.delete, {
          id: row.id,
          expectedVersion: row[versionField],
          idempotencyKey: crypto.randomUUID(),
        });
        await load(`Deleted ${table.name} row ${row.id}.`);
      } catch (error) {
        button.disabled = false;
        if (isStale(error) || error.code === "APP_NOT_FOUND") {
          await load();
        }
        fail(error);
      }
    }

    function createForm() {
      const writable = table.fields.filter((field) => !field.readOnly);
      const inputs = new Map();
      const fields = writable.map((field) => {
        const id = `${prefix}-${table.name}-new-${field.name}`;
        const hintId = `${id}-hint`;
        const input = fieldInput(field, id, null, null);
        input.removeAttribute("aria-label");
        input.setAttribute("aria-describedby", hintId);
        inputs.set(field.name, input);
        return h(
          "div",
          { class: "field" },
          h("label", { for: id, text: field.required ? `${field.name} (required)` : field.name }),
          input,
          h("span", { class: "hint", id: hintId, text: describeKinds(field) }),
        );
      });
      const submit = h("button", { type: "submit", class: "button button-primary", text: `Add to ${table.name}` });
      return h(
        "form",
        {
          class: "recovery-create",
          novalidate: true,
          onsubmit: async (event) => {
            event.preventDefault();
            clearAlert();
            const values = {};
            try {
              for (const field of writable) {
                const value = inputValue(field, inputs.get(field.name), false);
                if (value !== undefined) {
                  values[field.name] = value;
                }
              }
            } catch (error) {
              fail(error);
              return;
            }
            submit.disabled = true;
            say(`Adding a row to ${table.name}…`);
            try {
              const row = await callTool(app.id, table.tools.create, { values, idempotencyKey: crypto.randomUUID() });
              for (const input of inputs.values()) {
                input.value = "";
              }
              await load(`Added ${table.name} row ${row && row.id !== undefined ? row.id : ""}.`.replace(" .", "."));
            } catch (error) {
              fail(error);
            } finally {
              submit.disabled = false;
            }
          },
        },
        h("h4", { class: "form-title", text: `New ${table.name} row` }),
        h("div", { class: "form-row recovery-fields" }, fields, h("div", { class: "field field-action" }, submit)),
      );
    }

    // Export: every page of the `export` tool, one header, saved as a file.
    async function exportCsv() {
      clearAlert();
      say(`Exporting ${table.name}…`);
      try {
        let text = "";
        let cursor = null;
        let rows = 0;
        do {
          const page = await callTool(app.id, table.tools.export, cursor ? { cursor } : {});
          text += text === "" ? page.csv : page.csv.slice(page.csv.indexOf("\n") + 1);
          rows += page.rows;
          cursor = page.nextCursor || null;
        } while (cursor);
        const link = h("a", { href: URL.createObjectURL(new Blob([text], { type: "text/csv" })), download: `${app.id}-${table.name}.csv`, hidden: true });
        document.body.append(link);
        link.click();
        link.remove();
        say(`Exported ${rows} ${table.name} ${rows === 1 ? "row" : "rows"}.`);
      } catch (error) {
        fail(error);
      }
    }

    // Import: one CSV file through the `import` tool, all rows or none.
    const importInput = h("input", {
      type: "file",
      accept: ".csv,text/csv",
      hidden: true,
      "aria-label": `CSV file to import into ${table.name}`,
      onchange: async () => {
        const file = importInput.files && importInput.files[0];
        importInput.value = "";
        if (!file) {
          return;
        }
        clearAlert();
        say(`Importing ${file.name} into ${table.name}…`);
        try {
          const result = await callTool(app.id, table.tools.import, { csv: await file.text(), idempotencyKey: crypto.randomUUID() });
          await load(`Imported ${result.imported} ${result.imported === 1 ? "row" : "rows"} into ${table.name}.`);
        } catch (error) {
          fail(error);
        }
      },
    });

    const section = h(
      "section",
      { class: "recovery-table-section", "aria-labelledby": headingId, dataset: { table: table.name } },
      h(
        "div",
        { class: "panel-header" },
        h("h3", { id: headingId, text: table.name }),
        h("span", {
          class: "badge badge-small",
          // The panel is for the app's managers, who read every owner's rows
          // of a `managersReadAll` table.
          text:
            table.access !== "owner"
              ? "shared"
              : table.managersReadAll
                ? `every owner's rows (${table.ownerField})`
                : `own rows (${table.ownerField})`,
        }),
        h("button", { type: "button", class: "button button-quiet", text: "Reload", "aria-label": `Reload ${table.name}`, onclick: () => load() }),
        h("button", { type: "button", class: "button button-quiet", text: "Export CSV", "aria-label": `Export ${table.name} as CSV`, onclick: exportCsv }),
        table.tools.import
          ? h("button", { type: "button", class: "button button-quiet", text: "Import CSV", "aria-label": `Import CSV into ${table.name}`, onclick: () => importInput.click() })
          : null,
        importInput,
      ),
      grid,
      more,
      history,
      table.writable && table.tools.create ? createForm() : null,
    );
    // Redrawn when a name arrives, unless a row is being edited.
    redraws.push(() => {
      if (state.editing === null && state.rows.length > 0) {
        render();
      }
    });
    load();
    return section;
  }

  async function start() {
    say("Loading the app's tables…");
    try {
      const descriptor = await api.recovery(app.id);
      if (descriptor.tables.length === 0) {
        replaceChildren(body, h("p", { class: "empty-inline", text: `${app.name} keeps no data tables.` }));
        say("");
        return;
      }
      replaceChildren(
        body,
        descriptor.truncated ? h("p", { class: "hint", text: "Some tables or fields are not shown: this app declares more than the recovery view lists." }) : null,
        descriptor.tables.map((table) => tableSection(descriptor, table)),
      );
    } catch (error) {
      if (error && error.status === 404) {
        fail({ ...error, message: "Recovery needs manage access to this app." });
      } else {
        fail(error);
      }
    }
  }

  const headingId = `${prefix}-heading`;
  const panel = h(
    "section",
    { class: "panel recovery-panel", "aria-labelledby": headingId },
    h(
      "div",
      { class: "panel-header" },
      h("h2", { id: headingId, text: `Recovery: ${app.name}` }),
      h("button", { type: "button", class: "button button-quiet", text: "Close recovery", onclick: onClose }),
    ),
    h("p", {
      class: "hint",
      text: "Works with the app's rows directly, through the same checks as the app itself, while the app's own view is closed. Edits and deletes apply only to the version shown.",
    }),
    status,
    alert,
    body,
  );
  start();
  return panel;
}
