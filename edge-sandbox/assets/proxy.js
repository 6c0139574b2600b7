// Sasha sandbox proxy: the only script on the sandbox origin.
//
// It runs in the Studio's outer iframe (page /app-sandbox) and does three things:
//
// 1. Tells the Studio it is ready: `ui/notifications/sandbox-proxy-ready`, posted
//    to the parent with the Studio origin as target origin.
// 2. On the first `ui/notifications/sandbox-resource-ready` from the Studio,
//    creates exactly one inner iframe holding the resource's HTML as an opaque
//    `data:` document, with fixed sandbox flags and no device permissions.
//    The message's `sandbox`, `csp` and `permissions` are ignored: nothing the
//    host says can widen the frame. A second resource-ready is dropped; a new
//    app or revision gets a new outer frame.
// 3. Relays JSON-RPC between exactly two pinned windows: the parent with the
//    exact Studio origin, and the inner frame's own WindowProxy. Everything
//    else is dropped without an answer: other windows and origins, anything
//    that is not a JSON-RPC 2.0 message, anything over MAX_MESSAGE_BYTES of
//    JSON (MAX_UPLOAD_MESSAGE_BYTES for a call of the upload tool), and any `ui/notifications/sandbox-*` method (the proxy's own control
//    plane, never forwarded in either direction). What is relayed is the
//    message re-parsed from its JSON text, so only plain JSON ever crosses
//    (no Blob, ArrayBuffer, MessagePort or other structured-clone objects).
//
// A second `load` of the inner frame means the app navigated it: the frame is
// removed and the Studio is told with a `notifications/message` at level
// "error". Loaded at top level the proxy refuses to do anything.
"use strict";
(function () {
  if (window.top === window.self || window.parent === window.self) {
    document.documentElement.textContent = "This page only runs inside Sasha Studio.";
    return;
  }

  // The configured Studio origin, put into the page by edge-sandbox.
  var studioMeta = document.querySelector('meta[name="sasha-studio-origin"]');
  var STUDIO_ORIGIN = studioMeta ? studioMeta.getAttribute("content") : "";
  if (!STUDIO_ORIGIN) {
    return;
  }
  // The largest message relayed, measured as UTF-8 bytes of its JSON text.
  var MAX_MESSAGE_BYTES = 4 * 1024 * 1024;
  // The largest `tools/call` of the upload tool: 25 MiB of documents as
  // base64 and the JSON around them.
  var MAX_UPLOAD_MESSAGE_BYTES = 36 * 1024 * 1024;
  var UPLOAD_TOOL = "sasha__files_upload";
  var INNER_SANDBOX = "allow-scripts allow-same-origin allow-forms";
  var CONTROL_PREFIX = "ui/notifications/sandbox-";
  var RESOURCE_READY = "ui/notifications/sandbox-resource-ready";
  var NAVIGATED = "sasha: the app frame navigated and was removed";

  // The Studio window, pinned at start.
  var host = window.parent;
  // The inner iframe element and its WindowProxy, pinned when it is created and
  // cleared when it is torn down. The WindowProxy stays the same object across
  // navigations of the frame, so it names the frame, not a document.
  var innerFrame = null;
  var innerWindow = null;
  // "waiting" until the resource arrives, then "running", then "closed" after a
  // teardown; a closed proxy relays nothing.
  var state = "waiting";
  // How many `load` events the inner frame has fired: the first one is the
  // resource, any later one a navigation.
  var innerLoads = 0;

  function isPlainObject(value) {
    if (value === null || typeof value !== "object" || Array.isArray(value)) {
      return false;
    }
    var proto = Object.getPrototypeOf(value);
    return proto === null || Object.getPrototypeOf(proto) === null;
  }

  function isId(value) {
    return typeof value === "string" || (typeof value === "number" && isFinite(value));
  }

  function utf8Length(text, limit) {
    // Each UTF-16 unit is at most 3 UTF-8 bytes: only count when it matters.
    if (text.length * 3 <= limit) {
      return text.length;
    }
    return new TextEncoder().encode(text).length;
  }

  // The size limit of `data`: larger only for a call of the upload tool.
  function sizeLimit(data) {
    var upload =
      data.method === "tools/call" && isPlainObject(data.params) && data.params.name === UPLOAD_TOOL;
    return upload ? MAX_UPLOAD_MESSAGE_BYTES : MAX_MESSAGE_BYTES;
  }

  // The message as plain JSON if it may be relayed, else null.
  function wellFormed(data) {
    if (!isPlainObject(data) || data.jsonrpc !== "2.0") {
      return null;
    }
    var text;
    try {
      text = JSON.stringify(data);
    } catch (error) {
      return null;
    }
    var limit = sizeLimit(data);
    if (typeof text !== "string" || text.length > limit || utf8Length(text, limit) > limit) {
      return null;
    }
    var message = JSON.parse(text);
    if (!isPlainObject(message)) {
      return null;
    }
    var hasResult = Object.prototype.hasOwnProperty.call(message, "result");
    var hasError = Object.prototype.hasOwnProperty.call(message, "error");
    if (Object.prototype.hasOwnProperty.call(message, "method")) {
      // A request (with an id) or a notification.
      if (typeof message.method !== "string" || message.method === "" || hasResult || hasError) {
        return null;
      }
      if (Object.prototype.hasOwnProperty.call(message, "id") && !isId(message.id)) {
        return null;
      }
      if (Object.prototype.hasOwnProperty.call(message, "params")) {
        var params = message.params;
        if (params === null || typeof params !== "object") {
          return null;
        }
      }
      return message;
    }
    // A response: an id and exactly one of result and error.
    if (!isId(message.id) || hasResult === hasError) {
      return null;
    }
    if (hasError && !isPlainObject(message.error)) {
      return null;
    }
    return message;
  }

  function isControl(message) {
    return typeof message.method === "string" && message.method.indexOf(CONTROL_PREFIX) === 0;
  }

  function toHost(message) {
    host.postMessage(message, STUDIO_ORIGIN);
  }

  function base64Utf8(text) {
    var bytes = new TextEncoder().encode(text);
    var binary = "";
    for (var start = 0; start < bytes.length; start += 0x8000) {
      binary += String.fromCharCode.apply(null, bytes.subarray(start, start + 0x8000));
    }
    return btoa(binary);
  }

  function tearDown(reason) {
    state = "closed";
    innerWindow = null;
    if (innerFrame !== null) {
      innerFrame.remove();
      innerFrame = null;
    }
    toHost({ jsonrpc: "2.0", method: "notifications/message", params: { level: "error", data: reason } });
  }

  function onInnerLoad() {
    innerLoads += 1;
    if (innerLoads > 1 && state === "running") {
      tearDown(NAVIGATED);
    }
  }

  function createInnerFrame(html) {
    var frame = document.createElement("iframe");
    frame.setAttribute("sandbox", INNER_SANDBOX);
    frame.setAttribute("allow", "");
    frame.setAttribute("referrerpolicy", "no-referrer");
    frame.setAttribute("title", "App");
    frame.addEventListener("load", onInnerLoad);
    // The source is set before the frame is attached, so no initial
    // about:blank document fires a load of its own.
    frame.src = "data:text/html;base64," + base64Utf8(html);
    (document.body || document.documentElement).appendChild(frame);
    innerFrame = frame;
    innerWindow = frame.contentWindow;
    state = "running";
  }

  function fromHost(message) {
    if (message.method === RESOURCE_READY) {
      var params = message.params;
      if (state === "waiting" && isPlainObject(params) && typeof params.html === "string") {
        createInnerFrame(params.html);
      }
      return;
    }
    if (isControl(message) || state !== "running") {
      return;
    }
    // The inner document is opaque (origin "null"), so no target origin can name
    // it; the pinned WindowProxy is what keeps this path to the one frame.
    innerWindow.postMessage(message, "*");
  }

  function fromInner(message) {
    if (isControl(message) || state !== "running") {
      return;
    }
    toHost(message);
  }

  window.addEventListener("message", function (event) {
    var fromParent = event.source === host && event.origin === STUDIO_ORIGIN;
    var fromApp = innerWindow !== null && event.source === innerWindow && event.origin === "null";
    if (!fromParent && !fromApp) {
      return;
    }
    var message = wellFormed(event.data);
    if (message === null) {
      return;
    }
    if (fromParent) {
      fromHost(message);
    } else {
      fromInner(message);
    }
  });

  toHost({ jsonrpc: "2.0", method: "ui/notifications/sandbox-proxy-ready", params: {} });
})();
