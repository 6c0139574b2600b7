// Initialization, presentation, host requests, teardown and message filtering.
import { test } from "node:test";
import assert from "node:assert/strict";
import { APP, flush, load, settle } from "./harness.mjs";

test("initialize is sent at load with the app's identity, initialized only after the result", async () => {
  const t = load();
  assert.equal(t.window.__SASHA_APP__, undefined, "the config global is consumed");
  assert.deepEqual(t.messages(), [{
    jsonrpc: "2.0", id: 1, method: "ui/initialize",
    params: { appInfo: { name: "expense-log", version: "1.2.0" }, appCapabilities: {}, protocolVersion: "2026-01-26" },
  }]);
  assert.ok(t.sent.every((entry) => entry.target === "*"));
  assert.equal(t.Sasha.connected, false);
  await t.clock.advance(14000);
  assert.equal(t.notifications("ui/notifications/initialized").length, 0, "nothing before the result");
  const ready = settle(t.Sasha.ready());
  await t.init({ hostCapabilities: { serverTools: { listChanged: false } }, hostContext: { theme: "dark", locale: "de-DE" } });
  assert.ok(ready.done && !ready.error);
  const methods = t.messages().map((m) => m.method);
  assert.deepEqual(methods, ["ui/initialize", "ui/notifications/initialized"]);
  assert.deepEqual(t.notifications("ui/notifications/initialized")[0].params, {});
  assert.equal(t.Sasha.connected, true);
  assert.deepEqual(t.Sasha.capabilities, { serverTools: { listChanged: false } });
  assert.deepEqual(t.Sasha.hostContext, { theme: "dark", locale: "de-DE" });
  t.Sasha.hostContext.theme = "light";
  assert.equal(t.Sasha.hostContext.theme, "dark", "exposed context is a copy");
  assert.equal(t.Sasha.ready(), t.Sasha.ready(), "one shared promise");
});

test("initialization times out after 15 s with APP_TIMEOUT and never sends initialized", async () => {
  const t = load();
  const ready = settle(t.Sasha.ready());
  await t.clock.advance(14999);
  assert.equal(ready.done, false);
  await t.clock.advance(1);
  assert.equal(ready.error.code, "APP_TIMEOUT");
  assert.equal(ready.error.retryable, true);
  const list = settle(t.Sasha.data.list("entries", {}));
  await flush();
  assert.equal(list.error.code, "APP_TIMEOUT", "calls wait for ready and share its failure");
  await t.init();
  assert.equal(t.notifications("ui/notifications/initialized").length, 0, "a late initialize result is ignored");
  assert.equal(t.Sasha.connected, false);
  assert.equal(t.calls().length, 0);
});

test("operations wait for ready before sending", async () => {
  const t = load();
  const list = settle(t.Sasha.data.list("entries", {}));
  await flush();
  assert.equal(t.calls().length, 0);
  await t.init();
  assert.equal(t.calls().length, 1);
  const order = t.messages().map((m) => m.method);
  assert.ok(order.indexOf("ui/notifications/initialized") < order.indexOf("tools/call"));
  t.answer(t.calls()[0], { rows: [], nextCursor: null });
  await flush();
  assert.deepEqual(list.value, { rows: [], nextCursor: null });
});

test("host theme and style variables are applied and merged on host-context-changed", async () => {
  const t = load();
  await t.init({ hostContext: { theme: "dark", styles: { variables: {
    "--color-background-primary": "#111", "--font-sans": "system-ui", "not-a-variable": "x", "--bad name": "y", "--n": 3,
  } } } });
  const root = t.document.documentElement;
  assert.equal(root.attributes["data-theme"], "dark");
  assert.equal(root.style.colorScheme, "dark");
  assert.deepEqual(root.style.variables, { "--color-background-primary": "#111", "--font-sans": "system-ui" });
  t.fromHost({ jsonrpc: "2.0", method: "ui/notifications/host-context-changed", params: { theme: "light", styles: { variables: { "--color-text-primary": "#222" } } } });
  await flush();
  assert.equal(root.attributes["data-theme"], "light");
  assert.equal(root.style.variables["--color-text-primary"], "#222");
  assert.equal(t.Sasha.hostContext.theme, "light");
  t.fromHost({ jsonrpc: "2.0", method: "ui/notifications/host-context-changed", params: { theme: "sepia" } });
  await flush();
  assert.equal(root.attributes["data-theme"], "light", "unknown themes are not applied");
});

