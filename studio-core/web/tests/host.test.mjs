// Behaviour tests of the MCP Apps host (`../host.js`) under Node's built-in
// runner, with a fake window, frame, clock and fetch. Run by
// `cargo nextest run -p studio-core` (studio-core/tests/process/web_host.rs).
// Real Chromium against the real proxy is the browser suite's job.

import assert from "node:assert/strict";
import { test } from "node:test";
import * as H from "../host.js";

const SANDBOX = "http://127.0.0.1:3007";

function world({ fetchImpl, confirmAnswer = true, onUnauthenticated, preview, fullHeight } = {}) {
  const listeners = new Set();
  const posted = [];
  const frameWindow = { postMessage: (message, target) => posted.push({ message: JSON.parse(JSON.stringify(message)), target }) };
  let removed = false;
  const iframe = {
    attrs: {}, style: {}, setAttribute(k, v) { this.attrs[k] = v; }, remove() { removed = true; },
    contentWindow: frameWindow,
  };
  const win = {
    addEventListener: (t, fn) => t === "message" && listeners.add(fn),
    removeEventListener: (t, fn) => listeners.delete(fn),
    document: { createElement: () => iframe },
    matchMedia: () => ({ matches: false }),
    navigator: { language: "en-GB", maxTouchPoints: 0 },
    location: { origin: "https://studio.test" },
  };
  let clock = 0;
  let timers = [];
  const fetches = [];
  const opened = [];
  const errors = [];
  const states = [];
  const logs = [];
  const parent = { appendChild: () => {} };
  const host = H.createHost({
    window: win, iframeParent: parent, sandboxOrigin: SANDBOX,
    app: { id: "expense-log", revision: "r1", name: "Expense Log" },
    resource: { mimeType: H.RESOURCE_MIME_TYPE, text: "<!doctype html><p>hi" },
    fetch: async (url, init) => { fetches.push({ url, init, body: JSON.parse(init.body) }); return fetchImpl(url, init, JSON.parse(init.body)); },
    onError: (e) => errors.push(e), onStateChange: (s) => states.push(s),
    now: () => clock,
    setTimeout: (fn, ms) => { const t = { fn, at: clock + ms }; timers.push(t); return t; },
    clearTimeout: (t) => { timers = timers.filter((x) => x !== t); },
    confirm: () => confirmAnswer, openWindow: (u) => opened.push(u),
    logger: { debug: (t) => logs.push(t), info: (t) => logs.push(t), warn: (t) => logs.push(t), error: (t) => logs.push(t) },
    hostVersion: "9.9.9",
    onUnauthenticated,
    preview,
    fullHeight,
  });
  const send = (data, { source = frameWindow, origin = SANDBOX } = {}) => { for (const fn of [...listeners]) fn({ data, source, origin }); };
  const advance = (ms) => { clock += ms; const due = timers.filter((t) => t.at <= clock); timers = timers.filter((t) => t.at > clock); due.forEach((t) => t.fn()); };
  const flush = () => new Promise((r) => setTimeout(r, 10));
  return { host, iframe, posted, send, advance, flush, fetches, opened, errors, states, logs, listeners, get removed() { return removed; } };
}

const TOOLS = { tools: [
  { name: "app__expense_log__entries__list", _meta: { ui: { visibility: ["model", "app"] } } },
  { name: "app__expense_log__add_expense", _meta: { ui: { visibility: ["app"] } } },
  { name: "app__expense_log__secret", _meta: { ui: { visibility: ["model"] } } },
  { name: "app__expense_log__empty", _meta: { ui: { visibility: [] } } },
  { name: "app__other__entries__list", _meta: { ui: { visibility: ["app"] } } },
  { name: "getDocs" },
  { name: "sasha__chat_execute", _meta: { ui: { visibility: ["app"] } } },
  { name: "sasha__files_upload", _meta: { ui: { visibility: ["app"] } } },
] };

function json(body, status = 200) {
  return new Response(JSON.stringify(body), { status, headers: { "content-type": "application/json" } });
}

function gateway(handlers = {}) {
  return async (url, init, body) => {
    if (body.method === "tools/list") return json({ jsonrpc: "2.0", id: body.id, result: TOOLS });
    if (handlers[body.params.name]) return handlers[body.params.name](body, init);
    return json({ jsonrpc: "2.0", id: body.id, result: { structuredContent: { ok: body.params.name } } });
  };
}

