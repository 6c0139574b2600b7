// The bridge probe: each suite tries the security catalogue's bridge spoofs from
// inside the app's sandboxed frame, on a button click by the test, and writes
// what the app saw as JSON into #out (data-suite, data-state="done"). Raw
// requests use string ids starting with "p-", so they never collide with the
// runtime's numeric ids; the listener below records every answer to them.
"use strict";
(function () {
  const TABLE = "notes";
  const CREATE = "app__bridge_probe__notes__create";
  const LIST = "app__bridge_probe__notes__list";
  const out = document.getElementById("out");
  const configInput = document.getElementById("config");
  const sleep = (ms) => new Promise((resolve) => setTimeout(resolve, ms));

  // Answers to our raw "p-" requests, and messages from any window but the parent.
  const answers = [];
  let foreignMessages = 0;
  window.addEventListener("message", (event) => {
    if (event.source !== window.parent) {
      foreignMessages += 1;
      return;
    }
    const message = event.data;
    if (message && typeof message === "object" && !Array.isArray(message) && typeof message.id === "string" && message.id.startsWith("p-")) {
      answers.push({ id: message.id.slice(0, 40), idLength: message.id.length, result: message.result, error: message.error });
    }
  });
  const answersTo = (id) => answers.filter((answer) => answer.id === id.slice(0, 40) && answer.idLength === id.length);

  function config() {
    return JSON.parse(configInput.value || "{}");
  }
  function post(target, message) {
    try {
      target.postMessage(message, "*");
      return "posted";
    } catch (error) {
      return `${error && error.name}: ${String(error && error.message).slice(0, 100)}`;
    }
  }
  const call = (id, name, args) => ({ jsonrpc: "2.0", id, method: "tools/call", params: { name, arguments: args } });
  const create = (id, body) => call(id, CREATE, { values: { body } });
  // Sends a raw request through the proxy and waits for its first answer (or 5 s).
  async function rpc(id, method, params) {
    window.parent.postMessage({ jsonrpc: "2.0", id, method, params }, "*");
    for (let waited = 0; waited < 5000 && answersTo(id).length === 0; waited += 20) {
      await sleep(20);
    }
    const [answer] = answersTo(id);
    return answer ? { result: answer.result, error: answer.error } : "no answer";
  }
  async function settle(ms) {
    await sleep(ms);
    return answers.slice();
  }

  const suites = {
    // The legitimate path works (and the test sees its /mcp request).
    async baseline() {
      const created = await Sasha.data.create(TABLE, { body: "baseline" });
      const { rows } = await Sasha.data.list(TABLE, {});
      return { created: created.body, bodies: rows.map((row) => row.body) };
    },
    // C1: skip the proxy and post straight to Studio.
    async c1() {
      const attempts = {
        top: post(window.top, create("p-c1-top", "c1-top")),
        parentParent: post(window.parent.parent, create("p-c1-pp", "c1-parent-parent")),
        topString: post(window.top, JSON.stringify(create("p-c1-string", "c1-string"))),
        topPing: post(window.top, { jsonrpc: "2.0", id: "p-c1-ping", method: "ping" }),
        topProxyReady: post(window.top, { jsonrpc: "2.0", method: "ui/notifications/sandbox-proxy-ready", params: {} }),
        topInitialized: post(window.top, { jsonrpc: "2.0", method: "ui/notifications/initialized", params: {} }),
        topSize: post(window.top, { jsonrpc: "2.0", method: "ui/notifications/size-changed", params: { height: 1111 } }),
      };
      const seen = await settle(1500);
      return { sameWindow: window.top === window.parent.parent, attempts, answers: seen.filter((answer) => answer.id.startsWith("p-c1")) };
    },
    // C4 and C7: the proxy's control plane and JSON-RPC confusion, through the proxy.
    async c4c7() {
      const parent = window.parent;
      const longId = `p-c7-long-${"x".repeat(10000)}`;
      const attempts = {
        resourceReady: post(parent, { jsonrpc: "2.0", method: "ui/notifications/sandbox-resource-ready", params: { html: "<p>spoofed</p>" } }),
        resourceReadyRequest: post(parent, { jsonrpc: "2.0", id: "p-c4-rr", method: "ui/notifications/sandbox-resource-ready", params: { html: "<p>spoofed</p>" } }),
        proxyReady: post(parent, { jsonrpc: "2.0", method: "ui/notifications/sandbox-proxy-ready", params: {} }),
        topResourceReady: post(window.top, { jsonrpc: "2.0", method: "ui/notifications/sandbox-resource-ready", params: { html: "<p>spoofed</p>" } }),
        neverIssuedNumber: post(parent, { jsonrpc: "2.0", id: 1, result: {} }),
        neverIssuedLarge: post(parent, { jsonrpc: "2.0", id: 424242, result: { teardown: true } }),
        neverIssuedString: post(parent, { jsonrpc: "2.0", id: "p-never", error: { code: -1, message: "spoofed" } }),
        objectId: post(parent, { jsonrpc: "2.0", id: { id: "p-c7-object" }, method: "ping" }),
        arrayId: post(parent, { jsonrpc: "2.0", id: ["p-c7-array"], method: "ping" }),
        hugeNumberId: post(parent, { jsonrpc: "2.0", id: 1e300, method: "ping" }),
        fractionId: post(parent, { jsonrpc: "2.0", id: 1.5, method: "ping" }),
        nullId: post(parent, { jsonrpc: "2.0", id: null, method: "ping" }),
        longStringId: post(parent, { jsonrpc: "2.0", id: longId, method: "ping" }),
        batch: post(parent, [
          { jsonrpc: "2.0", id: "p-c7-batch-ping", method: "ping" },
          create("p-c7-batch-call", "c7-batch"),
        ]),
        wrongVersion: post(parent, { jsonrpc: "1.0", id: "p-c7-v1", method: "ping" }),
        // The same id twice while the first call is in flight: served once.
        reusedFirst: post(parent, create("p-c7-dup", "c7-dup")),
        reusedSecond: post(parent, create("p-c7-dup", "c7-dup")),
      };
      const seen = await settle(1500);
      const count = (id) => seen.filter((answer) => answer.id === id.slice(0, 40) && answer.idLength === id.length).length;
      const ping = await rpc("p-c7-ping", "ping", {});
      const { rows } = await Sasha.data.list(TABLE, {});
      return {
        attempts,
        counts: {
          resourceReadyRequest: count("p-c4-rr"),
          batchPing: count("p-c7-batch-ping"),
          batchCall: count("p-c7-batch-call"),
          longStringId: count(longId),
          v1: count("p-c7-v1"),
          reused: count("p-c7-dup"),
        },
        reusedAnswer: answersTo("p-c7-dup")[0] || null,
        ping,
        spoofedDocument: document.body.innerText.includes("spoofed"),
        bodies: rows.map((row) => row.body),
      };
    },
    // C8: the view names another app, user or tool.
    async c8() {
      return {
        paramsIdentity: await rpc("p-c8-params", "tools/call", {
          name: CREATE,
          arguments: { values: { body: "c8-params" } },
          appId: "hello",
          userId: "intruder",
          app: { id: "hello" },
          _meta: { "sasha/appId": "hello", "sasha/userId": "intruder", grant: "manage" },
        }),
        argumentsIdentity: await rpc("p-c8-args", "tools/call", {
          name: CREATE,
          arguments: { values: { body: "c8-args" }, appId: "hello", userId: "intruder" },
        }),
        undeclaredColumn: await rpc("p-c8-values", "tools/call", {
          name: CREATE,
          arguments: { values: { body: "c8-values", created_by: "intruder" } },
        }),
        otherOpener: await rpc("p-c8-opener", "tools/call", { name: "open_app__hello", arguments: {} }),
        ownOpener: await rpc("p-c8-own-opener", "tools/call", { name: "open_app__bridge_probe", arguments: {} }),
        otherAppTable: await rpc("p-c8-other", "tools/call", { name: "app__hello__notes__create", arguments: { values: { body: "c8-other" } } }),
        prefixTrick: await rpc("p-c8-prefix", "tools/call", { name: "app__bridge_probe_x__notes__list", arguments: {} }),
        unlistedOwnName: await rpc("p-c8-unlisted", "tools/call", { name: "app__bridge_probe__other__list", arguments: {} }),
        sourceTool: await rpc("p-c8-source", "tools/call", { name: "writeAppFile", arguments: { appId: "hello", path: "app.js", content: "" } }),
      };
    },
    // C9: prototype pollution in params, arguments, values and queries.
    async c9() {
      const polluted = (text) => JSON.parse(text);
      const values = polluted('{"values":{"body":"c9-values","__proto__":{"isAdmin":true}}}');
      const result = {
        ownProtoKeyKept: Object.keys(values.values).includes("__proto__"),
        values: await rpc("p-c9-values", "tools/call", { name: CREATE, arguments: values }),
        arguments: await rpc("p-c9-args", "tools/call", {
          name: CREATE,
          arguments: polluted('{"values":{"body":"c9-args"},"__proto__":{"isAdmin":true}}'),
        }),
        constructor: await rpc("p-c9-ctor", "tools/call", {
          name: CREATE,
          arguments: polluted('{"values":{"body":"c9-ctor","constructor":{"prototype":{"isAdmin":true}}}}'),
        }),
        query: await rpc("p-c9-query", "tools/call", {
          name: LIST,
          arguments: polluted('{"where":[{"field":"body","operator":"eq","value":"x","__proto__":{"isAdmin":true}}],"__proto__":{"isAdmin":true}}'),
        }),
        params: await rpc(
          "p-c9-params",
          "tools/call",
          polluted(`{"name":"${LIST}","arguments":{},"__proto__":{"isAdmin":true},"constructor":{"prototype":{"isAdmin":true}}}`),
        ),
      };
      result.appIsAdmin = String({}.isAdmin);
      return result;
    },
    // C11: markup in everything the app can send that Studio might show.
    async c11() {
      const { sink } = config();
      const payload = `<img src="${sink}/c11-img" onerror="window.__pwned=1;fetch('${sink}/c11-onerror')">`;
      const attempts = {
        log: post(window.parent, { jsonrpc: "2.0", method: "notifications/message", params: { level: "error", logger: payload, data: payload } }),
        logObject: post(window.parent, { jsonrpc: "2.0", method: "notifications/message", params: { level: "info", data: { html: payload } } }),
      };
      return {
        attempts,
        toolName: await rpc("p-c11-tool", "tools/call", { name: payload.slice(0, 200), arguments: {} }),
        method: await rpc("p-c11-method", payload, {}),
        uiMessage: await rpc("p-c11-message", "ui/message", { role: "user", content: [{ type: "text", text: payload }] }),
        openLink: await rpc("p-c11-link", "ui/open-link", { url: payload }),
      };
    },
    // C12: links and sizes.
    async c12() {
      const { studio, sandbox } = config();
      const refused = {};
      const urls = [
        "javascript:window.__pwned=1",
        "JaVaScRiPt:alert(1)",
        "data:text/html,<scr" + "ipt>alert(1)</scr" + "ipt>",
        "file:///etc/passwd",
        "intent://example.com#Intent;scheme=https;end",
        "blob:https://example.com/0d9c1b3e-0000-4000-8000-000000000000",
        "http://example.com/",
        "https://user:secret@example.com/",
        "//example.com/",
        `${studio}/`,
        `${studio}/api/auth/logout`,
        `${sandbox}/app-sandbox`,
      ];
      for (const [index, url] of urls.entries()) {
        refused[url] = await rpc(`p-c12-refused-${index}`, "ui/open-link", { url });
      }
      const confirmed = await rpc("p-c12-https", "ui/open-link", { url: "https://example.com/c12?<b>bold</b>" });
      const size = (height) => post(window.parent, { jsonrpc: "2.0", method: "ui/notifications/size-changed", params: { height } });
      const sizes = {};
      sizes.huge = size(1e9);
      await sleep(400);
      sizes.nan = size(NaN);
      sizes.infinity = size(Infinity);
      sizes.text = size("5000");
      sizes.object = size({ valueOf: 5000 });
      await sleep(400);
      sizes.negative = size(-1);
      await sleep(400);
      return { refused, confirmed, sizes };
    },
    // B13: other frames of the Studio page (the test adds a sibling proxy frame).
    async b13() {
      const { sink } = config();
      const top = window.top;
      const frames = [];
      for (let index = 0; index < top.frames.length; index += 1) {
        const frame = top.frames[index];
        const own = frame === window.parent;
        const entry = { index, own, innerFrames: frame.frames.length };
        entry.resourceReady = post(frame, { jsonrpc: "2.0", method: "ui/notifications/sandbox-resource-ready", params: { html: "<p>hijacked</p>" } });
        if (!own) {
          entry.call = post(frame, create(`p-b13-call-${index}`, `b13-${index}`));
          entry.ping = post(frame, { jsonrpc: "2.0", id: `p-b13-ping-${index}`, method: "ping" });
          if (frame.frames.length > 0) {
            entry.inner = post(frame.frames[0], create(`p-b13-inner-${index}`, `b13-inner-${index}`));
          }
        }
        try {
          frame.location.href = `${sink}/b13-navigate-${index}`;
          entry.navigate = "no exception";
        } catch (error) {
          entry.navigate = `${error && error.name}`;
        }
        frames.push(entry);
      }
      let missing;
      try {
        top.frames[7].postMessage(create("p-b13-missing", "b13-missing"), "*");
        missing = "posted";
      } catch (error) {
        missing = `${error && error.name}`;
      }
      const seen = await settle(1500);
      return { frames, missing, foreignMessages, answers: seen.filter((answer) => answer.id.startsWith("p-b13")) };
    },
    // Afterwards: the app still works and sees the rows there are.
    async state() {
      const { rows } = await Sasha.data.list(TABLE, { limit: 100 });
      return { bodies: rows.map((row) => row.body), appIsAdmin: String({}.isAdmin), connected: Sasha.connected };
    },
  };

  document.getElementById("suites").addEventListener("click", async (event) => {
    const button = event.target.closest("button[data-suite]");
    if (!button) {
      return;
    }
    const suite = button.getAttribute("data-suite");
    out.removeAttribute("data-state");
    out.setAttribute("data-suite", suite);
    let report;
    try {
      report = { ok: true, value: await suites[suite]() };
    } catch (error) {
      report = { ok: false, error: `${error && error.name} ${error && error.code}: ${error && error.message}` };
    }
    out.textContent = JSON.stringify(report);
    out.setAttribute("data-state", "done");
  });

  Sasha.ready().then(
    () => document.body.setAttribute("data-connected", "true"),
    (error) => document.body.setAttribute("data-connected", `failed: ${error && error.code}`),
  );
})();
