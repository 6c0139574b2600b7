// A fake browser for the runtime: one window whose parent records what the
// runtime posts, a host that answers through `fromHost`, a manual clock, and a
// document just large enough for theming and size reporting. The runtime is
// compiled in this realm with `window` as its only free variable.
import { readFileSync } from "node:fs";
import vm from "node:vm";
import { webcrypto } from "node:crypto";

export const SOURCE = readFileSync(new URL("../sasha-runtime.js", import.meta.url), "utf8");
const compiled = vm.runInThisContext(`(function (window) {${SOURCE}\n})`, { filename: "sasha-runtime.js" });

export const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$/;
export const APP = { id: "expense-log", version: "1.2.0", capabilities: { chat: true, files: true, data: "read-write" } };

export async function flush() {
  for (let i = 0; i < 20; i++) await new Promise((resolve) => setImmediate(resolve));
}

function fakeClock() {
  let now = 0, seq = 0;
  const timers = new Map();
  return {
    setTimeout(fn, ms) { const id = ++seq; timers.set(id, { at: now + (ms || 0), fn }); return id; },
    clearTimeout(id) { timers.delete(id); },
    pending() { return timers.size; },
    async advance(ms) {
      const end = now + ms;
      for (;;) {
        let next = null;
        for (const [id, timer] of timers) if (timer.at <= end && (!next || timer.at < next[1].at)) next = [id, timer];
        if (!next) break;
        timers.delete(next[0]);
        now = next[1].at;
        next[1].fn();
        await flush();
      }
      now = end;
      await flush();
    },
  };
}

function fakeStyle() {
  const variables = {};
  return { variables, height: "", minHeight: "", colorScheme: "", setProperty(name, value) { variables[name] = value; } };
}

/** Loads a fresh runtime. `config` becomes `window.__SASHA_APP__` (null: none). */
export function load({ config = APP, crypto = webcrypto, contentHeight = 500, topLevel = false } = {}) {
  const clock = fakeClock();
  const listeners = [];
  const sent = [];
  const observed = [];
  const parent = { postMessage(message, target) { sent.push({ message: structuredClone(message), target }); } };
  const root = {
    style: fakeStyle(),
    attributes: {},
    contentHeight,
    setAttribute(name, value) { this.attributes[name] = String(value); },
    // Content height only while the runtime measures with height: max-content.
    getBoundingClientRect() { return { height: this.style.height === "max-content" && document.body.style.minHeight === "0" ? this.contentHeight : 900 }; },
  };
  const document = { documentElement: root, body: { style: fakeStyle() } };
  class ResizeObserver {
    constructor(callback) { this.callback = callback; this.targets = []; observed.push(this); }
    observe(target) { this.targets.push(target); }
    disconnect() { this.targets = []; this.disconnected = true; }
  }
  const window = {
    parent, document, crypto, btoa, ResizeObserver,
    setTimeout: clock.setTimeout, clearTimeout: clock.clearTimeout,
    addEventListener(type, listener) { if (type === "message") listeners.push(listener); },
  };
  if (topLevel) {
    window.parent = window; // opened directly, not framed
    window.postMessage = parent.postMessage;
  }
  if (config) window.__SASHA_APP__ = structuredClone(config);
  compiled(window);
  const harness = {
    window, parent, document, clock, sent, observed, Sasha: window.Sasha,
    /** Delivers `data` as a message event from `source` (default: the parent). */
    fromHost(data, source = window.parent) { for (const listener of listeners) listener({ source, data: structuredClone(data) }); },
    messages() { return sent.map((entry) => entry.message); },
    requests(method) { return harness.messages().filter((m) => m.method === method && "id" in m); },
    notifications(method) { return harness.messages().filter((m) => m.method === method && !("id" in m)); },
    respond(id, result) { harness.fromHost({ jsonrpc: "2.0", id, result }); },
    fail(id, error) { harness.fromHost({ jsonrpc: "2.0", id, error }); },
    /** Answers ui/initialize and lets the runtime settle. */
    async init(result = {}) {
      const [request] = harness.requests("ui/initialize");
      harness.respond(request.id, {
        protocolVersion: "2026-01-26",
        hostInfo: { name: "test-host", version: "1" },
        hostCapabilities: { serverTools: {} },
        hostContext: { theme: "light" },
        ...result,
      });
      await flush();
    },
    /** The tools/call requests sent so far. */
    calls() { return harness.requests("tools/call"); },
    /** Answers a tools/call with structuredContent (or an error result). */
    answer(call, structuredContent, isError = false) {
      harness.respond(call.id, { content: [], structuredContent, ...(isError ? { isError: true } : {}) });
    },
  };
  return harness;
}

/** Settles `promise` into {value} or {error} without unhandled rejections. */
export function settle(promise) {
  const outcome = { done: false };
  promise.then((value) => Object.assign(outcome, { done: true, value }), (error) => Object.assign(outcome, { done: true, error }));
  return outcome;
}