async function initialized(w) {
  w.send({ jsonrpc: "2.0", method: "ui/notifications/sandbox-proxy-ready", params: {} });
  w.send({ jsonrpc: "2.0", id: 1, method: "ui/initialize", params: { protocolVersion: "2026-01-26", appInfo: { name: "x", version: "1" }, appCapabilities: {} } });
  w.send({ jsonrpc: "2.0", method: "ui/notifications/initialized", params: {} });
  await w.flush();
}

test("handshake, pinning and nothing before initialized", async () => {
  const w = world({ fetchImpl: gateway() });
  assert.equal(w.iframe.src, SANDBOX + "/app-sandbox");
  assert.equal(w.iframe.attrs.sandbox, "allow-scripts allow-same-origin allow-forms");
  assert.equal(w.iframe.attrs.allow, "");
  assert.equal(w.iframe.referrerPolicy, "origin");
  // Wrong origin / wrong source ignored.
  w.send({ jsonrpc: "2.0", method: "ui/notifications/sandbox-proxy-ready", params: {} }, { origin: "http://127.0.0.1:3008" });
  w.send({ jsonrpc: "2.0", method: "ui/notifications/sandbox-proxy-ready", params: {} }, { source: {} });
  assert.equal(w.posted.length, 0);
  w.send({ jsonrpc: "2.0", method: "ui/notifications/sandbox-proxy-ready", params: {} });
  assert.deepEqual(w.posted[0], { message: { jsonrpc: "2.0", method: "ui/notifications/sandbox-resource-ready", params: { html: "<!doctype html><p>hi" } }, target: SANDBOX });
  w.send({ jsonrpc: "2.0", method: "ui/notifications/sandbox-proxy-ready", params: {} });
  assert.equal(w.posted.length, 1, "a second ready is ignored");
  w.send({ jsonrpc: "2.0", id: 7, method: "ping" });
  assert.equal(w.posted.length, 1, "held before initialize");
  w.send({ jsonrpc: "2.0", id: 1, method: "ui/initialize", params: {} });
  const init = w.posted[1].message;
  assert.equal(init.id, 1);
  assert.equal(init.result.protocolVersion, "2026-01-26");
  assert.deepEqual(init.result.hostInfo, { name: "Sasha Studio", version: "9.9.9" });
  assert.deepEqual(init.result.hostCapabilities, { openLinks: {}, serverTools: {}, logging: {} });
  const ctx = init.result.hostContext;
  assert.equal(ctx.theme, "light");
  assert.equal(ctx.locale, "en-GB");
  assert.deepEqual(ctx.containerDimensions, { maxHeight: 1200 });
  assert.equal(ctx.displayMode, "inline");
  assert.deepEqual(ctx.availableDisplayModes, ["inline"]);
  assert.equal(ctx.platform, "web");
  assert.deepEqual(ctx.safeAreaInsets, { top: 0, right: 0, bottom: 0, left: 0 });
  assert.ok(ctx.styles.variables["--color-background-primary"]);
  w.send({ jsonrpc: "2.0", id: 2, method: "ui/initialize", params: {} });
  assert.equal(w.posted.length, 2, "one initialize answer only, nothing else yet");
  w.send({ jsonrpc: "2.0", method: "ui/notifications/initialized", params: {} });
  assert.equal(w.host.state, "ready");
  assert.deepEqual(w.posted[2].message, { jsonrpc: "2.0", id: 7, result: {} });
  await w.host.ready;
  assert.deepEqual(w.states, ["loading", "initializing", "ready"]);
});

test("size clamps", async () => {
  const w = world({ fetchImpl: gateway() });
  await initialized(w);
  for (const [h, want] of [[100, "240px"], [1e9, "1200px"], [500.4, "500px"], [-1, "240px"]]) {
    w.send({ jsonrpc: "2.0", method: "ui/notifications/size-changed", params: { height: h } });
    assert.equal(w.iframe.style.height, want);
  }
  w.send({ jsonrpc: "2.0", method: "ui/notifications/size-changed", params: { height: "NaN" } });
  assert.equal(w.iframe.style.height, "240px");
});

