// Error normalisation: the closed registry, diagnostic ids, sanitising.
import { test } from "node:test";
import assert from "node:assert/strict";
import { readFileSync } from "node:fs";
import { UUID, flush, load, settle } from "./harness.mjs";

const HOST_ID = "6f9619ff-8b86-4d01-b42d-00cf4fc964ff";

/** The registry as contract/src/error.rs defines it: code → [retryable, message]. */
function rustRegistry() {
  const source = readFileSync(new URL("../../../contract/src/error.rs", import.meta.url), "utf8");
  const entries = [...source.matchAll(/\(\s*"(APP_[A-Z_]+)",\s*\d+,\s*(true|false),\s*"((?:[^"\\]|\\.)*)",?\s*\)/g)];
  const renames = [...source.matchAll(/#\[serde\(rename = "(APP_[A-Z_]+)"\)\]/g)].map((m) => m[1]);
  assert.ok(renames.length >= 27, "error.rs still lists the codes");
  assert.deepEqual(entries.map((m) => m[1]).sort(), [...renames].sort(), "every code has one entry");
  return new Map(entries.map((m) => [m[1], [m[2] === "true", JSON.parse(`"${m[3]}"`)]]));
}

async function failWith(result) {
  const t = load();
  await t.init();
  const outcome = settle(t.Sasha.data.get("expenses", 1));
  await flush();
  if ("jsonrpcError" in result) t.fail(t.calls()[0].id, result.jsonrpcError);
  else t.respond(t.calls()[0].id, result);
  await flush();
  assert.ok(outcome.error, "rejected");
  return outcome.error;
}

test("the runtime's registry equals contract/src/error.rs: every code, its retryability and default message", async () => {
  const registry = rustRegistry();
  for (const [code, [retryable, message]] of registry) {
    const error = await failWith({ isError: true, content: [], structuredContent: { error: { code } } });
    assert.deepEqual([error.code, error.retryable, error.message], [code, retryable, message], code);
    assert.match(error.diagnosticId, UUID, "a missing diagnostic id is generated");
  }
});

test("a valid host envelope passes through, keeping its diagnostic id and small details", async () => {
  const error = await failWith({ isError: true, content: [], structuredContent: { error: {
    code: "APP_CONFLICT", message: "the record changed since it was read", retryable: false, diagnosticId: HOST_ID, details: { currentVersion: 4 },
  } } });
  assert.ok(error instanceof Error);
  assert.deepEqual({ ...error }, { code: "APP_CONFLICT", message: "the record changed since it was read", retryable: false, diagnosticId: HOST_ID, details: { currentVersion: 4 } });
  assert.deepEqual(JSON.parse(JSON.stringify(error)), { ...error }, "serialises to the envelope");
});

test("unsafe or malformed envelope fields fall back to the registry", async () => {
  const cases = [
    [{ code: "APP_BUSY", message: "x".repeat(501), retryable: "yes", diagnosticId: "not-a-uuid" }, "APP_BUSY", "too many requests are in progress; try again shortly", true],
    [{ code: "APP_CONFLICT", message: "line\nbreak", retryable: 1 }, "APP_CONFLICT", "the record changed since it was read", false],
    [{ code: "APP_CONFLICT", message: "evil \u202etxt.exe" }, "APP_CONFLICT", "the record changed since it was read", false],
    [{ code: "APP_CONFLICT", message: "" }, "APP_CONFLICT", "the record changed since it was read", false],
    [{ code: "APP_MADE_UP", message: "trust me", diagnosticId: HOST_ID }, "APP_INTERNAL", "an internal error occurred", false],
    [{ code: "__proto__" }, "APP_INTERNAL", "an internal error occurred", false],
    [{ code: "toString" }, "APP_INTERNAL", "an internal error occurred", false],
    ["APP_CONFLICT", "APP_INTERNAL", "an internal error occurred", false],
  ];
  for (const [envelope, code, message, retryable] of cases) {
    const error = await failWith({ isError: true, content: [], structuredContent: { error: envelope } });
    assert.deepEqual([error.code, error.message, error.retryable], [code, message, retryable], JSON.stringify(envelope));
    assert.match(error.diagnosticId, UUID);
    assert.notEqual(error.diagnosticId, "not-a-uuid");
    assert.equal("details" in error, false);
  }
  const unknown = await failWith({ isError: true, content: [], structuredContent: { error: { code: "APP_MADE_UP", diagnosticId: HOST_ID } } });
  assert.equal(unknown.diagnosticId, HOST_ID, "a valid host id is kept even for an unknown code");
  const noEnvelope = await failWith({ isError: true, content: [{ type: "text", text: "SQLITE_BUSY at /var/lib" }] });
  assert.equal(noEnvelope.code, "APP_INTERNAL");
  assert.doesNotMatch(noEnvelope.message, /SQLITE|var/);
});

test("details are kept only as a small object", async () => {
  const big = await failWith({ isError: true, content: [], structuredContent: { error: { code: "APP_CONFLICT", details: { blob: "x".repeat(5000) } } } });
  assert.equal("details" in big, false);
  const list = await failWith({ isError: true, content: [], structuredContent: { error: { code: "APP_CONFLICT", details: [1] } } });
  assert.equal("details" in list, false);
});

test("JSON-RPC errors: -32602 is APP_INPUT_INVALID, others APP_OPERATION_UNAVAILABLE, messages bounded and cleaned", async () => {
  const invalid = await failWith({ jsonrpcError: { code: -32602, message: "Tool app__expense_log__nope__get not found" } });
  assert.deepEqual([invalid.code, invalid.message, invalid.retryable], ["APP_INPUT_INVALID", "Tool app__expense_log__nope__get not found", false]);
  const refused = await failWith({ jsonrpcError: { code: -32000, message: `denied\u0000\n${"y".repeat(1000)}` } });
  assert.equal(refused.code, "APP_OPERATION_UNAVAILABLE");
  assert.ok(refused.message.length <= 200, "bounded");
  assert.doesNotMatch(refused.message, /[\u0000-\u001f]/);
  assert.ok(refused.message.startsWith("denied"));
  const silent = await failWith({ jsonrpcError: { code: -32603 } });
  assert.deepEqual([silent.code, silent.message], ["APP_OPERATION_UNAVAILABLE", "this operation is not available"]);
  const envelope = await failWith({ jsonrpcError: { code: -32000, message: "busy", data: { code: "APP_BUSY", message: "the host is busy", diagnosticId: HOST_ID } } });
  assert.deepEqual([envelope.code, envelope.message, envelope.retryable, envelope.diagnosticId], ["APP_BUSY", "the host is busy", true, HOST_ID]);
});

test("local failures carry fresh UUIDs; without randomUUID the ids are still version-4 UUIDs", async () => {
  const { webcrypto } = await import("node:crypto");
  const t = load({ crypto: { getRandomValues: (array) => webcrypto.getRandomValues(array) } });
  await t.init();
  const a = settle(t.Sasha.data.update("expenses", 1, {}));
  const b = settle(t.Sasha.data.create("expenses", { amount: 1 }));
  await flush();
  assert.match(a.error.diagnosticId, UUID);
  assert.match(t.calls()[0].params.arguments.idempotencyKey, UUID);
});
