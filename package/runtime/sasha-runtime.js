// Sasha runtime: window.Sasha, the View side of MCP Apps 2026-01-26, inlined
// into every app resource right after the assembler's one-line config
// `window.__SASHA_APP__ = {id, version, capabilities}`. JSON-RPC 2.0 over
// postMessage with the parent window only. Documented in mcp-gateway/docs/facade.md.
(function () {
  "use strict";
  var W = window, P = W.parent, D = W.document;
  var APP = W.__SASHA_APP__ && typeof W.__SASHA_APP__ === "object" ? W.__SASHA_APP__ : {};
  try { delete W.__SASHA_APP__; } catch (ignored) { /* not configurable: leave it */ }
  var CAPS = APP.capabilities && typeof APP.capabilities === "object" ? APP.capabilities : null;
  var INIT_MS = 15000, CALL_MS = 30000, CHAT_IDLE_MS = 120000, UPLOAD_MS = 300000, SIZE_MS = 50;
  var POOL = 4, MAX_FILES = 10, MAX_UPLOAD = 25 * 1024 * 1024, MIN_H = 240, MAX_H = 1200, FULL_H = 16000;

  // The closed registry, [retryable, default message] per code: generated from
  // sasha_contract::error::ErrorCode (`SASHA_REGENERATE=1 cargo test -p
  // sasha-package runtime_registry`); a test fails when the two differ.
  var REGISTRY = {
    APP_NOT_READY: [true, "the service is not ready for this request yet"],
    APP_CAPABILITY_DENIED: [false, "this app did not declare the capability it tried to use"],
    APP_OPERATION_UNAVAILABLE: [false, "this operation is not available"],
    APP_INPUT_INVALID: [false, "the input is invalid"],
    APP_RESOURCE_LIMIT: [false, "the request exceeds a resource limit"],
    APP_BUSY: [true, "too many requests are in progress; try again shortly"],
    APP_CHAT_UNAVAILABLE: [true, "chat is not available right now"],
    APP_CHAT_FAILED: [true, "the chat request failed"],
    APP_UPLOAD_FAILED: [false, "the upload could not be processed"],
    APP_TIMEOUT: [true, "the operation timed out"],
    APP_CANCELLED: [false, "the operation was cancelled"],
    APP_REVISION_UNAVAILABLE: [false, "this app revision is no longer available; reopen the app"],
    APP_NOT_FOUND: [false, "not found"],
    APP_PATH_INVALID: [false, "not found"],
    APP_ACTION_UNAVAILABLE: [false, "this action is not available"],
    APP_ACTION_INVALID: [false, "the action declaration is invalid"],
    APP_ACCESS_DENIED: [false, "access denied"],
    APP_RECORD_NOT_FOUND: [false, "record not found"],
    APP_CONFLICT: [false, "the record changed since it was read"],
    APP_IDEMPOTENCY_MISMATCH: [false, "this idempotency key was already used for a different request"],
    APP_FIELD_UNDECLARED: [false, "the request names a field the app did not declare"],
    APP_SCHEMA_INCOMPATIBLE: [false, "the app's data does not match its declared schema"],
    APP_MIGRATION_FAILED: [false, "the app's data migration failed"],
    APP_CONFIRMATION_REQUIRED: [false, "this change must be confirmed by the user before it runs"],
    APP_DATABASE_UNAVAILABLE: [true, "the app's data is temporarily unavailable; try again"],
    APP_UNAUTHENTICATED: [false, "authentication required"],
    APP_INTERNAL: [false, "an internal error occurred"],
  };
  var UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i;
  var UNSAFE = /[\u0000-\u001f\u007f-\u009f\u200b-\u200f\u2028-\u202e\u2066-\u2069\ufeff]/g;
  var own = function (object, key) { return Object.prototype.hasOwnProperty.call(object, key); };
  var isObject = function (value) { return !!value && typeof value === "object" && !Array.isArray(value); };
  var ours = new WeakSet();

  function uuid() {
    var c = W.crypto;
    if (typeof c.randomUUID === "function") return c.randomUUID();
    var b = c.getRandomValues(new Uint8Array(16)), h = "";
    b[6] = (b[6] & 15) | 64; b[8] = (b[8] & 63) | 128;
    for (var i = 0; i < 16; i++) h += (b[i] + 256).toString(16).slice(1);
    return h.slice(0, 8) + "-" + h.slice(8, 12) + "-" + h.slice(12, 16) + "-" + h.slice(16, 20) + "-" + h.slice(20);
  }
  // Host text as one bounded line without control, invisible or bidi characters.
  function clean(text, max) {
    if (typeof text !== "string") return "";
    text = text.replace(UNSAFE, " ").trim();
    return text.length > max ? text.slice(0, max - 1) + "\u2026" : text;
  }
  function copy(value) {
    try { return value && typeof value === "object" ? JSON.parse(JSON.stringify(value)) : null; } catch (e) { return null; }
  }

  // The one failure shape: an Error with {code, message, retryable, diagnosticId, details?}.
  function fail(code, message, diagnosticId, details, retryable) {
    if (!own(REGISTRY, code)) code = "APP_INTERNAL";
    var error = new Error();
    Object.defineProperty(error, "name", { value: "SashaError", configurable: true, writable: true });
    error.code = code;
    Object.defineProperty(error, "message", { value: message || REGISTRY[code][1], enumerable: true, configurable: true, writable: true });
    error.retryable = typeof retryable === "boolean" ? retryable : REGISTRY[code][0];
    error.diagnosticId = typeof diagnosticId === "string" && UUID.test(diagnosticId) ? diagnosticId : uuid();
    if (details !== undefined) error.details = details;
    ours.add(error);
    return error;
  }
  // A tool result's structuredContent.error: trusted only field by field.
  function fromEnvelope(envelope) {
    if (!isObject(envelope) || !own(REGISTRY, envelope.code)) return fail("APP_INTERNAL", null, envelope && envelope.diagnosticId);
    var message = envelope.message, details = copy(envelope.details);
    var safe = typeof message === "string" && message.length <= 500 && clean(message, 500) === message && message !== "";
    var small = isObject(details) && JSON.stringify(details).length <= 4096;
    return fail(envelope.code, safe ? message : null, envelope.diagnosticId, small ? details : undefined, envelope.retryable);
  }
  function fromRpcError(error) {
    if (isObject(error.data) && own(REGISTRY, error.data.code)) return fromEnvelope(error.data);
    var code = error.code === -32602 ? "APP_INPUT_INVALID" : "APP_OPERATION_UNAVAILABLE";
    return fail(code, clean(error.message, 200), isObject(error.data) ? error.data.diagnosticId : null);
  }

  // Transport: requests we sent, by id; settled once, late answers ignored.
  var nextId = 0, pending = new Map(), closed = false, connected = false;
  var hostCapabilities = {}, hostContext = {}, readyPromise = null;
  function post(message) { P.postMessage(message, "*"); }
  function notify(method, params) { try { post({ jsonrpc: "2.0", method: method, params: params }); } catch (e) { /* detached */ } }
  function arm(id, entry) {
    W.clearTimeout(entry.timer);
    entry.timer = W.setTimeout(function () {
      if (pending.get(id) !== entry) return;
      pending.delete(id);
      entry.reject(fail("APP_TIMEOUT"));
    }, entry.ms);
  }
  function request(method, params, ms, handle) {
    return new Promise(function (resolve, reject) {
      if (closed) return reject(fail("APP_CANCELLED"));
      var id = ++nextId, entry = { resolve: resolve, reject: reject, ms: ms, timer: 0 };
      if (handle) handle.id = id;
      try {
        post({ jsonrpc: "2.0", id: id, method: method, params: params });
      } catch (e) {
        return reject(fail("APP_INPUT_INVALID", "the arguments cannot be sent to the host"));
      }
      pending.set(id, entry);
      arm(id, entry);
    });
  }
  function reply(id, result, error) {
    var message = { jsonrpc: "2.0", id: id };
    if (error) message.error = error; else message.result = result;
    try { post(message); } catch (e) { /* detached */ }
  }
  function wellFormed(m) {
    if (!isObject(m) || m.jsonrpc !== "2.0") return false;
    var id = typeof m.id === "number" || typeof m.id === "string";
    if (typeof m.method === "string") return (!("id" in m) || id) && (m.params === undefined || isObject(m.params));
    if (!id || ("result" in m) === ("error" in m)) return false;
    return !("error" in m) || (isObject(m.error) && typeof m.error.code === "number");
  }
  W.addEventListener("message", function (event) {
    if (event.source !== P || P === W || !wellFormed(event.data)) return;
    var m = event.data, params = m.params || {};
    if (typeof m.method !== "string") {
      var entry = pending.get(m.id);
      if (!entry) return;
      pending.delete(m.id);
      W.clearTimeout(entry.timer);
      if ("error" in m) entry.reject(fromRpcError(m.error)); else entry.resolve(m.result);
    } else if ("id" in m) {
      if (m.method === "ping") return reply(m.id, {});
      if (m.method !== "ui/resource-teardown") return reply(m.id, null, { code: -32601, message: "Method not found" });
      reply(m.id, {});
      teardown();
    } else if (!closed) {
      if (m.method === "ui/notifications/host-context-changed") {
        hostContext = Object.assign({}, hostContext, copy(params));
        // The height limit may have changed with the display mode.
        if (observers.length) scheduleSize();
        applyContext();
      } else if (m.method === "notifications/progress") {
        if (chat && params.progressToken === chat.token && typeof params.message === "string") {
          var e = pending.get(chat.id);
          if (e) arm(chat.id, e);
          emit(streamListeners, [params.message, false]);
        } else if (uploading && params.progressToken === uploading.token) {
          report(uploading, "converting");
        }
      } else if (m.method === "ui/notifications/tool-result") {
        lastToolResult = copy(params);
        emit(toolResultListeners, [copy(lastToolResult)]);
      }
    }
  });

  function teardown() {
    if (closed) return;
    closed = true;
    connected = false;
    pending.forEach(function (entry) { W.clearTimeout(entry.timer); entry.reject(fail("APP_CANCELLED")); });
    pending.clear();
    queue.splice(0).forEach(function (job) { job.reject(fail("APP_CANCELLED")); });
    observers.forEach(function (observer) { observer.disconnect(); });
    W.clearTimeout(sizeTimer);
    chat = null;
  }

  // Presentation: host CSS variables and theme on <html>, height to the host.
  function applyContext() {
    try {
      var root = D.documentElement, vars = isObject(hostContext.styles) ? hostContext.styles.variables : null;
      if (isObject(vars)) Object.keys(vars).slice(0, 256).forEach(function (name) {
        if (/^--[A-Za-z0-9_-]{1,100}$/.test(name) && typeof vars[name] === "string" && vars[name].length <= 1000) root.style.setProperty(name, vars[name]);
      });
      if (hostContext.theme === "light" || hostContext.theme === "dark") {
        root.setAttribute("data-theme", hostContext.theme);
        root.style.colorScheme = hostContext.theme;
      }
    } catch (e) { /* presentation only */ }
  }
  var observers = [], sizeTimer = 0, lastHeight = -1;
  // The spec's 240-1200 clamp is for an inline view; a host showing the view
  // in full height (displayMode "fullscreen") gives its own maxHeight.
  function heightLimit() {
    var box = isObject(hostContext.containerDimensions) ? hostContext.containerDimensions : {};
    if (hostContext.displayMode !== "fullscreen" || typeof box.maxHeight !== "number" || !isFinite(box.maxHeight)) return MAX_H;
    return Math.max(MIN_H, Math.min(FULL_H, Math.floor(box.maxHeight)));
  }
  function measure() {
    if (closed) return;
    var root = D.documentElement, body = D.body, height = root.style.height, minHeight = body ? body.style.minHeight : "";
    // Content height, not the frame's: the baseline gives body min-height 100vh.
    root.style.height = "max-content";
    if (body) body.style.minHeight = "0";
    var measured = Math.ceil(root.getBoundingClientRect().height);
    root.style.height = height;
    if (body) body.style.minHeight = minHeight;
    measured = Math.min(heightLimit(), Math.max(MIN_H, measured || 0));
    if (measured === lastHeight) return;
    lastHeight = measured;
    notify("ui/notifications/size-changed", { height: measured });
  }
  function scheduleSize() {
    W.clearTimeout(sizeTimer);
    sizeTimer = W.setTimeout(measure, SIZE_MS);
  }
  function watchSize() {
    try {
      if (typeof W.ResizeObserver === "function") {
        var resize = new W.ResizeObserver(scheduleSize);
        resize.observe(D.documentElement);
        if (D.body) resize.observe(D.body);
        observers.push(resize);
      }
      // Our own style writes are attributes, so they never re-trigger this.
      if (typeof W.MutationObserver === "function") {
        var mutation = new W.MutationObserver(scheduleSize);
        mutation.observe(D.documentElement, { childList: true, subtree: true, characterData: true });
        observers.push(mutation);
      }
    } catch (e) { /* size reporting is best effort */ }
    scheduleSize();
  }

  function ready() {
    if (!readyPromise) {
      readyPromise = request("ui/initialize", {
        appInfo: { name: typeof APP.id === "string" ? APP.id : "sasha-app", version: typeof APP.version === "string" ? APP.version : "0" },
        appCapabilities: {},
        protocolVersion: "2026-01-26",
      }, INIT_MS).then(function (result) {
        if (closed) throw fail("APP_CANCELLED");
        if (!isObject(result)) throw fail("APP_NOT_READY", "the host did not initialize the app");
        hostCapabilities = copy(result.hostCapabilities) || {};
        hostContext = copy(result.hostContext) || {};
        connected = true;
        notify("ui/notifications/initialized", {});
        applyContext();
        watchSize();
      });
    }
    return readyPromise;
  }
  // Every operation: refused after teardown, local checks first, one failure shape.
  function attempt(run, fallback) {
    if (closed) return Promise.reject(fail("APP_CANCELLED"));
    return new Promise(function (resolve) { resolve(run()); }).catch(function (error) {
      throw ours.has(error) ? error : fail(fallback || "APP_INTERNAL");
    });
  }
  function need(ok, what) {
    if (CAPS && !ok) throw fail("APP_CAPABILITY_DENIED", "this app did not declare " + what + " in APP.md");
  }
  function callTool(name, args, ms, meta, handle) {
    var params = { name: name, arguments: args };
    if (meta) params._meta = meta;
    return request("tools/call", params, ms, handle).then(function (result) {
      if (!isObject(result)) throw fail("APP_INTERNAL", "the host returned a malformed result");
      if (result.isError === true) throw fromEnvelope(isObject(result.structuredContent) ? result.structuredContent.error : null);
      var content = result.structuredContent;
      if (!content || typeof content !== "object") throw fail("APP_INTERNAL", "the host returned no structured result");
      return content;
    });
  }

  // Data and actions: at most POOL calls in flight, the rest wait in order.
  var active = 0, queue = [];
  function pooled(run) {
    return ready().then(function () {
      return new Promise(function (resolve, reject) {
        queue.push({ run: run, resolve: resolve, reject: reject });
        pump();
      });
    });
  }
  function pump() {
    while (active < POOL && queue.length) {
      var job = queue.shift();
      active++;
      Promise.resolve().then(job.run).then(job.resolve, job.reject).then(function () { active--; pump(); });
    }
  }
  function mcpName(text) { return text.replace(/-/g, "_"); }
  function idOf(kind, text) {
    if (typeof text !== "string" || !/^[A-Za-z_][A-Za-z0-9_-]{0,63}$/.test(text) || /[_-]{2}/.test(text)) throw fail("APP_INPUT_INVALID", kind + " must be a declared " + kind + " id");
    return mcpName(text);
  }
  function rowId(id) {
    if (typeof id !== "string" && !Number.isSafeInteger(id)) throw fail("APP_INPUT_INVALID", "the row id must be a string or an integer");
    return id;
  }
  function key(options) {
    var given = isObject(options) ? options.idempotencyKey : undefined;
    if (given === undefined) return uuid();
    if (typeof given !== "string" || !given || given.length > 200) throw fail("APP_INPUT_INVALID", "options.idempotencyKey must be a string of 1 to 200 characters");
    return given;
  }
  function version(options) {
    var value = isObject(options) ? options.expectedVersion : undefined;
    if (!Number.isSafeInteger(value) || value < 1) throw fail("APP_INPUT_INVALID", "options.expectedVersion (the row's _sasha_version) is required");
    return value;
  }
  function object(value, what) {
    if (value === undefined) return {};
    if (!isObject(value)) throw fail("APP_INPUT_INVALID", what + " must be an object");
    return value;
  }
  function table(operation, writes, args) {
    return function (tableName) {
      var rest = Array.prototype.slice.call(arguments, 1);
      return attempt(function () {
        need(CAPS && (CAPS.data === "read-write" || (!writes && CAPS.data === "read")), writes ? "data: read-write" : "data");
        var tool = "app__" + mcpName(String(APP.id)) + "__" + idOf("table", tableName) + "__" + operation;
        var input = args.apply(null, rest);
        return pooled(function () { return callTool(tool, input, CALL_MS); });
      });
    };
  }
  var data = {
    list: table("list", false, function (query) { return object(query, "query"); }),
    get: table("get", false, function (id) { return { id: rowId(id) }; }),
    aggregate: table("aggregate", false, function (aggregation) { return object(aggregation, "aggregation"); }),
    create: table("create", true, function (values, options) {
      return { values: object(values, "values"), idempotencyKey: key(options) };
    }),
    update: table("update", true, function (id, changes, options) {
      return { id: rowId(id), changes: object(changes, "changes"), expectedVersion: version(options), idempotencyKey: key(options) };
    }),
    delete: table("delete", true, function (id, options) {
      return { id: rowId(id), expectedVersion: version(options), idempotencyKey: key(options) };
    }),
    // Whether this person may run `operation` on `tableName` here: the host
    // lists only the tools it lets this view call (a `write: manage` table
    // has no write tools for someone who does not manage the app).
    allows: function (tableName, operation) {
      return attempt(function () {
        if (["list", "get", "aggregate", "create", "update", "delete"].indexOf(operation) < 0) throw fail("APP_INPUT_INVALID", "operation must be list, get, aggregate, create, update or delete");
        var tool = "app__" + mcpName(String(APP.id)) + "__" + idOf("table", tableName) + "__" + operation;
        return pooled(function () { return request("tools/list", {}, CALL_MS); }).then(function (result) {
          var tools = isObject(result) && Array.isArray(result.tools) ? result.tools : [];
          return tools.some(function (t) { return isObject(t) && t.name === tool; });
        });
      });
    },
  };
  var actions = {
    call: function (actionId, input, options) {
      return attempt(function () {
        var tool = "app__" + mcpName(String(APP.id)) + "__" + idOf("action", actionId);
        var meta = { "sasha/idempotencyKey": key(options) };
        var args = object(input, "input");
        return pooled(function () { return callTool(tool, args, CALL_MS, meta); });
      });
    },
  };

  // Chat and upload: one at a time (APP_BUSY), beside the data pool.
  var busy = false, chat = null;
  var streamListeners = new Set(), resultListeners = new Set(), toolResultListeners = new Set(), lastToolResult = null;
  function exclusive(run) {
    if (busy) throw fail("APP_BUSY", "another chat or upload is in progress");
    busy = true;
    return ready().then(run).finally(function () { busy = false; });
  }
  function listen(listeners, callback) {
    if (typeof callback !== "function") throw new TypeError("the callback must be a function");
    listeners.add(callback);
    return function () { listeners.delete(callback); };
  }
  function emit(listeners, args) {
    listeners.forEach(function (callback) {
      try { callback.apply(null, args); } catch (error) { W.setTimeout(function () { throw error; }, 0); }
    });
  }
  var chatApi = {
    execute: function (prompt, options) {
      return attempt(function () {
        need(CAPS && CAPS.chat === true, "chat: true");
        if (typeof prompt !== "string" || !prompt.trim()) throw fail("APP_INPUT_INVALID", "the prompt must be non-empty text");
        var args = { prompt: prompt };
        if (isObject(options) && typeof options.newSession === "boolean") args.newSession = options.newSession;
        return exclusive(function () {
          var turn = { token: "sasha-chat-" + uuid(), id: 0 };
          chat = turn;
          return callTool("sasha__chat_execute", args, CHAT_IDLE_MS, { progressToken: turn.token }, turn).then(function (content) {
            if (chat === turn) chat = null;
            if (typeof content.text !== "string") throw fail("APP_CHAT_FAILED", "the chat returned no text");
            emit(streamListeners, [content.text, true]);
            emit(resultListeners, [content.text]);
            return content.text;
          }, function (error) {
            if (chat === turn) chat = null;
            throw error;
          });
        });
      });
    },
    onStream: function (callback) { return listen(streamListeners, callback); },
    onResult: function (callback) { return listen(resultListeners, callback); },
  };
  function base64(bytes) {
    var text = "";
    for (var i = 0; i < bytes.length; i += 32768) text += String.fromCharCode.apply(null, bytes.subarray(i, i + 32768));
    return W.btoa(text);
  }
  // The upload in flight, for its progress: {token, onProgress, total}.
  var uploading = null;
  function report(upload, phase, loaded) {
    if (!upload || typeof upload.onProgress !== "function") return;
    var total = upload.total;
    try { upload.onProgress({ phase: phase, loaded: typeof loaded === "number" ? loaded : total, total: total }); } catch (error) { W.setTimeout(function () { throw error; }, 0); }
  }
  var files = {
    // `options.onProgress({phase, loaded, total})`: "reading" as each file is
    // read (bytes so far), "uploading" once all are sent, "converting" when
    // Sasha has them and converts them to Markdown.
    upload: function (fileList, options) {
      return attempt(function () {
        need(CAPS && CAPS.files === true, "files: true");
        var list = Array.prototype.slice.call(fileList || []), total = 0;
        if (!list.length) throw fail("APP_INPUT_INVALID", "choose at least one file");
        if (list.length > MAX_FILES) throw fail("APP_RESOURCE_LIMIT", "upload at most 10 files at a time");
        list.forEach(function (file) {
          if (!file || typeof file.name !== "string" || typeof file.size !== "number" || typeof file.arrayBuffer !== "function") {
            throw fail("APP_INPUT_INVALID", "upload takes a FileList or an array of File objects");
          }
          total += file.size;
        });
        if (total > MAX_UPLOAD) throw fail("APP_RESOURCE_LIMIT", "upload at most 25 MiB in total");
        var upload = { token: "sasha-upload-" + uuid(), onProgress: isObject(options) ? options.onProgress : null, total: total };
        return exclusive(function () {
          var loaded = 0;
          uploading = upload;
          report(upload, "reading", 0);
          return Promise.all(list.map(function (file) {
            return file.arrayBuffer().then(function (buffer) {
              loaded += buffer.byteLength;
              report(upload, "reading", loaded);
              return { name: file.name, type: String(file.type || ""), size: file.size, dataBase64: base64(new Uint8Array(buffer)) };
            });
          })).then(function (encoded) {
            report(upload, "uploading");
            return callTool("sasha__files_upload", { files: encoded }, UPLOAD_MS, { progressToken: upload.token });
          }).finally(function () {
            if (uploading === upload) uploading = null;
          }).then(function (content) {
            var descriptors = Array.isArray(content) ? content : content.files;
            var usable = function (d) { return isObject(d) && typeof d.original === "string" && d.original !== "" && typeof d.converted === "string" && d.converted !== ""; };
            if (!Array.isArray(descriptors) || !descriptors.length || !descriptors.every(usable)) throw fail("APP_UPLOAD_FAILED", "the upload returned no usable documents");
            return descriptors.map(function (d) { return { original: d.original, converted: d.converted }; });
          });
        });
      }, "APP_UPLOAD_FAILED");
    },
  };

  Object.defineProperty(W, "Sasha", {
    value: Object.freeze({
      ready: ready,
      get connected() { return connected; },
      get capabilities() { return copy(hostCapabilities) || {}; },
      get hostContext() { return copy(hostContext) || {}; },
      data: Object.freeze(data),
      actions: Object.freeze(actions),
      chat: Object.freeze(chatApi),
      files: Object.freeze(files),
      onToolResult: function (callback) {
        var off = listen(toolResultListeners, callback);
        if (lastToolResult) emit(new Set([callback]), [copy(lastToolResult)]);
        return off;
      },
    }),
    enumerable: true,
  });
  // Initialize at once, so an app that never calls the facade still connects.
  ready().catch(function () { /* callers of ready() see the failure */ });
})();