test("the app pane's full height: the view's whole content, up to its own bound", async () => {
  const w = world({ fetchImpl: gateway(), fullHeight: true });
  assert.equal(w.iframe.className, "app-frame app-frame-full");
  w.send({ jsonrpc: "2.0", method: "ui/notifications/sandbox-proxy-ready", params: {} });
  w.send({ jsonrpc: "2.0", id: 1, method: "ui/initialize", params: {} });
  const ctx = w.posted[1].message.result.hostContext;
  assert.equal(ctx.displayMode, "fullscreen");
  assert.deepEqual(ctx.availableDisplayModes, ["fullscreen"]);
  assert.deepEqual(ctx.containerDimensions, { maxHeight: 16000 });
  w.send({ jsonrpc: "2.0", method: "ui/notifications/initialized", params: {} });
  await w.flush();
  for (const [h, want] of [[100, "240px"], [2600, "2600px"], [1e9, "16000px"]]) {
    w.send({ jsonrpc: "2.0", method: "ui/notifications/size-changed", params: { height: h } });
    assert.equal(w.iframe.style.height, want);
  }
  w.send({ jsonrpc: "2.0", id: 9, method: "ui/request-display-mode", params: { mode: "inline" } });
  assert.deepEqual(w.posted.at(-1).message, { jsonrpc: "2.0", id: 9, result: { mode: "fullscreen" } });
  // Inline (a draft's preview) keeps the spec's clamp.
  const inline = world({ fetchImpl: gateway() });
  assert.equal(inline.iframe.className, "app-frame");
  await initialized(inline);
  inline.send({ jsonrpc: "2.0", method: "ui/notifications/size-changed", params: { height: 2600 } });
  assert.equal(inline.iframe.style.height, "1200px");
  assert.equal(H.clampHeight(2600), 1200);
  assert.equal(H.clampHeight(2600, 16000), 2600);
});

test("tools/call is forwarded with the right headers and body", async () => {
  const w = world({ fetchImpl: gateway() });
  await initialized(w);
  w.send({ jsonrpc: "2.0", id: "c1", method: "tools/call", params: { name: "app__expense_log__add_expense", arguments: { a: 1 }, _meta: { "sasha/idempotencyKey": "k1", progressToken: 5, evil: 1 } } });
  await w.flush();
  const call = w.fetches.find((f) => f.body.method === "tools/call");
  assert.equal(call.url, "/mcp");
  assert.equal(call.init.credentials, "same-origin");
  assert.deepEqual(call.init.headers, {
    "Content-Type": "application/json", Accept: "application/json, text/event-stream",
    "MCP-Protocol-Version": "2026-07-28", "Mcp-Method": "tools/call", "Sasha-App": "expense-log", "Mcp-Name": "app__expense_log__add_expense",
  });
  assert.deepEqual(call.body.params, { name: "app__expense_log__add_expense", arguments: { a: 1 }, _meta: {
    "sasha/idempotencyKey": "k1", progressToken: 5,
    "io.modelcontextprotocol/protocolVersion": "2026-07-28", "io.modelcontextprotocol/clientCapabilities": {}, "io.modelcontextprotocol/clientInfo": { name: "sasha-studio", version: "1" } } });
  const list = w.fetches.find((f) => f.body.method === "tools/list");
  assert.equal(list.init.headers["Sasha-App"], "expense-log");
  assert.equal(list.init.headers["Mcp-Name"], undefined);
  assert.deepEqual(w.posted.at(-1).message, { jsonrpc: "2.0", id: "c1", result: { structuredContent: { ok: "app__expense_log__add_expense" } } });
});

test("a draft's preview sends Sasha-Preview on every /mcp request, and only then", async () => {
  const PREVIEW = "0123456789abcdef0123456789abcdef";
  for (const preview of [PREVIEW, undefined, ""]) {
    const w = world({ fetchImpl: gateway(), preview });
    await initialized(w);
    w.send({ jsonrpc: "2.0", id: "p1", method: "tools/call", params: { name: "app__expense_log__add_expense", arguments: {} } });
    w.send({ jsonrpc: "2.0", id: "p2", method: "tools/call", params: { name: "app__expense_log__entries__list", arguments: {} } });
    await w.flush();
    const methods = w.fetches.map((f) => f.body.method).sort();
    assert.deepEqual(methods, ["tools/call", "tools/call", "tools/list"], "tools/list and both calls went to /mcp");
    for (const f of w.fetches) {
      assert.equal(f.url, "/mcp");
      assert.equal(f.init.headers["Sasha-App"], "expense-log", "Sasha-App is always there");
      if (preview) {
        assert.equal(f.init.headers["Sasha-Preview"], PREVIEW, `${f.body.method} carries the preview id`);
      } else {
        assert.ok(!("Sasha-Preview" in f.init.headers), `${f.body.method} carries no Sasha-Preview without a preview`);
      }
    }
  }
});

