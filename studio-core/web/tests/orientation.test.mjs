// Unit tests of the orientation's pure parts (`../orientation.js`: the
// admin's checklist steps from what is known) and of History's one list of
// revisions and reverts (`../history.js`), under Node's built-in runner:
// `node --test studio-core/web/tests/`. The pages run in real Chromium in
// tests/browser/orientation.mjs and tests/browser/history.mjs.

import assert from "node:assert/strict";
import { test } from "node:test";

import { historyEntries } from "../history.js";
import { checklistSteps } from "../orientation.js";

test("the checklist's steps tick from what the server and the browser know", () => {
  const fresh = checklistSteps({ others: 0, clients: 0, apps: 0, opened: false });
  assert.deepEqual(
    fresh.map((step) => [step.id, step.done]),
    [
      ["invite", false],
      ["connect", false],
      ["create", false],
      ["open", false],
    ],
  );
  // Every step still to do says where its work happens, except opening an app (the list itself).
  assert.deepEqual(
    fresh.map((step) => step.hash),
    ["#/users", "#/connections", "#/create", null],
  );
  const done = checklistSteps({ others: 2, clients: 1, apps: 3, opened: true });
  assert.ok(done.every((step) => step.done));
  // A count that could not be read is no step done.
  const unread = checklistSteps({ others: null, clients: null, apps: 0, opened: false });
  assert.ok(unread.every((step) => !step.done));
});

test("History lists reverts among the revisions, newest first", () => {
  const revisions = [
    { revision: "c".repeat(64), recordedAt: 300, current: false },
    { revision: "b".repeat(64), recordedAt: 200, current: false },
    { revision: "a".repeat(64), recordedAt: 100, current: true },
  ];
  const reverts = [{ at: 400, user: "ada", from: "c".repeat(64), to: "a".repeat(64) }];
  const entries = historyEntries(revisions, reverts);
  assert.equal(entries.length, 4);
  assert.deepEqual(entries[0], { revert: reverts[0] });
  assert.deepEqual(
    entries.slice(1).map((entry) => entry.revision.recordedAt),
    [300, 200, 100],
  );
  // A revert in the same second as a revision comes first: it went back to an older one.
  const tied = historyEntries(revisions, [{ at: 300, user: "ada", from: "c".repeat(64), to: "b".repeat(64) }]);
  assert.ok(tied[0].revert, JSON.stringify(tied[0]));
  assert.deepEqual(historyEntries([], []), []);
});

test("Recovery names people and referenced rows, and keeps the value when it knows no name", async () => {
  const { cellText, rowName } = await import("../recovery.js");
  const projects = {
    ownerField: null,
    fields: [
      { name: "id", kinds: ["integer"], readOnly: true },
      { name: "name", kinds: ["string"], readOnly: false },
    ],
  };
  assert.equal(rowName(projects, { id: 3, name: "Apollo" }), "Apollo");
  assert.equal(rowName(projects, { id: 4, name: "  " }), "");
  const entries = {
    ownerField: "created_by",
    fields: [
      { name: "created_by", kinds: ["string"], readOnly: true },
      { name: "note", kinds: ["string"], readOnly: false },
    ],
  };
  // The owner's id is never a row's name.
  assert.equal(rowName(entries, { created_by: "0b7c…", note: "" }), "");
  const people = new Map([["u-1", "ada"]]);
  assert.equal(cellText("u-1", (id) => people.get(id) || ""), "ada");
  assert.equal(cellText("u-2", (id) => people.get(id) || ""), "u-2");
  assert.equal(cellText(7, null), "7");
  assert.equal(cellText(null, null), null);
});
