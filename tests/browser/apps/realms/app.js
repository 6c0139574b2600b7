// Every route this fixture knows to a WebRTC peer connection or a speculative
// connection (security catalogue B9). The test host sends `sasha-test/run`
// with the sink's port (TCP and UDP on the same port); each route reports what
// the page saw, and a route "escaped" when it got a working RTCPeerConnection
// in some window. The authority is the sink, which must record nothing.
"use strict";
(function () {
  const host = window.parent;
  const XHTML = "http://www.w3.org/1999/xhtml";
  const stage = document.getElementById("stage");
  // Captured before the last route replaces Document.prototype.createElement
  // (which succeeds when nothing locks it).
  const createElement = document.createElement.bind(document);
  const sleep = (ms) => new Promise((resolve) => setTimeout(resolve, ms));
  const describe = (error) => `${error && error.name}: ${error && error.message}`;
  // Peer connections are kept alive here so nothing is collected mid-gathering.
  const peers = [];
  const seen = new Set([window]);
  let port = 0;

  // Route 0 runs while the document is still being parsed: document.write
  // then inserts into the parser's stream instead of replacing the document.
  let parseTimeWrite;
  try {
    document.write('<iframe id="written"></iframe>');
    parseTimeWrite = "no error";
  } catch (error) {
    parseTimeWrite = { refused: true, detail: describe(error) };
  }

  function iceServers() {
    return [
      { urls: [`stun:127.0.0.1:${port}`] },
      // A TURN username is a channel of its own: it is sent to the server.
      { urls: [`turn:127.0.0.1:${port}?transport=udp`, `turn:127.0.0.1:${port}?transport=tcp`], username: "exfiltrated-by-turn", credential: "x" },
    ];
  }
  // A constructed peer connection is an escape; gathering (which sends the
  // datagrams) goes on in the background, since a detached realm's promises
  // never settle.
  function peer(RTC) {
    const pc = new RTC({ iceServers: iceServers() });
    peers.push(pc);
    pc.createDataChannel("probe");
    pc.createOffer().then((offer) => pc.setLocalDescription(offer)).catch(() => {});
    return pc;
  }
  // Every window reachable now that was not before: a second realm. Each one
  // with a WebRTC constructor is used against the sink.
  async function newRealms(extra) {
    const found = [];
    const candidates = [];
    for (let i = 0; i < window.length; i++) {
      candidates.push(window[i]);
    }
    for (const element of extra || []) {
      // Reading an <object>'s or <embed>'s contentWindow stalls Chromium's
      // renderer; a window of theirs is in window.frames anyway.
      if (element.localName === "object" || element.localName === "embed") {
        continue;
      }
      try {
        candidates.push(element.contentWindow);
      } catch (ignored) { /* no window */ }
    }
    for (const win of candidates) {
      if (!win || seen.has(win)) {
        continue;
      }
      seen.add(win);
      let rtc = "none";
      try {
        if (typeof win.RTCPeerConnection === "function") {
          peer(win.RTCPeerConnection);
          rtc = "a working RTCPeerConnection";
        } else {
          rtc = `RTCPeerConnection is ${typeof win.RTCPeerConnection}`;
        }
      } catch (error) {
        rtc = describe(error);
      }
      found.push(rtc);
    }
    return found;
  }

  const sink = (path) => `http://127.0.0.1:${port}/${path}`;
  const frame = (tag) => '<' + tag + ' id="made"></' + tag + '>';
  function link(rel) {
    return `<link rel="${rel}" href="${sink(rel)}">`;
  }

  // Each route returns the elements it made (to look for their windows) or
  // throws. `kind` says what the route aims at.
  const routes = [
    // First, so the frame it wrote (if any) is counted as its own.
    ["document.write while parsing", "realm", () => {
      if (parseTimeWrite && parseTimeWrite.refused) {
        throw Object.assign(new Error(parseTimeWrite.detail), { name: "Refused" });
      }
      return [document.getElementById("written")];
    }],
    ["own window: new RTCPeerConnection", "rtc", () => { peer(RTCPeerConnection); return []; }],
    ["own window: new webkitRTCPeerConnection", "rtc", () => { peer(webkitRTCPeerConnection); return []; }],
    ["own window: redefine RTCPeerConnection", "rtc", async () => {
      Object.defineProperty(window, "RTCPeerConnection", { value: function () {}, configurable: true });
      peer(window.RTCPeerConnection);
      return [];
    }],
    ["own window: the other transports", "rtc", async () => {
      const present = ["RTCDataChannel", "RTCIceTransport", "RTCSctpTransport", "RTCDtlsTransport", "RTCRtpSender"]
        .filter((name) => typeof window[name] === "function");
      if (present.length) {
        throw Object.assign(new Error(`still defined: ${present.join(", ")}`), { name: "Escaped" });
      }
      throw Object.assign(new Error("none of them is defined"), { name: "Refused" });
    }],
    ["createElement('iframe') + appendChild", "realm", () => [stage.appendChild(document.createElement("iframe"))]],
    ["createElement('IFRAME') + insertBefore", "realm", () => [stage.insertBefore(document.createElement("IFRAME"), null)]],
    ["createElementNS(XHTML, 'h:iframe') + append", "realm", () => { const f = document.createElementNS(XHTML, "h:iframe"); stage.append(f); return [f]; }],
    ["createElement with a changing toString", "realm", () => {
      let calls = 0;
      const name = { toString: () => (calls++ === 0 ? "div" : "iframe") };
      const f = document.createElement(name);
      stage.append(f);
      if (f.localName !== "iframe") {
        throw Object.assign(new Error(`the browser was given "${f.localName}", the name that was checked`), { name: "Refused" });
      }
      return [f];
    }],
    ["createElement('frame')", "realm", () => [stage.appendChild(document.createElement("frame"))]],
    // Created only: object-src 'none' blocks any load of theirs, and an
    // inserted <object> without one stalls Chromium's renderer.
    ["createElement('object')", "realm", () => { document.createElement("object"); return []; }],
    ["createElement('embed')", "realm", () => { document.createElement("embed"); return []; }],
    ["innerHTML", "realm", () => { stage.innerHTML = frame("iframe"); return [stage.firstChild]; }],
    ["outerHTML", "realm", () => { const d = stage.appendChild(document.createElement("div")); d.outerHTML = frame("iframe"); return [stage.lastChild]; }],
    ["insertAdjacentHTML", "realm", () => { stage.insertAdjacentHTML("beforeend", frame("iframe")); return [stage.lastChild]; }],
    ["setHTMLUnsafe", "realm", () => { stage.setHTMLUnsafe(frame("iframe")); return [stage.firstChild]; }],
    ["setHTMLUnsafe with a declarative shadow root", "realm", () => {
      stage.setHTMLUnsafe(`<div><template shadowrootmode="open">${frame("iframe")}</template></div>`);
      const root = stage.firstChild && stage.firstChild.shadowRoot;
      return root ? [root.firstChild] : [];
    }],
    ["attachShadow + shadowRoot.innerHTML", "realm", () => {
      const root = stage.appendChild(document.createElement("div")).attachShadow({ mode: "closed" });
      root.innerHTML = frame("iframe");
      return [root.firstChild];
    }],
    ["Range.createContextualFragment + insertNode", "realm", () => {
      const range = document.createRange();
      range.selectNodeContents(stage);
      const fragment = range.createContextualFragment(frame("iframe"));
      const f = fragment.firstChild;
      range.insertNode(fragment);
      return [f];
    }],
    ["DOMParser text/html + adoptNode", "realm", () => {
      const parsed = new DOMParser().parseFromString(frame("iframe"), "text/html");
      const f = document.adoptNode(parsed.body.firstChild);
      stage.append(f);
      return [f];
    }],
    ["DOMParser XHTML with a prefix + importNode", "realm", () => {
      const xml = `<h:iframe xmlns:h="${XHTML}"/>`;
      const parsed = new DOMParser().parseFromString(xml, "application/xhtml+xml");
      const f = document.importNode(parsed.documentElement, true);
      stage.append(f);
      return [f];
    }],
    ["DOMParser XML with an entity that expands to markup", "realm", () => {
      const xml = `<!DOCTYPE x [<!ENTITY e "&#60;iframe xmlns='${XHTML}'/&#62;">]><x>&e;</x>`;
      const parsed = new DOMParser().parseFromString(xml, "application/xml");
      const f = document.importNode(parsed.documentElement.firstChild, true);
      stage.append(f);
      return [f];
    }],
    ["template innerHTML + content clone", "realm", () => {
      const template = document.createElement("template");
      template.innerHTML = frame("iframe");
      const clone = template.content.cloneNode(true);
      const f = clone.firstChild;
      stage.append(clone);
      return [f];
    }],
    ["implementation.createDocument(XHTML, 'iframe')", "realm", () => {
      const made = document.implementation.createDocument(XHTML, "iframe", null);
      const f = document.adoptNode(made.documentElement);
      stage.append(f);
      return [f];
    }],
    ["createHTMLDocument().createElement('iframe')", "realm", () => {
      const other = document.implementation.createHTMLDocument("other");
      const f = document.adoptNode(other.createElement("iframe"));
      stage.append(f);
      return [f];
    }],
    ["a customized built-in extending iframe", "realm", () => {
      class Framed extends HTMLIFrameElement {}
      customElements.define("x-framed", Framed, { extends: "iframe" });
      const f = new Framed();
      stage.append(f);
      return [f];
    }],
    ["execCommand('insertHTML') in a contenteditable", "realm", () => {
      const editable = document.getElementById("editable");
      editable.focus();
      document.execCommand("insertHTML", false, frame("iframe"));
      return Array.from(editable.querySelectorAll("iframe"));
    }],
    ["an app-made Trusted Types policy", "realm", () => {
      const policy = trustedTypes.createPolicy(`app-${Math.random()}`, { createHTML: (text) => text });
      stage.innerHTML = policy.createHTML(frame("iframe"));
      return [stage.firstChild];
    }],
    ["TrustedHTML.fromLiteral", "realm", () => {
      if (typeof TrustedHTML === "undefined" || typeof TrustedHTML.fromLiteral !== "function") {
        throw Object.assign(new Error("TrustedHTML.fromLiteral is not available"), { name: "Absent" });
      }
      stage.innerHTML = TrustedHTML.fromLiteral(['<iframe id="made"></iframe>']);
      return [stage.firstChild];
    }],
    ["XSLTProcessor building an element by computed name", "realm", () => {
      if (typeof XSLTProcessor !== "function") {
        throw Object.assign(new Error("XSLTProcessor is not available"), { name: "Absent" });
      }
      const xsl = new DOMParser().parseFromString(
        `<xsl:stylesheet version="1.0" xmlns:xsl="http://www.w3.org/1999/XSL/Transform"><xsl:template match="/"><xsl:element name="{concat('ifr','ame')}" namespace="${XHTML}"/></xsl:template></xsl:stylesheet>`,
        "application/xml");
      const processor = new XSLTProcessor();
      processor.importStylesheet(xsl);
      const fragment = processor.transformToFragment(new DOMParser().parseFromString("<x/>", "application/xml"), document);
      const f = fragment.firstChild;
      stage.append(fragment);
      return [f];
    }],
    ["Sanitizer setHTML with a preconnect link", "link", () => {
      if (typeof stage.setHTML !== "function") {
        throw Object.assign(new Error("setHTML is not available"), { name: "Absent" });
      }
      stage.setHTML(link("preconnect"), { sanitizer: {} });
      return [];
    }],
    ["createElement('link') rel=preconnect", "link", () => {
      const l = document.createElement("link");
      l.rel = "preconnect";
      l.href = sink("preconnect");
      document.head.append(l);
      return [];
    }],
    ["innerHTML <link rel=dns-prefetch>", "link", () => { stage.innerHTML = link("dns-prefetch"); return []; }],
    ["insertAdjacentHTML <link rel=prefetch>", "link", () => { stage.insertAdjacentHTML("beforeend", link("prefetch")); return []; }],
    ["setHTMLUnsafe <link rel=prerender>", "link", () => { stage.setHTMLUnsafe(link("prerender")); return []; }],
    ["outerHTML <link rel=modulepreload>", "link", () => { const d = stage.appendChild(document.createElement("div")); d.outerHTML = link("modulepreload"); return []; }],
    ["a.ping property + click", "link", () => {
      const a = document.createElement("a");
      a.href = "#pinged";
      a.ping = sink("ping-property");
      stage.append(a);
      a.click();
      return [];
    }],
    ["setAttribute('ping') + click", "link", () => {
      const a = document.createElement("a");
      a.href = "#pinged";
      a.setAttribute("PING", sink("ping-attribute"));
      stage.append(a);
      a.click();
      return [];
    }],
    ["innerHTML <a ping> + click", "link", () => {
      stage.innerHTML = `<a href="#pinged" ping="${sink("ping-markup")}">x</a>`;
      stage.firstChild.click();
      return [];
    }],
    ["speculation rules script", "link", () => {
      const script = document.createElement("script");
      script.type = "speculationrules";
      script.textContent = JSON.stringify({ prefetch: [{ source: "list", urls: [sink("speculation")] }] });
      document.head.append(script);
      return [];
    }],
    ["a worker (a realm of its own)", "realm", () => {
      new Worker(URL.createObjectURL(new Blob(["postMessage(typeof RTCPeerConnection)"], { type: "text/javascript" })));
      return [];
    }],
    ["window.open", "realm", () => {
      const opened = window.open("about:blank");
      if (opened) {
        return [{ contentWindow: opened }];
      }
      throw Object.assign(new Error("window.open returned null"), { name: "Refused" });
    }],
    ["replacing Document.prototype.createElement", "realm", () => {
      Object.defineProperty(Document.prototype, "createElement", { value: () => null, configurable: true });
      return [];
    }],
  ];

  async function runAll() {
    const results = [];
    for (const [name, kind, route] of routes) {
      let outcome = "completed";
      let detail = "no error";
      let made = [];
      try {
        made = (await route()) || [];
      } catch (error) {
        outcome = { Escaped: "escaped", Absent: "absent" }[error && error.name] || "refused";
        detail = describe(error);
      }
      const realms = await newRealms(made.filter(Boolean));
      if (realms.some((rtc) => rtc === "a working RTCPeerConnection")) {
        outcome = "escaped";
      } else if (kind === "rtc" && outcome === "completed") {
        outcome = "escaped";
      }
      results.push({ name, kind, outcome, detail, realms });
      const item = createElement("li");
      item.className = outcome === "escaped" ? "escaped" : "";
      item.textContent = `${outcome}: ${name} (${detail})${realms.length ? ` realms: ${realms.join("; ")}` : ""}`;
      document.getElementById("results").append(item);
    }
    return results;
  }

  window.addEventListener("message", async (event) => {
    const data = event.data;
    if (event.source !== host || !data || data.method !== "sasha-test/run") {
      return;
    }
    port = data.params.port;
    document.getElementById("status").textContent = "running";
    const results = await runAll();
    // STUN and TURN retransmit for a while; give them time to reach the sink.
    await sleep(500);
    document.getElementById("status").textContent = "finished";
    host.postMessage({ jsonrpc: "2.0", id: data.id, result: { results, childWindows: window.length } }, "*");
  });
  host.postMessage({ jsonrpc: "2.0", method: "sasha-test/loaded", params: { origin: self.origin } }, "*");
})();