test("visibility is enforced before forwarding", async () => {
  const w = world({ fetchImpl: gateway() });
  await initialized(w);
  let id = 100;
  for (const name of ["app__expense_log__secret", "app__expense_log__empty", "app__other__entries__list", "getDocs", "app__expense_log__nope", 42]) {
    w.send({ jsonrpc: "2.0", id: ++id, method: "tools/call", params: { name, arguments: {} } });
    await w.flush();
    const answer = w.posted.at(-1).message;
    assert.equal(answer.id, id);
    assert.ok(answer.error, `${name} refused`);
    assert.equal(answer.error.code, typeof name === "string" ? -32000 : -32602, String(name));
  }
  assert.equal(w.fetches.filter((f) => f.body.method === "tools/call").length, 0);
  assert.equal(w.posted.at(-2).message.error.data.code, "APP_CAPABILITY_DENIED");
});

test("the view's tools/list answers only what it may call here", async () => {
  const w = world({ fetchImpl: gateway() });
  await initialized(w);
  w.send({ jsonrpc: "2.0", id: "l1", method: "tools/list", params: {} });
  await w.flush();
  const answer = w.posted.at(-1).message;
  assert.equal(answer.id, "l1");
  const names = answer.result.tools.map((tool) => tool.name).sort();
  const callable = TOOLS.tools
    .filter((tool) => tool.name.startsWith("app__expense_log__") && (tool._meta?.ui?.visibility || []).includes("app"))
    .map((tool) => tool.name);
  assert.ok(names.length > 0 && callable.every((name) => names.includes(name)), JSON.stringify(names));
  for (const hidden of ["app__expense_log__secret", "app__expense_log__empty", "app__other__entries__list", "getDocs"]) {
    assert.ok(!names.includes(hidden), `${hidden} is not listed to the view`);
  }
  assert.equal(w.fetches.filter((f) => f.body.method === "tools/list").length, 1, "the gateway's list is fetched once");
});

test("SSE with progress", async () => {
  const w = world({ fetchImpl: gateway({ sasha__chat_execute: (body) => {
    const events = [
      { jsonrpc: "2.0", method: "notifications/progress", params: { progressToken: "p1", progress: 1, message: "Hel" } },
      { jsonrpc: "2.0", method: "notifications/progress", params: { progressToken: "other", progress: 1, message: "x" } },
      { jsonrpc: "2.0", id: body.id, result: { structuredContent: { text: "Hello" } } },
    ];
    const text = events.map((e) => `event: message\r\ndata: ${JSON.stringify(e)}\r\n\r\n`).join("");
    const bytes = new TextEncoder().encode(text);
    const stream = new ReadableStream({ start(c) { for (let i = 0; i < bytes.length; i += 7) c.enqueue(bytes.slice(i, i + 7)); c.close(); } });
    return new Response(stream, { headers: { "content-type": "text/event-stream" } });
  } }) });
  await initialized(w);
  w.send({ jsonrpc: "2.0", id: 9, method: "tools/call", params: { name: "sasha__chat_execute", arguments: {}, _meta: { progressToken: "p1" } } });
  await w.flush();
  const msgs = w.posted.map((p) => p.message).filter((m) => m.method === "notifications/progress" || m.id === 9);
  assert.deepEqual(msgs, [
    { jsonrpc: "2.0", method: "notifications/progress", params: { progressToken: "p1", progress: 1, message: "Hel" } },
    { jsonrpc: "2.0", id: 9, result: { structuredContent: { text: "Hello" } } },
  ]);
});

test("gateway errors become -32000 with the envelope", async () => {
  const w = world({ fetchImpl: gateway({ app__expense_log__add_expense: () => json({ code: "APP_ACCESS_DENIED", message: "no", retryable: false, diagnosticId: "d1" }, 403) }) });
  await initialized(w);
  w.send({ jsonrpc: "2.0", id: 3, method: "tools/call", params: { name: "app__expense_log__add_expense", arguments: {} } });
  await w.flush();
  assert.deepEqual(w.posted.at(-1).message.error, { code: -32000, message: "no", data: { code: "APP_ACCESS_DENIED", message: "no", retryable: false, diagnosticId: "d1" } });
});