test("size is reported after initialization: content height, debounced, clamped 240–1200, only on change", async () => {
  const t = load({ contentHeight: 120 });
  await t.clock.advance(1000);
  assert.equal(t.notifications("ui/notifications/size-changed").length, 0, "nothing before initialized");
  await t.init();
  assert.equal(t.observed.length, 1);
  assert.deepEqual(t.observed[0].targets, [t.document.documentElement, t.document.body]);
  await t.clock.advance(50);
  assert.deepEqual(t.notifications("ui/notifications/size-changed").map((m) => m.params), [{ height: 240 }]);
  t.document.documentElement.contentHeight = 700;
  t.observed[0].callback();
  t.observed[0].callback();
  await t.clock.advance(49);
  assert.equal(t.notifications("ui/notifications/size-changed").length, 1, "debounced");
  await t.clock.advance(1);
  t.document.documentElement.contentHeight = 5000;
  t.observed[0].callback();
  await t.clock.advance(50);
  t.observed[0].callback();
  await t.clock.advance(50);
  assert.deepEqual(t.notifications("ui/notifications/size-changed").map((m) => m.params), [{ height: 240 }, { height: 700 }, { height: 1200 }]);
  assert.equal(t.document.documentElement.style.height, "", "measurement restores the style");
  assert.equal(t.document.body.style.minHeight, "");
});

test("shown in full height, the whole content height is reported, up to the host's own bound", async () => {
  const t = load({ contentHeight: 5000 });
  await t.init({ hostContext: { theme: "light", displayMode: "fullscreen", containerDimensions: { maxHeight: 16000 } } });
  await t.clock.advance(50);
  assert.deepEqual(t.notifications("ui/notifications/size-changed").map((m) => m.params), [{ height: 5000 }]);
  t.document.documentElement.contentHeight = 1e9;
  t.observed[0].callback();
  await t.clock.advance(50);
  // Back inline (the spec's clamp), the view measures again at once.
  t.fromHost({ jsonrpc: "2.0", method: "ui/notifications/host-context-changed", params: { displayMode: "inline", containerDimensions: { maxHeight: 1200 } } });
  await flush();
  await t.clock.advance(50);
  assert.deepEqual(t.notifications("ui/notifications/size-changed").map((m) => m.params), [{ height: 5000 }, { height: 16000 }, { height: 1200 }]);
  // A maxHeight past the runtime's own bound, or not a number, changes nothing.
  const odd = load({ contentHeight: 30000 });
  await odd.init({ hostContext: { displayMode: "fullscreen", containerDimensions: { maxHeight: "lots" } } });
  await odd.clock.advance(50);
  assert.deepEqual(odd.notifications("ui/notifications/size-changed").map((m) => m.params), [{ height: 1200 }]);
});

test("ping is answered with {}; unknown host requests get -32601", async () => {
  const t = load();
  await t.init();
  t.fromHost({ jsonrpc: "2.0", id: "p1", method: "ping" });
  t.fromHost({ jsonrpc: "2.0", id: 9, method: "tools/list", params: {} });
  assert.deepEqual(t.messages().slice(-2), [
    { jsonrpc: "2.0", id: "p1", result: {} },
    { jsonrpc: "2.0", id: 9, error: { code: -32601, message: "Method not found" } },
  ]);
});

test("teardown: reply {}, disconnect, cancel pending and new operations, ignore late results", async () => {
  const t = load();
  await t.init();
  const list = settle(t.Sasha.data.list("entries", {}));
  const chat = settle(t.Sasha.chat.execute("hello"));
  await flush();
  const [listCall, chatCall] = t.calls();
  t.fromHost({ jsonrpc: "2.0", id: "teardown-1", method: "ui/resource-teardown", params: { reason: "switch" } });
  assert.deepEqual(t.messages().at(-1), { jsonrpc: "2.0", id: "teardown-1", result: {} }, "the reply goes out at once");
  assert.equal(t.Sasha.connected, false);
  await flush();
  assert.equal(list.error.code, "APP_CANCELLED");
  assert.equal(chat.error.code, "APP_CANCELLED");
  assert.equal(t.observed[0].disconnected, true, "size reporting stops");
  const before = t.sent.length;
  t.answer(listCall, { rows: [{ id: 1 }] });
  t.answer(chatCall, { text: "late" });
  const later = settle(t.Sasha.data.get("entries", 1));
  const action = settle(t.Sasha.actions.call("week-totals", {}));
  await flush();
  assert.equal(later.error.code, "APP_CANCELLED");
  assert.equal(action.error.code, "APP_CANCELLED");
  assert.equal(t.sent.length, before, "nothing is sent after teardown");
  assert.equal(list.error.code, "APP_CANCELLED", "late results change nothing");
});

