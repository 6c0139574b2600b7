// Data and actions: tool names, argument shapes, idempotency keys, the pool,
// timeouts and local capability checks.
import { test } from "node:test";
import assert from "node:assert/strict";
import { APP, UUID, flush, load, settle } from "./harness.mjs";

async function connected(options) {
  const t = load(options);
  await t.init();
  return t;
}

test("each data operation is one tools/call with the gateway's name and argument shape", async () => {
  const t = await connected();
  const query = { where: [{ field: "spent_on", operator: "gte", value: "2026-09-01" }], limit: 10 };
  const aggregation = { groupBy: ["category_id"], metrics: [{ as: "total", sum: "amount" }] };
  const results = [
    settle(t.Sasha.data.list("expenses", query)),
    settle(t.Sasha.data.get("expenses", 7)),
    settle(t.Sasha.data.aggregate("expense-items", aggregation)),
    settle(t.Sasha.data.create("expenses", { amount: 12.5 }, { idempotencyKey: "k-create" })),
  ];
  await flush();
  results.push(settle(t.Sasha.data.update("expenses", 7, { amount: 13 }, { expectedVersion: 2, idempotencyKey: "k-update" })));
  results.push(settle(t.Sasha.data.delete("expenses", "row-7", { expectedVersion: 3, idempotencyKey: "k-delete" })));
  await flush();
  assert.equal(t.calls().length, 4, "the pool holds back calls 5 and 6");
  for (let i = 0; i < 6; i++) {
    t.answer(t.calls()[i], { result: i });
    await flush();
  }
  assert.deepEqual(t.calls().map((call) => call.params), [
    { name: "app__expense_log__expenses__list", arguments: query },
    { name: "app__expense_log__expenses__get", arguments: { id: 7 } },
    { name: "app__expense_log__expense_items__aggregate", arguments: aggregation },
    { name: "app__expense_log__expenses__create", arguments: { values: { amount: 12.5 }, idempotencyKey: "k-create" } },
    { name: "app__expense_log__expenses__update", arguments: { id: 7, changes: { amount: 13 }, expectedVersion: 2, idempotencyKey: "k-update" } },
    { name: "app__expense_log__expenses__delete", arguments: { id: "row-7", expectedVersion: 3, idempotencyKey: "k-delete" } },
  ]);
  assert.deepEqual(results.map((r) => r.value), [0, 1, 2, 3, 4, 5].map((i) => ({ result: i })), "resolves with structuredContent");
});

test("list without a query sends {}", async () => {
  const t = await connected();
  t.Sasha.data.list("expenses");
  await flush();
  assert.deepEqual(t.calls()[0].params.arguments, {});
});

test("mutations get a fresh UUID idempotency key unless one is given", async () => {
  const t = await connected();
  t.Sasha.data.create("expenses", { amount: 1 });
  t.Sasha.data.create("expenses", { amount: 1 }, {});
  t.Sasha.data.update("expenses", 1, { amount: 2 }, { expectedVersion: 1 });
  t.Sasha.data.delete("expenses", 1, { expectedVersion: 1 });
  await flush();
  const keys = t.calls().map((call) => call.params.arguments.idempotencyKey);
  assert.equal(keys.length, 4);
  for (const key of keys) assert.match(key, UUID);
  assert.equal(new Set(keys).size, 4, "each call its own key");
});

test("a retry with the same given key sends the same key", async () => {
  const t = await connected();
  const key = "3f1c1d7e-2a43-4d0b-9a8e-0b1f0c2d3e4f";
  t.Sasha.data.create("expenses", { amount: 1 }, { idempotencyKey: key });
  t.Sasha.data.create("expenses", { amount: 1 }, { idempotencyKey: key });
  await flush();
  assert.deepEqual(t.calls().map((call) => call.params.arguments.idempotencyKey), [key, key]);
});

test("local argument checks reject with APP_INPUT_INVALID and send nothing", async () => {
  const t = await connected();
  const bad = [
    t.Sasha.data.update("expenses", 1, { amount: 2 }),
    t.Sasha.data.update("expenses", 1, { amount: 2 }, { expectedVersion: "2" }),
    t.Sasha.data.delete("expenses", 1, { expectedVersion: 0 }),
    t.Sasha.data.delete("expenses", 1),
    t.Sasha.data.create("expenses", { amount: 1 }, { idempotencyKey: "" }),
    t.Sasha.data.create("expenses", { amount: 1 }, { idempotencyKey: "x".repeat(201) }),
    t.Sasha.data.create("expenses", [1]),
    t.Sasha.data.list("expenses", "where"),
    t.Sasha.data.get("expenses", { id: 1 }),
    t.Sasha.data.get("bad__name", 1),
    t.Sasha.data.get("", 1),
    t.Sasha.data.list(42, {}),
    t.Sasha.actions.call("week_totals/../x", {}),
    t.Sasha.actions.call("week-totals", "input"),
    t.Sasha.actions.call("week-totals", {}, { idempotencyKey: 7 }),
    t.Sasha.data.list("expenses", { where: [() => 1] }),
  ].map(settle);
  await flush();
  for (const outcome of bad) {
    assert.equal(outcome.error && outcome.error.code, "APP_INPUT_INVALID", JSON.stringify(outcome));
    assert.match(outcome.error.diagnosticId, UUID);
  }
  assert.equal(t.calls().length, 0, "nothing was sent (postMessage refused the uncloneable query)");
});

test("names map - to _ for the app id, table and action", async () => {
  const t = await connected({ config: { ...APP, id: "time-sheets-2" } });
  t.Sasha.data.list("time-entries", {});
  t.Sasha.actions.call("submit-week", { weekStart: "2026-09-07" });
  await flush();
  assert.deepEqual(t.calls().map((call) => call.params.name), ["app__time_sheets_2__time_entries__list", "app__time_sheets_2__submit_week"]);
});

