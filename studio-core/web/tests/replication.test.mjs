// Unit tests of the Replication section's pure parts (`../replication.js`)
// and its API wrapper (`../api.js`, against a fake fetch), under Node's
// built-in runner: `node --test studio-core/web/tests/`. The section itself
// runs in real Chromium in tests/browser/replication.mjs.

import assert from "node:assert/strict";
import { afterEach, test } from "node:test";

import * as api from "../api.js";
import { databaseCells, lagText, roleSummary } from "../replication.js";

const realFetch = globalThis.fetch;
afterEach(() => {
  globalThis.fetch = realFetch;
});

test("a lag reads as words", () => {
  assert.equal(lagText(0), "none");
  assert.equal(lagText(undefined), "none");
  assert.equal(lagText(0.42), "0.4 s");
  assert.equal(lagText(12.4), "12 s");
  assert.equal(lagText(600), "10 min");
});

test("a database's row says how far it is replicated and whether it fails", () => {
  const confirmed = (iso) => `at ${iso}`;
  const replicating = databaseCells(
    { database: "core", generation: "1796533390363-4e51de36", txid: 12, replicatedTxid: 12, lastReplicatedAt: "2026-12-06T05:03:10Z", lagSeconds: 0 },
    confirmed,
  );
  assert.deepEqual(replicating, {
    database: "core",
    generation: "1796533390363-4e51de36",
    position: "transaction 12",
    confirmed: "at 2026-12-06T05:03:10Z",
    lag: "none",
    state: "Replicating",
  });
  const failing = databaseCells(
    { database: "expense-log", generation: "g", txid: 40, replicatedTxid: 37, lagSeconds: 14, error: "object storage did not confirm in time" },
    confirmed,
  );
  assert.equal(failing.position, "transaction 37 of 40");
  assert.equal(failing.confirmed, "not yet");
  assert.equal(failing.lag, "14 s");
  assert.equal(failing.state, "Failing: object storage did not confirm in time");
});

test("a role's state is one sentence", () => {
  assert.equal(roleSummary({ mode: "sync", ok: true, databasesTotal: 1 }), "1 database, synchronous (every write confirmed first): all confirmed.");
  assert.equal(roleSummary({ mode: "async", ok: false, databasesTotal: 3 }), "3 databases, asynchronous (within a bounded lag): behind or failing.");
  assert.equal(roleSummary({ ok: false, detail: "data-worker does not answer" }), "Unknown: data-worker does not answer.");
  assert.equal(roleSummary(undefined), "Not replicating.");
});

test("the state is read from the admins' endpoint", async () => {
  const calls = [];
  globalThis.fetch = async (url, init) => {
    calls.push({ url, method: init.method });
    return { status: 200, ok: true, json: async () => ({ enabled: false }) };
  };
  assert.deepEqual(await api.replicationState(), { enabled: false });
  assert.deepEqual(calls, [{ url: "/api/admin/replication", method: "GET" }]);
});