test("teardown before initialization cancels ready", async () => {
  const t = load();
  const ready = settle(t.Sasha.ready());
  t.fromHost({ jsonrpc: "2.0", id: 1, method: "ui/resource-teardown", params: {} });
  await flush();
  assert.equal(ready.error.code, "APP_CANCELLED");
  await t.init();
  assert.equal(t.notifications("ui/notifications/initialized").length, 0);
});

test("queued data calls are cancelled by teardown too", async () => {
  const t = load();
  await t.init();
  const calls = Array.from({ length: 6 }, (_, i) => settle(t.Sasha.data.get("entries", i + 1)));
  await flush();
  assert.equal(t.calls().length, 4);
  t.fromHost({ jsonrpc: "2.0", id: 77, method: "ui/resource-teardown", params: {} });
  await flush();
  assert.deepEqual(calls.map((c) => c.error && c.error.code), Array(6).fill("APP_CANCELLED"));
  assert.equal(t.calls().length, 4);
});

test("messages from any other source, or malformed, are ignored", async () => {
  const t = load();
  const stranger = { postMessage() {} };
  const good = { jsonrpc: "2.0", id: 1, result: { protocolVersion: "2026-01-26", hostInfo: {}, hostCapabilities: { spoofed: true }, hostContext: {} } };
  t.fromHost(good, stranger);
  t.fromHost(good, t.window);
  t.fromHost(good, null);
  for (const junk of [
    "{\"jsonrpc\":\"2.0\",\"id\":1,\"result\":{}}", null, 42, [good],
    { ...good, jsonrpc: "1.0" }, { jsonrpc: "2.0", result: {} }, { jsonrpc: "2.0", id: 1, result: {}, error: { code: 1 } },
    { jsonrpc: "2.0", id: 1, error: { message: "no code" } }, { jsonrpc: "2.0", id: {}, result: {} },
    { jsonrpc: "2.0", method: "ui/resource-teardown", id: null }, { jsonrpc: "2.0", method: "ping", id: 5, params: "x" },
  ]) t.fromHost(junk);
  await flush();
  assert.equal(t.Sasha.connected, false);
  assert.equal(t.sent.length, 1, "nothing answered, nothing initialized");
  t.fromHost({ jsonrpc: "2.0", id: "x", method: "ui/resource-teardown" }, stranger);
  t.fromHost({ jsonrpc: "2.0", method: "ui/notifications/host-context-changed", params: { theme: "dark" } }, stranger);
  await t.init({ hostContext: { theme: "light" } });
  assert.equal(t.Sasha.connected, true, "a spoofed teardown did nothing");
  assert.deepEqual(t.Sasha.capabilities, { serverTools: {} });
  assert.equal(t.Sasha.hostContext.theme, "light");
});

test("without a framing parent (top level) even the window's own messages are ignored", async () => {
  const t = load({ topLevel: true });
  assert.equal(t.requests("ui/initialize").length, 1);
  t.fromHost({ jsonrpc: "2.0", id: 1, result: { hostCapabilities: {}, hostContext: {} } }, t.window);
  await flush();
  assert.equal(t.Sasha.connected, false);
  assert.equal(t.notifications("ui/notifications/initialized").length, 0);
});

test("onToolResult sees the last tool-result; other tool notifications are ignored", async () => {
  const t = load();
  await t.init();
  t.fromHost({ jsonrpc: "2.0", method: "ui/notifications/tool-input", params: { arguments: { a: 1 } } });
  t.fromHost({ jsonrpc: "2.0", method: "ui/notifications/tool-result", params: { content: [], structuredContent: { n: 1 } } });
  const seen = [];
  const off = t.Sasha.onToolResult((result) => seen.push(result.structuredContent.n));
  t.fromHost({ jsonrpc: "2.0", method: "ui/notifications/tool-result", params: { content: [], structuredContent: { n: 2 } } });
  off();
  t.fromHost({ jsonrpc: "2.0", method: "ui/notifications/tool-result", params: { content: [], structuredContent: { n: 3 } } });
  t.fromHost({ jsonrpc: "2.0", method: "ui/notifications/tool-cancelled", params: {} });
  assert.deepEqual(seen, [1, 2]);
  assert.equal(t.sent.length, 2, "notifications are never answered");
});

test("window.Sasha is frozen and not replaceable", () => {
  const t = load({ config: APP });
  assert.ok(Object.isFrozen(t.Sasha) && Object.isFrozen(t.Sasha.data) && Object.isFrozen(t.Sasha.chat));
  assert.throws(() => { "use strict"; t.window.Sasha = {}; }, TypeError);
  assert.throws(() => { "use strict"; t.Sasha.data.list = null; }, TypeError);
});
