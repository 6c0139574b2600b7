// The Activity panel: who changed the app's data, through what, and undo.
//
// It lists the app's changes newest first (`listAppActivity`), filtered by
// initiator, its id (a conversation, a client, a token, an undo), table and
// time, and undoes a selection: the changes ticked, or everything one
// initiator did. "Preview" asks `previewAppUndo` and shows each row's current
// and earlier state and the conflicts; "Undo" sends `undoAppChanges` with
// the previewed plan's hash and the conflicts the person ticked to
// overwrite. "Preview restore" does the same for the rows as they were at an
// instant (`asOf`), read from the ledger or, ticked, from the copy of the
// app's data in object storage (`from: "replica"`); when the ledger starts
// after the instant, the preview says so. The person's click is the approval: the calls go to `/mcp` as
// the app's own managing page (`callTool`, shared with the recovery grid),
// and data-worker decides everything again. Nothing here decides access.

import { h, panelMessages, replaceChildren } from "./dom.js";
import { callTool } from "./recovery.js";
import { INITIATORS } from "./vocabulary.js";

const PAGE_SIZE = 50;


let panelCount = 0;

/** A row image in one line: its fields but the platform's. */
function summary(image) {
  if (!image || typeof image !== "object") {
    return "—";
  }
  return Object.entries(image)
    .filter(([key]) => !key.startsWith("_sasha"))
    .map(([key, value]) => `${key}: ${value === null ? "null" : String(value)}`)
    .join(", ");
}

function by(entry) {
  return entry.initiatorId ? `${entry.initiator} ${entry.initiatorId}` : entry.initiator || "unknown";
}

