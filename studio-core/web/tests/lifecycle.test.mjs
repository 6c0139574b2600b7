// Unit tests of the lifecycle controls' pure parts (`../withdrawn.js`), the
// History panel's "View file" helpers (`../history.js`) and the API wrappers
// they call (`../api.js`, against a fake fetch), under Node's built-in runner:
// `node --test studio-core/web/tests/`. The pages themselves run in real
// Chromium in tests/browser/lifecycle.mjs and tests/browser/history.mjs.

import assert from "node:assert/strict";
import { afterEach, test } from "node:test";

import * as api from "../api.js";
import { byteText, fileView, viewRevision } from "../history.js";
import { deleteReady, deletedText, withdrawnMeta, withdrawnState } from "../withdrawn.js";

const realFetch = globalThis.fetch;
afterEach(() => {
  globalThis.fetch = realFetch;
});

/** A fake fetch answering `status` with `body`, recording each call. */
function fakeFetch(status, body) {
  const calls = [];
  globalThis.fetch = async (url, init) => {
    calls.push({ url, init, body: init.body === undefined ? undefined : JSON.parse(init.body) });
    return { status, ok: status >= 200 && status < 300, json: async () => body };
  };
  return calls;
}

test("the Delete button waits for the app id only when the data goes too", () => {
  assert.equal(deleteReady({ deleteData: false, typed: "", appId: "field-notes" }), true);
  assert.equal(deleteReady({ deleteData: true, typed: "", appId: "field-notes" }), false);
  assert.equal(deleteReady({ deleteData: true, typed: "field-note", appId: "field-notes" }), false);
  assert.equal(deleteReady({ deleteData: true, typed: "Field-notes", appId: "field-notes" }), false);
  assert.equal(deleteReady({ deleteData: true, typed: "field-notes", appId: "field-notes" }), true);
  assert.equal(deleteReady({ deleteData: true, typed: " field-notes ", appId: "field-notes" }), true);
});

test("a withdrawn app says who withdrew it and when", () => {
  const entry = { app: "field-notes", name: "Field notes", withdrawnAt: 1_700_000_000, withdrawnBy: "admin" };
  assert.equal(withdrawnMeta(entry, (s) => `at ${s}`), "field-notes · withdrawn at 1700000000 by admin");
  assert.equal(withdrawnMeta({ ...entry, withdrawnBy: null }, () => "then"), "field-notes · withdrawn then by someone unknown");
  assert.match(withdrawnMeta(entry), /^field-notes · withdrawn .+ by admin$/);
});

test("what is left of a withdrawn app is said in a sentence", () => {
  assert.match(withdrawnState({}), /kept/);
  assert.match(withdrawnState({ packageDeleted: true }), /package is deleted.*cannot be restored/);
  assert.match(withdrawnState({ packageDeleted: true, dataDeleted: true }), /package and its data are deleted/);
  assert.match(withdrawnState({ dataDeleted: true }), /data is deleted/);
});

test("a delete answer names the data backup", () => {
  assert.equal(deletedText("Field notes", { packageDeleted: true, dataDeleted: false }), "Deleted the package of Field notes. Its data is kept.");
  assert.equal(
    deletedText("Field notes", { packageDeleted: true, dataDeleted: true, dataBackup: "field-notes-1700000000.sqlite" }),
    "Deleted the package of Field notes. Its data was backed up to field-notes-1700000000.sqlite and deleted.",
  );
  assert.equal(deletedText("X", { dataDeleted: true }), "Deleted the package of X. Its data was deleted.");
});

test("View file shows text, and names a binary asset with its size instead of base64", () => {
  assert.deepEqual(fileView({ path: "notes.txt", content: "Fence post\n", bytes: 11, version: "v" }), { binary: false, text: "Fence post\n" });
  const binary = fileView({ path: "logo.png", content: "iVBORw0KGgo=", bytes: 2048, encoding: "base64" });
  assert.equal(binary.binary, true);
  assert.equal(binary.text, "logo.png is a binary asset of 2.0 KB (2048 bytes); it is not shown here.");
  assert.ok(!binary.text.includes("iVBOR"));
  assert.equal(byteText(1), "1 byte");
  assert.equal(byteText(12), "12 bytes");
  assert.equal(byteText(3 * 1024 * 1024), "3.0 MB (3145728 bytes)");
});

test("View file reads a file the chosen revision lacks at the current one", () => {
  assert.equal(viewRevision({ change: "changed" }, "old", "now"), "old");
  assert.equal(viewRevision({ change: "added" }, "old", "now"), "old");
  assert.equal(viewRevision({ change: "removed" }, "old", "now"), "now");
});

test("withdraw and restore post without a body; delete posts the confirmation", async () => {
  const answer = { app: "field-notes", changed: true, withdrawn: true, packageDeleted: false, dataDeleted: false };
  let calls = fakeFetch(200, answer);
  assert.deepEqual(await api.withdrawApp("field-notes"), answer);
  assert.equal(calls[0].url, "/api/apps/field-notes/withdraw");
  assert.equal(calls[0].init.method, "POST");
  assert.equal(calls[0].init.credentials, "same-origin");
  assert.equal(calls[0].body, undefined);
  assert.equal(calls[0].init.headers["Content-Type"], undefined);

  calls = fakeFetch(200, answer);
  await api.restoreApp("field-notes");
  assert.equal(calls[0].url, "/api/apps/field-notes/restore");
  assert.equal(calls[0].init.method, "POST");

  calls = fakeFetch(200, { ...answer, dataDeleted: true, dataBackup: "b.sqlite" });
  const deleted = await api.deleteApp("field-notes", { deleteData: true, confirmAppId: "field-notes" });
  assert.equal(deleted.dataBackup, "b.sqlite");
  assert.equal(calls[0].url, "/api/apps/field-notes/delete");
  assert.equal(calls[0].init.headers["Content-Type"], "application/json");
  assert.deepEqual(calls[0].body, { deleteData: true, confirmAppId: "field-notes" });

  calls = fakeFetch(200, answer);
  await api.deleteApp("field-notes");
  assert.deepEqual(calls[0].body, { deleteData: false, confirmAppId: "" });

  calls = fakeFetch(200, { apps: [] });
  assert.deepEqual(await api.listWithdrawnApps(), { apps: [] });
  assert.equal(calls[0].url, "/api/withdrawn-apps");
  assert.equal(calls[0].init.method, "GET");
});

test("a revision's file is asked for with its path escaped", async () => {
  const calls = fakeFetch(200, { path: "ui/a b.html", content: "x" });
  await api.revisionFile("field-notes", "ab12", "ui/a b.html");
  assert.equal(calls[0].url, "/api/apps/field-notes/revisions/ab12/file?path=ui%2Fa%20b.html");
});

test("a refusal keeps its code and diagnostic id", async () => {
  fakeFetch(409, { code: "APP_CONFLICT", message: "the package was deleted", retryable: false, diagnosticId: "d-1" });
  await assert.rejects(api.restoreApp("gone"), (error) => {
    assert.equal(error.status, 409);
    assert.equal(error.code, "APP_CONFLICT");
    assert.equal(error.diagnosticId, "d-1");
    return true;
  });
});