test("one chat or upload per view, data calls beside it", async () => {
  let release;
  const w = world({ fetchImpl: gateway({ sasha__chat_execute: (body) => new Promise((r) => { release = () => r(json({ jsonrpc: "2.0", id: body.id, result: {} })); }) }) });
  await initialized(w);
  w.send({ jsonrpc: "2.0", id: 1, method: "tools/call", params: { name: "sasha__chat_execute", arguments: {} } });
  await w.flush();
  w.send({ jsonrpc: "2.0", id: 2, method: "tools/call", params: { name: "sasha__chat_execute", arguments: {} } });
  await w.flush();
  assert.equal(w.posted.at(-1).message.error.data.code, "APP_BUSY");
  // One chat or upload per view: an upload waits its turn too…
  w.send({ jsonrpc: "2.0", id: 4, method: "tools/call", params: { name: "sasha__files_upload", arguments: {} } });
  await w.flush();
  assert.equal(w.posted.at(-1).message.id, 4);
  assert.equal(w.posted.at(-1).message.error.data.code, "APP_BUSY");
  // …while data calls keep flowing.
  w.send({ jsonrpc: "2.0", id: 5, method: "tools/call", params: { name: "app__expense_log__entries__list", arguments: {} } });
  await w.flush();
  assert.deepEqual(w.posted.at(-1).message, { jsonrpc: "2.0", id: 5, result: { structuredContent: { ok: "app__expense_log__entries__list" } } });
  release();
  await w.flush();
  assert.deepEqual(w.posted.at(-1).message, { jsonrpc: "2.0", id: 1, result: {} });
});

test("open-link, ping, unknown, log, bogus responses", async () => {
  const w = world({ fetchImpl: gateway() });
  await initialized(w);
  w.send({ jsonrpc: "2.0", id: 1, method: "ui/open-link", params: { url: "javascript:alert(1)" } });
  assert.equal(w.posted.at(-1).message.error.code, -32000);
  w.advance(2000);
  w.send({ jsonrpc: "2.0", id: 2, method: "ui/open-link", params: { url: "http://example.com" } });
  assert.equal(w.posted.at(-1).message.error.code, -32000);
  w.advance(2000);
  w.send({ jsonrpc: "2.0", id: 3, method: "ui/open-link", params: { url: "https://studio.test/x" } });
  assert.equal(w.posted.at(-1).message.error.code, -32000);
  w.send({ jsonrpc: "2.0", id: 4, method: "ui/open-link", params: { url: "https://example.com/a b" } });
  assert.deepEqual(w.posted.at(-1).message, { jsonrpc: "2.0", id: 4, result: {} });
  assert.deepEqual(w.opened, ["https://example.com/a%20b"]);
  w.send({ jsonrpc: "2.0", id: 5, method: "ui/open-link", params: { url: "https://example.com/" } });
  assert.equal(w.posted.at(-1).message.error.data.code, "APP_BUSY");
  w.send({ jsonrpc: "2.0", id: 6, method: "ping" });
  assert.deepEqual(w.posted.at(-1).message, { jsonrpc: "2.0", id: 6, result: {} });
  w.send({ jsonrpc: "2.0", id: 7, method: "ui/message", params: {} });
  assert.equal(w.posted.at(-1).message.error.code, -32601);
  w.send({ jsonrpc: "2.0", method: "notifications/message", params: { level: "warning", data: { a: 1 } } });
  assert.equal(w.logs.at(-1), '[app expense-log] {"a":1}');
  const count = w.posted.length;
  w.send({ jsonrpc: "2.0", id: 99, result: {} });
  w.send([{ jsonrpc: "2.0", id: 8, method: "ping" }]);
  w.send({ jsonrpc: "2.0", id: { x: 1 }, method: "ping" });
  w.send({ jsonrpc: "1.0", id: 8, method: "ping" });
  w.send("{\"jsonrpc\":\"2.0\",\"id\":8,\"method\":\"ping\"}");
  w.send({ jsonrpc: "2.0", method: "ui/notifications/sandbox-resource-ready", params: { html: "x" } });
  assert.equal(w.posted.length, count);
});

