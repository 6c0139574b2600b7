// Replication on the Users page (admins): each role's replication of its
// databases to object storage, as `GET /api/admin/replication` reports it —
// the mode, whether everything is confirmed, and per database its
// generation, the last replicated position and when it was confirmed, the
// lag, and why it fails while it does. With replication off it says what a
// lost disk would take and where to turn it on.
//
// Read-only: it changes nothing and never shows a setting's value (the
// server sends no URL or credential). It refreshes itself while it is on the
// page and stops once it is gone.

import * as api from "./api.js";
import { h, panelMessages, replaceChildren } from "./dom.js";

/** How often the section asks again while shown. */
export const REFRESH_MS = 5000;

/** The roles in the order they are shown, with their names for people. */
const ROLES = [
  ["studio-core", "Studio (core database)"],
  ["data-worker", "Data worker (app databases)"],
];

/** A lag in seconds as words: "none", "0.4 s", "12 s", "3 min". */
export function lagText(seconds) {
  if (typeof seconds !== "number" || seconds <= 0) {
    return "none";
  }
  if (seconds < 10) {
    return `${seconds.toFixed(1)} s`;
  }
  if (seconds < 120) {
    return `${Math.round(seconds)} s`;
  }
  return `${Math.round(seconds / 60)} min`;
}

/**
 * One database's cells as text: `{database, generation, position, confirmed,
 * lag, state}`. `confirmedText(iso)` renders the last confirmation time.
 */
export function databaseCells(database, confirmedText = (iso) => new Date(iso).toLocaleString()) {
  const replicated = Number(database.replicatedTxid || 0);
  const local = Number(database.txid || 0);
  return {
    database: database.database,
    generation: database.generation,
    position: local > replicated ? `transaction ${replicated} of ${local}` : `transaction ${replicated}`,
    confirmed: database.lastReplicatedAt ? confirmedText(database.lastReplicatedAt) : "not yet",
    lag: lagText(database.lagSeconds),
    state: database.error ? `Failing: ${database.error}` : "Replicating",
  };
}

/** One role's state in a sentence. */
export function roleSummary(role) {
  if (!role) {
    return "Not replicating.";
  }
  if (role.detail) {
    return `Unknown: ${role.detail}.`;
  }
  const total = Number(role.databasesTotal || 0);
  const count = total === 1 ? "1 database" : `${total} databases`;
  const mode = role.mode === "async" ? "asynchronous (within a bounded lag)" : "synchronous (every write confirmed first)";
  return role.ok ? `${count}, ${mode}: all confirmed.` : `${count}, ${mode}: behind or failing.`;
}

/** The table of one role's databases (the most behind first, as sent). */
function databaseTable(label, role) {
  const databases = (role && role.databases) || [];
  if (databases.length === 0) {
    return null;
  }
  return h(
    "table",
    { class: "grants-table connections-table replication-table" },
    h("caption", { class: "visually-hidden", text: `${label}: each database's replication` }),
    h(
      "thead",
      {},
      h(
        "tr",
        {},
        ["Database", "Generation", "Replicated up to", "Last confirmed", "Lag", "State"].map((text) => h("th", { scope: "col", text })),
      ),
    ),
    h(
      "tbody",
      {},
      databases.map((database) => {
        const cells = databaseCells(database);
        return h(
          "tr",
          { dataset: { database: cells.database } },
          h("td", {}, h("span", { class: "grant-name", text: cells.database })),
          h("td", { dataset: { label: "Generation" } }, h("code", { text: cells.generation })),
          h("td", { dataset: { label: "Replicated up to" }, text: cells.position }),
          h("td", { dataset: { label: "Last confirmed" }, text: cells.confirmed }),
          h("td", { dataset: { label: "Lag" }, text: cells.lag }),
          h("td", { dataset: { label: "State" } }, h("span", { class: database.error ? "replication-failing" : "replication-ok", text: cells.state })),
        );
      }),
    ),
  );
}

/** The section's body for one answer of `GET /api/admin/replication`. */
export function replicationBody(state) {
  if (!state || !state.enabled) {
    return [
      h("p", {
        text: "Replication to object storage is off: every database lives only on this server's disk, and a lost disk loses everything written since the last backup.",
      }),
      h("p", { class: "hint", text: "Set SASHA_REPLICA_URL (and the AWS credentials) to replicate every database continuously; see Operating Sasha." }),
    ];
  }
  return ROLES.map(([key, label]) => {
    const role = state.roles ? state.roles[key] : null;
    return h(
      "div",
      { class: "replication-role", dataset: { role: key } },
      h("h3", { text: label }),
      h("p", { class: role && role.ok ? "replication-summary" : "replication-summary replication-failing", text: roleSummary(role) }),
      databaseTable(label, role),
    );
  });
}

/**
 * The Replication section; starts loading at once and refreshes every
 * [`REFRESH_MS`] while it is in the document. `options`:
 * `{onUnauthenticated()}`.
 */
export function replicationSection(options = {}) {
  const status = h("p", { class: "status", role: "status", "aria-live": "polite" });
  const alert = h("div", { class: "alert", role: "alert", hidden: true });
  const body = h("div", { class: "replication-body" });
  const { say, fail, clearAlert } = panelMessages(status, alert, { onUnauthenticated: options.onUnauthenticated || (() => {}) });
  const section = h(
    "section",
    { class: "replication-section", "aria-labelledby": "replication-heading" },
    h("h2", { class: "section-title", id: "replication-heading", text: "Replication" }),
    h("p", { class: "hint", text: "Each database's copy in object storage: how far it is replicated, and how far behind." }),
    status,
    alert,
    body,
  );
  let shown = false;

  async function load() {
    if (!shown) {
      say("Loading the replication state…");
    }
    let state;
    try {
      state = await api.replicationState();
    } catch (error) {
      fail(error);
      return;
    }
    clearAlert();
    replaceChildren(body, ...replicationBody(state));
    say(state.enabled ? "Replication state as of now." : "Replication is off.");
    shown = true;
  }

  async function refresh() {
    await load();
    // Lag changes with no event to the page: ask again (only while the
    // section is on the page).
    setTimeout(() => {
      if (section.isConnected) {
        refresh();
      }
    }, REFRESH_MS);
  }
  refresh();
  return section;
}