export function activityPanel(options) {
  const { app, onClose = () => {} } = options;
  const onUnauthenticated = options.onUnauthenticated || (() => {});
  panelCount += 1;
  const prefix = `activity-${panelCount}`;
  const status = h("p", { class: "status", role: "status", "aria-live": "polite" });
  const alert = h("p", { class: "alert", role: "alert", hidden: true });
  const { say, fail, clearAlert } = panelMessages(status, alert, { onUnauthenticated });

  const initiator = h("select", { id: `${prefix}-initiator`, name: "initiator" }, h("option", { value: "", text: "Anyone" }), ...INITIATORS.map((word) => h("option", { value: word, text: word })));
  const initiatorId = h("input", { id: `${prefix}-initiator-id`, name: "initiatorId", type: "text", placeholder: "conversation, client or undo id" });
  const table = h("input", { id: `${prefix}-table`, name: "table", type: "text", placeholder: "every table" });
  const since = h("input", { id: `${prefix}-since`, name: "since", type: "datetime-local", step: "1" });
  const asOf = h("input", { id: `${prefix}-as-of`, name: "asOf", type: "datetime-local", step: "1" });
  const fromReplica = h("input", { id: `${prefix}-from-replica`, name: "from", type: "checkbox", value: "replica" });
  const list = h("tbody");
  const plan = h("div", { class: "activity-plan" });
  const more = h("button", { type: "button", class: "button", text: "Older changes", hidden: true });
  let cursor = null;
  let entries = [];

  /** The selection the filters (and ticked rows) name. */
  function selection() {
    const chosen = [...list.querySelectorAll("input[type=checkbox]:checked")].map((box) => Number(box.value));
    const picked = { app: app.id };
    if (chosen.length > 0) {
      picked.entries = chosen;
      return picked;
    }
    if (initiator.value) {
      picked.initiator = initiator.value;
    }
    if (initiatorId.value.trim()) {
      picked.initiatorId = initiatorId.value.trim();
    }
    if (table.value.trim()) {
      picked.table = table.value.trim();
    }
    picked.since = since.value ? new Date(since.value).toISOString() : "2000-01-01T00:00:00Z";
    return picked;
  }

  function filters() {
    const picked = { app: app.id, limit: PAGE_SIZE };
    for (const [field, value] of [["initiator", initiator.value], ["initiatorId", initiatorId.value.trim()], ["table", table.value.trim()]]) {
      if (value) {
        picked[field] = value;
      }
    }
    if (since.value) {
      picked.since = new Date(since.value).toISOString();
    }
    return picked;
  }

  function entryRow(entry) {
    return h(
      "tr",
      { "data-entry": String(entry.entry) },
      // A migration changed the table's shape, which an undo does not take
      // back (revert the app instead): it is listed, not selectable.
      h("td", {}, h("input", { type: "checkbox", value: String(entry.entry), "aria-label": `Select change ${entry.entry}`, disabled: entry.operation === "migrate", title: entry.operation === "migrate" ? "A migration is undone by reverting the app" : null })),
      h("td", { text: entry.at }),
      h("td", { text: entry.actor || "—" }),
      h("td", { class: "activity-initiator", text: by(entry) }),
      h("td", { text: `${entry.table} ${entry.record}` }),
      h("td", { text: entry.operation }),
      h("td", { text: summary(entry.before) }),
      h("td", { text: summary(entry.after) }),
    );
  }

  async function load(reset) {
    clearAlert();
    if (reset) {
      cursor = null;
      entries = [];
      replaceChildren(list);
    }
    say("Loading the changes…");
    try {
      const answer = await callTool(app.id, "listAppActivity", cursor ? { ...filters(), cursor } : filters());
      entries = entries.concat(answer.entries);
      list.append(...answer.entries.map(entryRow));
      cursor = answer.nextCursor || null;
      more.hidden = !cursor;
      say(entries.length === 0 ? "No changes match." : `${entries.length} changes shown, newest first.`);
    } catch (error) {
      fail(error);
    }
  }

  /** The heading of a preview of `picked`, from the preview's `answer`. */
  function heading(picked, answer) {
    if (!picked.asOf) {
      return `Undo ${answer.entries} changes: ${answer.rows} rows, ${answer.conflicts} conflicts`;
    }
    const source = answer.from === "replica" ? "from the copy in object storage" : `by undoing ${answer.entries} changes`;
    return `Restore to ${picked.asOf} ${source}: ${answer.rows} rows, ${answer.conflicts} conflicts`;
  }

  /** Rows from before the ledger are only in the replica: say so. */
  function ledgerNote(picked, answer) {
    if (picked.asOf && answer.from === "ledger" && answer.ledgerStarts && answer.ledgerStarts > picked.asOf) {
      return h("p", { class: "activity-note", text: `The ledger starts at ${answer.ledgerStarts}: rows older than it are only in the copy in object storage. Tick "from the copy in object storage" to restore them too.` });
    }
    return null;
  }

  function restoreSelection() {
    const picked = { app: app.id, asOf: new Date(asOf.value).toISOString() };
    if (table.value.trim()) {
      picked.table = table.value.trim();
    }
    if (fromReplica.checked) {
      picked.from = "replica";
    }
    return picked;
  }

  async function preview(picked) {
    clearAlert();
    replaceChildren(plan);
    say(picked.asOf ? "Working out the restore…" : "Working out the undo…");
    try {
      const answer = await callTool(app.id, "previewAppUndo", { ...picked, limit: 200 });
      const rows = answer.page.map((row) => {
        const overwrite = row.conflict
          ? h("input", { type: "checkbox", class: "activity-overwrite", "aria-label": `Overwrite ${row.table} ${row.id} anyway`, "data-table": row.table, "data-id": JSON.stringify(row.id) })
          : null;
        return h(
          "tr",
          { class: row.conflict ? "activity-conflict" : "" },
          h("td", { text: `${row.table} ${row.id}` }),
          h("td", { text: row.action }),
          h("td", { text: summary(row.current) }),
          h("td", { text: summary(row.target) }),
          h("td", {}, row.conflict ? h("span", { text: row.conflict.reason === "changed-since" ? "changed since by someone else; left alone unless ticked " : "changed outside Sasha; left alone unless ticked " }) : null, overwrite),
        );
      });
      const apply = h("button", { type: "button", class: "button button-danger", text: `${picked.asOf ? "Restore" : "Undo"} ${answer.rows} rows` });
      apply.disabled = answer.rows === 0;
      apply.addEventListener("click", async () => {
        apply.disabled = true;
        const overwrite = [...plan.querySelectorAll("input.activity-overwrite:checked")].map((box) => ({ table: box.dataset.table, id: JSON.parse(box.dataset.id) }));
        say("Undoing…");
        try {
          const done = await callTool(app.id, "undoAppChanges", { ...picked, planHash: answer.planHash, overwrite, idempotencyKey: crypto.randomUUID() });
          replaceChildren(plan, h("p", { class: "activity-done", text: `Undone: ${done.recreated} recreated, ${done.updated} put back, ${done.deleted} removed, ${done.leftAlone.length} left alone. To take it back, undo ${done.undoId}.` }));
          await load(true);
          say(`Undone (${done.undoId}).`);
        } catch (error) {
          apply.disabled = false;
          fail(error);
        }
      });
      replaceChildren(
        plan,
        h("h3", { text: heading(picked, answer) }),
        ledgerNote(picked, answer),
        h("table", { class: "activity-preview" }, h("thead", {}, h("tr", {}, ...["Row", "Action", "Now", "After the undo", "Conflict"].map((text) => h("th", { text })))), h("tbody", {}, ...rows)),
        apply,
      );
      say("Check the rows, then undo.");
    } catch (error) {
      fail(error);
    }
  }

  const form = h(
    "form",
    { class: "activity-filters" },
    h("label", { for: initiator.id, text: "Started by" }),
    initiator,
    h("label", { for: initiatorId.id, text: "Id" }),
    initiatorId,
    h("label", { for: table.id, text: "Table" }),
    table,
    h("label", { for: since.id, text: "Since" }),
    since,
    h("button", { type: "submit", class: "button", text: "Show" }),
  );
  form.addEventListener("submit", (event) => {
    event.preventDefault();
    replaceChildren(plan);
    load(true);
  });
  more.addEventListener("click", () => load(false));
  const previewButton = h("button", { type: "button", class: "button", text: "Preview undo", onclick: () => preview(selection()) });
  const restoreForm = h(
    "form",
    { class: "activity-restore" },
    h("label", { for: asOf.id, text: "Restore the rows as they were at" }),
    asOf,
    h("div", { class: "check-field" }, fromReplica, h("label", { for: fromReplica.id, text: "from the copy in object storage" })),
    h("button", { type: "submit", class: "button", text: "Preview restore" }),
  );
  restoreForm.addEventListener("submit", (event) => {
    event.preventDefault();
    if (!asOf.value) {
      fail("Say the instant to restore to.");
      return;
    }
    preview(restoreSelection());
  });
  const element = h(
    "section",
    { class: "activity-panel", "aria-labelledby": `${prefix}-title` },
    h("h2", { id: `${prefix}-title`, text: `Activity of ${app.name}` }),
    h("p", { text: "Every change to the app's data, who made it and through what. Tick changes, or filter by who started them, then preview the undo." }),
    form,
    status,
    alert,
    h("table", { class: "activity-list" }, h("thead", {}, h("tr", {}, ...["", "When", "Who", "Through", "Row", "Change", "Before", "After"].map((text) => h("th", { text })))), list),
    more,
    previewButton,
    h("p", { text: "Or put the rows (of the table above, or of every table) back as they were at an instant: every change after it is undone, or, from the copy in object storage, the rows are compared with that copy." }),
    restoreForm,
    h("button", { type: "button", class: "button button-quiet", text: "Close", onclick: onClose }),
    plan,
  );
  load(true);
  return element;
}