test("init timeout", async () => {
  const w = world({ fetchImpl: gateway() });
  w.send({ jsonrpc: "2.0", method: "ui/notifications/sandbox-proxy-ready", params: {} });
  w.advance(14_999);
  assert.equal(w.errors.length, 0);
  w.advance(1);
  assert.equal(w.errors[0].code, "APP_TIMEOUT");
  assert.ok(w.removed);
  assert.equal(w.host.state, "failed");
  await assert.rejects(w.host.ready);
  assert.equal(w.listeners.size, 0);
});

test("close with a reply, then late results are dropped", async () => {
  let release;
  const w = world({ fetchImpl: gateway({ app__expense_log__add_expense: (body) => new Promise((r) => { release = () => r(json({ jsonrpc: "2.0", id: body.id, result: {} })); }) }) });
  await initialized(w);
  w.send({ jsonrpc: "2.0", id: 1, method: "tools/call", params: { name: "app__expense_log__add_expense", arguments: {} } });
  await w.flush();
  const closing = w.host.close();
  const teardown = w.posted.at(-1).message;
  assert.equal(teardown.method, "ui/resource-teardown");
  assert.deepEqual(teardown.params, {});
  w.send({ jsonrpc: "2.0", id: 2, method: "ping" });
  release();
  await w.flush();
  assert.equal(w.posted.at(-1).message, teardown, "nothing after close");
  assert.ok(!w.removed);
  w.send({ jsonrpc: "2.0", id: teardown.id, result: {} });
  await closing;
  assert.ok(w.removed);
  assert.equal(w.host.state, "closed");
});

test("close without a reply waits two seconds", async () => {
  const w = world({ fetchImpl: gateway() });
  await initialized(w);
  const closing = w.host.close();
  w.advance(1999);
  await w.flush();
  assert.ok(!w.removed);
  w.advance(1);
  await closing;
  assert.ok(w.removed);
});

test("close before initialized removes at once, sends nothing", async () => {
  const w = world({ fetchImpl: gateway() });
  w.send({ jsonrpc: "2.0", method: "ui/notifications/sandbox-proxy-ready", params: {} });
  const n = w.posted.length;
  await w.host.close();
  assert.equal(w.posted.length, n);
  assert.ok(w.removed);
});

test("helpers", () => {
  assert.equal(H.toolBelongsToApp("app__expense_log__x", "expense-log"), true);
  assert.equal(H.toolBelongsToApp("app__expense__x", "expense-log"), false);
  assert.equal(H.toolBelongsToApp("app__expense_log", "expense-log"), false);
  assert.equal(H.toolBelongsToApp("app__expense_log__", "expense-log"), false);
  assert.equal(H.toolBelongsToApp("open_app__expense_log", "expense-log"), true);
  assert.equal(H.toolCallableByApp({ name: "app__a__b" }, "a"), true);
  assert.equal(H.toolCallableByApp({ name: "app__a__b", _meta: { ui: { visibility: "app" } } }, "a"), false);
});

test("a declined link is an isError result; a 401 ends the session; failed lists are retried", async () => {
  let listCalls = 0;
  let unauthenticated = 0;
  const w = world({
    confirmAnswer: false,
    fetchImpl: async (url, init, body) => {
      if (body.method === "tools/list") {
        listCalls += 1;
        if (listCalls === 1) return json({ code: "APP_NOT_READY", message: "busy", retryable: true, diagnosticId: "d" }, 503);
        return json({ jsonrpc: "2.0", id: body.id, result: TOOLS });
      }
      return json({ code: "APP_UNAUTHENTICATED", message: "sign in", retryable: false, diagnosticId: "00000000-0000-0000-0000-000000000000" }, 401);
    },
    onUnauthenticated: () => { unauthenticated += 1; },
  });
  await initialized(w);
  w.send({ jsonrpc: "2.0", id: 1, method: "ui/open-link", params: { url: "https://example.com/" } });
  assert.deepEqual(w.posted.at(-1).message, { jsonrpc: "2.0", id: 1, result: { isError: true } });
  assert.deepEqual(w.opened, []);
  w.send({ jsonrpc: "2.0", id: 2, method: "tools/call", params: { name: "app__expense_log__add_expense", arguments: {} } });
  await w.flush();
  assert.equal(listCalls, 2, "the failed list is fetched again at the first call");
  assert.equal(w.posted.at(-1).message.error.data.code, "APP_UNAUTHENTICATED");
  assert.equal(unauthenticated, 1);
});