test("actions.call sends the input as arguments and the key in _meta", async () => {
  const t = await connected();
  const given = settle(t.Sasha.actions.call("week-totals", { weekStart: "2026-09-07" }, { idempotencyKey: "retry-1" }));
  t.Sasha.actions.call("week-totals", { weekStart: "2026-09-07" });
  t.Sasha.actions.call("list-all");
  await flush();
  const [first, second, third] = t.calls().map((call) => call.params);
  assert.deepEqual(first, { name: "app__expense_log__week_totals", arguments: { weekStart: "2026-09-07" }, _meta: { "sasha/idempotencyKey": "retry-1" } });
  assert.match(second._meta["sasha/idempotencyKey"], UUID);
  assert.deepEqual(Object.keys(second), ["name", "arguments", "_meta"]);
  assert.deepEqual(third.arguments, {});
  t.answer(t.calls()[0], { totalHours: 12 });
  await flush();
  assert.deepEqual(given.value, { totalHours: 12 });
});

test("at most four data calls are in flight; the rest start in order as answers arrive", async () => {
  const t = await connected();
  const outcomes = Array.from({ length: 7 }, (_, i) => settle(i % 2 ? t.Sasha.actions.call("a", { i }) : t.Sasha.data.list("expenses", { limit: i + 1 })));
  await flush();
  assert.equal(t.calls().length, 4);
  t.answer(t.calls()[2], { n: 2 });
  await flush();
  assert.equal(t.calls().length, 5);
  assert.deepEqual(t.calls()[4].params.arguments, { limit: 5 });
  t.fail(t.calls()[0].id, { code: -32000, message: "refused" });
  t.answer(t.calls()[1], { n: 1 }, true);
  await flush();
  assert.equal(t.calls().length, 7, "failures free their slot too");
  assert.equal(outcomes[2].value.n, 2);
  assert.equal(outcomes[0].error.code, "APP_OPERATION_UNAVAILABLE");
  for (const call of t.calls().slice(3)) t.answer(call, { ok: true });
  await flush();
  assert.ok(outcomes.every((o) => o.done));
});

test("a data call times out after 30 s with APP_TIMEOUT and its late result is ignored", async () => {
  const t = await connected();
  const slow = settle(t.Sasha.data.get("expenses", 1));
  await flush();
  await t.clock.advance(29999);
  assert.equal(slow.done, false);
  await t.clock.advance(1);
  assert.equal(slow.error.code, "APP_TIMEOUT");
  assert.equal(slow.error.retryable, true);
  t.answer(t.calls()[0], { id: 1 });
  await flush();
  assert.equal(slow.error.code, "APP_TIMEOUT");
  const next = settle(t.Sasha.data.get("expenses", 2));
  await flush();
  t.answer(t.calls()[1], { id: 2 });
  await flush();
  assert.deepEqual(next.value, { id: 2 }, "the timed-out call freed its slot");
});

test("undeclared capabilities are refused locally with APP_CAPABILITY_DENIED", async () => {
  const t = await connected({ config: { ...APP, capabilities: { chat: false, files: false, data: "read" } } });
  const denied = [
    t.Sasha.data.create("expenses", { amount: 1 }),
    t.Sasha.data.update("expenses", 1, {}, { expectedVersion: 1 }),
    t.Sasha.data.delete("expenses", 1, { expectedVersion: 1 }),
    t.Sasha.chat.execute("hi"),
    t.Sasha.files.upload([]),
  ].map(settle);
  const read = settle(t.Sasha.data.list("expenses", {}));
  await flush();
  for (const outcome of denied) assert.equal(outcome.error.code, "APP_CAPABILITY_DENIED");
  assert.equal(t.calls().length, 1);
  assert.equal(read.done, false);
  const none = await connected({ config: { ...APP, capabilities: { chat: false, files: false, data: "false" } } });
  const list = settle(none.Sasha.data.list("expenses", {}));
  await flush();
  assert.equal(list.error.code, "APP_CAPABILITY_DENIED");
});

test("a success without structuredContent is a sanitised APP_INTERNAL", async () => {
  const t = await connected();
  const outcome = settle(t.Sasha.data.get("expenses", 1));
  await flush();
  t.respond(t.calls()[0].id, { content: [{ type: "text", text: "<b>raw</b>" }] });
  await flush();
  assert.equal(outcome.error.code, "APP_INTERNAL");
  assert.doesNotMatch(outcome.error.message, /raw/);
});

test("allows asks the host's tools/list whether this person has the table's tool", async () => {
  const t = await connected();
  const may = settle(t.Sasha.data.allows("expense-items", "update"));
  const mayNot = settle(t.Sasha.data.allows("expenses", "delete"));
  await flush();
  const lists = t.requests("tools/list");
  assert.equal(lists.length, 2, "one tools/list per question");
  assert.equal(t.calls().length, 0, "nothing is called");
  for (const list of lists) {
    t.respond(list.id, { tools: [{ name: "app__expense_log__expense_items__update" }, { name: "app__expense_log__expenses__list" }] });
  }
  await flush();
  assert.deepEqual([may.value, mayNot.value], [true, false]);

  const bad = [settle(t.Sasha.data.allows("expenses", "drop")), settle(t.Sasha.data.allows("no such table!", "list"))];
  await flush();
  assert.deepEqual(bad.map((outcome) => outcome.error && outcome.error.code), ["APP_INPUT_INVALID", "APP_INPUT_INVALID"]);
  assert.equal(t.requests("tools/list").length, 2, "a bad question sends nothing");
});