test("a flood is cut at the per-second cap", async () => {
  const w = world({ fetchImpl: gateway() });
  await initialized(w);
  const before = w.posted.length;
  for (let i = 0; i < 1000; i += 1) {
    w.send({ jsonrpc: "2.0", id: i + 10, method: "ping" });
  }
  const answered = w.posted.length - before;
  assert.ok(answered <= H.MAX_MESSAGES_PER_SECOND && answered > 100, `${answered}`);
  w.advance(1000);
  w.send({ jsonrpc: "2.0", id: 5000, method: "ping" });
  assert.deepEqual(w.posted.at(-1).message, { jsonrpc: "2.0", id: 5000, result: {} });
});

test("a reused request id is answered once", async () => {
  let release;
  const w = world({ fetchImpl: gateway({ app__expense_log__add_expense: (body) => new Promise((r) => { release = () => r(json({ jsonrpc: "2.0", id: body.id, result: {} })); }) }) });
  await initialized(w);
  w.send({ jsonrpc: "2.0", id: 1, method: "tools/call", params: { name: "app__expense_log__add_expense", arguments: {} } });
  await w.flush();
  w.send({ jsonrpc: "2.0", id: 1, method: "ping" });
  release();
  await w.flush();
  const answers = w.posted.filter((p) => p.message.id === 1 && !p.message.method);
  assert.equal(answers.length, 2, "the initialize answer and the call's, nothing for the reuse");
});

test("every post names the sandbox origin", async () => {
  const w = world({ fetchImpl: gateway() });
  await initialized(w);
  w.send({ jsonrpc: "2.0", id: 3, method: "ping" });
  const closing = w.host.close();
  w.send({ jsonrpc: "2.0", id: w.posted.at(-1).message.id, result: {} });
  await closing;
  assert.ok(w.posted.length > 3);
  for (const { target } of w.posted) {
    assert.equal(target, SANDBOX);
  }
});

test("an invalid resource fails without a frame", async () => {
  const errors = [];
  const win = { addEventListener() { throw new Error("no listener expected"); }, document: { createElement: () => ({ setAttribute() {}, style: {} }) }, matchMedia: () => ({ matches: false }), navigator: {}, location: { origin: "https://studio.test" } };
  const host = H.createHost({ window: win, iframeParent: { appendChild() { throw new Error("no frame expected"); } }, sandboxOrigin: SANDBOX, app: { id: "a", name: "A" }, resource: { mimeType: "text/html", text: "x" }, onError: (e) => errors.push(e) });
  await assert.rejects(host.ready);
  await new Promise((r) => setTimeout(r, 0));
  assert.equal(errors[0].code, "APP_NOT_READY");
  assert.equal(host.state, "failed");
});

test("the watchdog pings a ready view and fails one that stops answering", async () => {
  const w = world({ fetchImpl: gateway() });
  await initialized(w);
  const before = w.posted.length;
  w.advance(H.WATCHDOG_INTERVAL_MS - 1);
  assert.equal(w.posted.length, before, "no ping before the interval");
  w.advance(1);
  const ping = w.posted.at(-1).message;
  assert.equal(ping.method, "ping");
  // An answer keeps it alive and schedules the next ping.
  w.send({ jsonrpc: "2.0", id: ping.id, result: {} });
  await w.flush();
  assert.equal(w.host.state, "ready");
  w.advance(H.WATCHDOG_INTERVAL_MS);
  const second = w.posted.at(-1).message;
  assert.equal(second.method, "ping");
  assert.notEqual(second.id, ping.id);
  // No answer: the app failed visibly and its frame is gone.
  w.advance(H.WATCHDOG_TIMEOUT_MS - 1);
  await w.flush();
  assert.equal(w.host.state, "ready");
  w.advance(1);
  await w.flush();
  assert.equal(w.host.state, "failed");
  assert.equal(w.errors.at(-1).code, "APP_TIMEOUT");
  assert.ok(w.removed);
});

test("a closed host pings no more", async () => {
  const w = world({ fetchImpl: gateway() });
  await initialized(w);
  const closing = w.host.close();
  w.advance(2000);
  await closing;
  const after = w.posted.length;
  w.advance(H.WATCHDOG_INTERVAL_MS * 3);
  await w.flush();
  assert.equal(w.posted.length, after);
});
