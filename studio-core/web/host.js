// The MCP Apps host (protocol 2026-01-26) for one open app in the Studio page.
//
// `createHost` frames the sandbox proxy (`<sandboxOrigin>/app-sandbox`), hands
// it the app's exact resource once the proxy says it is ready, and then speaks
// JSON-RPC with the app's view through it. It imports only the constants Rust
// decides (`vocabulary.js`, generated), and every effect it has on the world
// is an option, so tests can drive it.
//
// What it guarantees:
// - Only messages whose `source` is the pinned outer frame's window and whose
//   `origin` is exactly the sandbox origin are read; everything it posts names
//   the sandbox origin as target, never "*". Messages are re-parsed from their
//   JSON text (plain JSON only, at most MAX_MESSAGE_BYTES — MAX_UPLOAD_MESSAGE_BYTES
//   for a call of the upload tool — at most
//   MAX_MESSAGES_PER_SECOND); anything malformed is dropped without an answer.
// - Nothing reaches the view before `ui/notifications/initialized` except the
//   answer to its one `ui/initialize`; requests that arrive earlier wait.
//   Initialization that has not finished after INIT_TIMEOUT_MS fails visibly
//   (`onError`) and the frame is removed.
// - A `tools/call` goes to Studio's `/mcp` with the user's session cookie and
//   `Sasha-App: <app id>` (and, for a draft's preview, `Sasha-Preview:
//   <previewId>` on every request, tools/list included), and only for a tool the gateway listed for this app
//   with "app" in its visibility and a name of this app; anything else is
//   refused here (-32000) and never sent. The view's own `tools/list` is
//   answered from that same list: what it may call, for this person.
// - A ready view is pinged every WATCHDOG_INTERVAL_MS; one that does not answer
//   within WATCHDOG_TIMEOUT_MS is hung (a busy loop): it fails visibly
//   (`onError`, APP_TIMEOUT) and the frame is removed.
// - Responses from the view are accepted only for ids this host issued, once.
// - `close()` stops new work at once (later requests get no answer, late
//   results are dropped), asks the view `ui/resource-teardown`, waits for the
//   answer or TEARDOWN_TIMEOUT_MS, then aborts in-flight calls and removes the
//   frame.

import {
  APP_TOOL_PREFIX,
  CHAT_TOOL,
  MAX_FRAME_HEIGHT,
  MAX_FULL_FRAME_HEIGHT,
  MAX_MESSAGE_BYTES,
  MAX_UPLOAD_MESSAGE_BYTES,
  MIN_FRAME_HEIGHT,
  OPENER_PREFIX,
  SANDBOX_FLAGS,
  UPLOAD_TOOL,
} from "./vocabulary.js";

export const APPS_PROTOCOL_VERSION = "2026-01-26";
export const MCP_PROTOCOL_VERSION = "2026-07-28";
export const INIT_TIMEOUT_MS = 15_000;
export const TEARDOWN_TIMEOUT_MS = 2_000;
/** A ready view is pinged this often; one that does not answer a ping within
 * WATCHDOG_TIMEOUT_MS is hung (a busy loop): it fails visibly and is removed. */
export const WATCHDOG_INTERVAL_MS = 5_000;
export const WATCHDOG_TIMEOUT_MS = 5_000;
/** Messages read from the frame per second; the rest are dropped. */
export const MAX_MESSAGES_PER_SECOND = 200;
/** Tool calls forwarded at once for one view. */
export const MAX_CALLS_IN_FLIGHT = 16;
/** Requests held while the view initializes; more are dropped. */
const MAX_HELD_REQUESTS = 32;
const MAX_ID_LENGTH = 200;
export const RESOURCE_MIME_TYPE = "text/html;profile=mcp-app";
/** The refusals of a call that can mean the person lost access to the app
 * (a revoked grant, a withdrawn or deleted app): the host asks `onAccessLost`
 * to look again. */
const ACCESS_LOST_CODES = new Set(["APP_ACTION_UNAVAILABLE", "APP_ACCESS_DENIED", "APP_NOT_FOUND"]);
/** Platform tools an app reaches only one at a time (the spec's single flight). */
const SINGLE_FLIGHT_TOOLS = new Set([CHAT_TOOL, UPLOAD_TOOL]);
/** The keys of the view's own `_meta` a tool call carries to the gateway. */
const FORWARDED_META_KEYS = ["sasha/idempotencyKey", "progressToken"];
const CLIENT_INFO = { name: "sasha-studio", version: "1" };

/** An app id as it appears in tool names (`-` becomes `_`). */
export function encodedAppId(appId) {
  return appId.replace(/-/g, "_");
}

/**
 * Whether a tool name belongs to `appId`: its opener, its table and action
 * tools, or the platform's app-only chat and upload tools (which the gateway
 * binds to the app named in `Sasha-App`).
 */
export function toolBelongsToApp(name, appId) {
  if (name === CHAT_TOOL || name === UPLOAD_TOOL) {
    return true;
  }
  const encoded = encodedAppId(appId);
  if (name === `${OPENER_PREFIX}${encoded}`) {
    return true;
  }
  if (!name.startsWith(APP_TOOL_PREFIX)) {
    return false;
  }
  const parts = name.slice(APP_TOOL_PREFIX.length).split("__");
  return parts.length >= 2 && parts[0] === encoded && parts.slice(1).every((part) => part !== "");
}

/**
 * Whether a listed tool may be called by the app's view: it belongs to the app
 * and its `_meta.ui.visibility` includes "app" (absent means the spec's
 * default, `["model", "app"]`; anything else that is not such an array, `[]`
 * included, means no).
 */
export function toolCallableByApp(tool, appId) {
  if (!isPlainObject(tool) || typeof tool.name !== "string" || !toolBelongsToApp(tool.name, appId)) {
    return false;
  }
  const ui = isPlainObject(tool._meta) ? tool._meta.ui : undefined;
  if (ui === undefined) {
    return true;
  }
  if (!isPlainObject(ui)) {
    return false;
  }
  if (ui.visibility === undefined) {
    return true;
  }
  return Array.isArray(ui.visibility) && ui.visibility.includes("app");
}

/**
 * A reported height clamped to MIN_FRAME_HEIGHT–`max` px (the spec's inline
 * MAX_FRAME_HEIGHT unless the view is shown in full height); `null` for
 * anything not a number.
 */
export function clampHeight(height, max = MAX_FRAME_HEIGHT) {
  if (typeof height !== "number" || !Number.isFinite(height)) {
    return null;
  }
  return Math.round(Math.min(max, Math.max(MIN_FRAME_HEIGHT, height)));
}

/** Whether `url` may be opened for a view: external https only. */
export function linkAllowed(url, refusedOrigins = []) {
  if (typeof url !== "string" || url.length > 8192) {
    return false;
  }
  let parsed;
  try {
    parsed = new URL(url);
  } catch {
    return false;
  }
  return (
    parsed.protocol === "https:" &&
    parsed.username === "" &&
    parsed.password === "" &&
    !refusedOrigins.includes(parsed.origin)
  );
}

/** The standardized MCP Apps style variables for Studio's light or dark theme. */
export function styleVariables(theme) {
  const dark = theme === "dark";
  return {
    "--color-background-primary": dark ? "#1f1f1d" : "#ffffff",
    "--color-background-secondary": dark ? "#171716" : "#f4f4f0",
    "--color-background-tertiary": dark ? "#2a2a27" : "#ebe9e3",
    "--color-background-danger": dark ? "#3a1c1c" : "#fbeaea",
    "--color-background-success": dark ? "#17301f" : "#e8f3ec",
    "--color-text-primary": dark ? "#f1efe9" : "#1c1c1c",
    "--color-text-secondary": dark ? "#b5b2aa" : "#6b6b6b",
    "--color-text-danger": dark ? "#f08a8a" : "#b52020",
    "--color-text-success": dark ? "#7fcf9b" : "#1a6640",
    "--color-text-info": dark ? "#8fb4ec" : "#1a4a8a",
    "--color-border-primary": dark ? "#3b3a36" : "#d4d0c8",
    "--color-ring-primary": dark ? "#8fb4ec" : "#1a4a8a",
    "--font-sans": 'system-ui, -apple-system, "Segoe UI", Roboto, sans-serif',
    "--font-mono": 'ui-monospace, "SFMono-Regular", Menlo, Consolas, monospace',
    "--border-radius-sm": "4px",
    "--border-radius-md": "6px",
  };
}

/**
 * What the host context says of a view shown in full height: Studio's app
 * pane, where the frame takes the view's whole content height within the
 * page (up to MAX_FULL_FRAME_HEIGHT), so the page scrolls and the view never
 * does. The spec's 240–1200 px clamp is for an inline view's reported
 * height; a full-height view is `fullscreen`, the one other display mode.
 */
export const FULL_HEIGHT_CONTEXT = Object.freeze({
  containerDimensions: Object.freeze({ maxHeight: MAX_FULL_FRAME_HEIGHT }),
  displayMode: "fullscreen",
  availableDisplayModes: Object.freeze(["fullscreen"]),
});

/** The host context Studio gives a view, from the browser it runs in. */
export function defaultHostContext(win = globalThis) {
  const media = (query) => Boolean(win.matchMedia && win.matchMedia(query).matches);
  const theme = media("(prefers-color-scheme: dark)") ? "dark" : "light";
  let timeZone = "UTC";
  try {
    timeZone = Intl.DateTimeFormat().resolvedOptions().timeZone || "UTC";
  } catch {
    // keep UTC
  }
  const navigator = win.navigator || {};
  return {
    theme,
    styles: { variables: styleVariables(theme) },
    locale: navigator.language || "en",
    timeZone,
    containerDimensions: { maxHeight: MAX_FRAME_HEIGHT },
    displayMode: "inline",
    availableDisplayModes: ["inline"],
    platform: "web",
    deviceCapabilities: {
      touch: media("(pointer: coarse)") || (navigator.maxTouchPoints || 0) > 0,
      hover: media("(hover: hover)"),
    },
    safeAreaInsets: { top: 0, right: 0, bottom: 0, left: 0 },
  };
}

function isPlainObject(value) {
  if (value === null || typeof value !== "object" || Array.isArray(value)) {
    return false;
  }
  const proto = Object.getPrototypeOf(value);
  return proto === null || Object.getPrototypeOf(proto) === null;
}

function isId(value) {
  return (
    (typeof value === "string" && value.length > 0 && value.length <= MAX_ID_LENGTH) ||
    Number.isSafeInteger(value)
  );
}

/** `data` as plain JSON re-parsed from its text, or null when it may not be read. */
function plainJson(data) {
  if (!isPlainObject(data)) {
    return null;
  }
  let text;
  try {
    text = JSON.stringify(data);
  } catch {
    return null;
  }
  const upload =
    data.method === "tools/call" && isPlainObject(data.params) && data.params.name === UPLOAD_TOOL;
  const limit = upload ? MAX_UPLOAD_MESSAGE_BYTES : MAX_MESSAGE_BYTES;
  if (typeof text !== "string" || text.length > limit) {
    return null;
  }
  if (text.length * 3 > limit && new TextEncoder().encode(text).length > limit) {
    return null;
  }
  const message = JSON.parse(text);
  return isPlainObject(message) && message.jsonrpc === "2.0" ? message : null;
}

function randomUuid() {
  if (globalThis.crypto && typeof globalThis.crypto.randomUUID === "function") {
    return globalThis.crypto.randomUUID();
  }
  const bytes = new Uint8Array(16);
  globalThis.crypto.getRandomValues(bytes);
  bytes[6] = (bytes[6] & 0x0f) | 0x40;
  bytes[8] = (bytes[8] & 0x3f) | 0x80;
  const hex = Array.from(bytes, (byte) => byte.toString(16).padStart(2, "0")).join("");
  return `${hex.slice(0, 8)}-${hex.slice(8, 12)}-${hex.slice(12, 16)}-${hex.slice(16, 20)}-${hex.slice(20)}`;
}

/** A failure of the host itself, as the closed envelope. */
export class HostFailure extends Error {
  constructor(code, message, { retryable = false, diagnosticId = randomUuid(), details } = {}) {
    super(message);
    this.name = "HostFailure";
    this.envelope = { code, message, retryable, diagnosticId };
    if (details !== undefined) {
      this.envelope.details = details;
    }
  }
}

/** A failure envelope from an HTTP error body, or a sanitised one. */
function failureFromBody(status, body) {
  if (
    isPlainObject(body) &&
    typeof body.code === "string" &&
    /^APP_[A-Z_]{1,60}$/.test(body.code) &&
    typeof body.message === "string"
  ) {
    return new HostFailure(body.code, body.message.slice(0, 500), {
      retryable: Boolean(body.retryable),
      diagnosticId: typeof body.diagnosticId === "string" ? body.diagnosticId : randomUuid(),
    });
  }
  return new HostFailure("APP_INTERNAL", `the MCP endpoint answered ${status}`, {
    retryable: status >= 500,
  });
}

/**
 * Parses one server-sent event block into its JSON `data`, or null.
 * Lines are already split on LF; a trailing CR is tolerated.
 */
function eventData(block) {
  const data = [];
  for (const raw of block.split("\n")) {
    const line = raw.endsWith("\r") ? raw.slice(0, -1) : raw;
    if (line.startsWith("data:")) {
      data.push(line.slice(line.startsWith("data: ") ? 6 : 5));
    }
  }
  if (data.length === 0) {
    return null;
  }
  try {
    const message = JSON.parse(data.join("\n"));
    return isPlainObject(message) ? message : null;
  } catch {
    return null;
  }
}

/**
 * Reads an MCP event stream until the response to `id`; every notification on
 * the way goes to `onNotification`.
 */
async function readEventStream(response, id, onNotification) {
  if (!response.body || typeof response.body.getReader !== "function") {
    const text = await response.text();
    return scanEvents(`${text}\n\n`, id, onNotification).response;
  }
  const reader = response.body.getReader();
  const decoder = new TextDecoder();
  let buffer = "";
  try {
    for (;;) {
      const { value, done } = await reader.read();
      buffer += done ? decoder.decode() : decoder.decode(value, { stream: true });
      if (done) {
        buffer += "\n\n";
      }
      const scanned = scanEvents(buffer, id, onNotification);
      if (scanned.response) {
        return scanned.response;
      }
      buffer = scanned.rest;
      if (buffer.length > MAX_MESSAGE_BYTES) {
        throw new HostFailure("APP_INTERNAL", "the MCP answer is too large");
      }
      if (done) {
        return null;
      }
    }
  } finally {
    reader.cancel().catch(() => {});
  }
}

function scanEvents(buffer, id, onNotification) {
  const normalized = buffer.replace(/\r\n/g, "\n");
  let rest = normalized;
  for (;;) {
    const end = rest.indexOf("\n\n");
    if (end === -1) {
      return { response: null, rest };
    }
    const message = eventData(rest.slice(0, end));
    rest = rest.slice(end + 2);
    if (message === null) {
      continue;
    }
    if (typeof message.method === "string") {
      if (!Object.prototype.hasOwnProperty.call(message, "id")) {
        onNotification(message);
      }
      continue;
    }
    if (message.id === id) {
      return { response: message, rest };
    }
  }
}

/**
 * Creates the host for one open app and starts loading it.
 *
 * Options:
 * - `iframeParent` (Element): where the outer frame goes.
 * - `sandboxOrigin` (string): the exact sandbox origin (from `GET /api/apps`).
 * - `app` ({id, revision, name}): the open app.
 * - `resource` ({mimeType, text}): its exact resource (`GET /api/apps/:id/resource`).
 * - `fetch`: used for `/mcp` (default: the global fetch).
 * - `onError(envelope)`: a failure the user must see (initialization).
 * - `onAccessLost(envelope)`: a call was refused in a way that can mean the
 *   person no longer has this app (see ACCESS_LOST_CODES, or a protocol
 *   error for a tool this host had listed).
 * - `onStateChange(state)`: "loading" → "initializing" → "ready" → "closing"
 *   → "closed", or "failed".
 * - `onUnauthenticated()`: the gateway answered 401 (the session ended).
 * - `now()`, `setTimeout`, `clearTimeout`: the clock (defaults: the real one).
 * - `hostVersion`, `hostContext` (overrides of `defaultHostContext()`).
 * - `confirm(text)`, `openWindow(url)`: for `ui/open-link`.
 * - `logger`: where `notifications/message` goes (default: console).
 * - `window`: the Studio window (default: globalThis), `mcpUrl` (default "/mcp").
 * - `fullHeight` (boolean): show the view in full height (FULL_HEIGHT_CONTEXT),
 *   the frame as tall as its content, for the app pane; otherwise inline.
 * - `preview` (string): a draft's `previewId`. Every `/mcp` request then also
 *   carries `Sasha-Preview: <previewId>`, so the gateway serves the draft's
 *   tools over a scratch copy of the data; without it no request carries it.
 *
 * Returns `{iframe, ready, close, updateHostContext, state}`; `ready` resolves
 * when the view is initialized and rejects with a HostFailure otherwise.
 */
export function createHost(options) {
  const win = options.window || globalThis;
  const fetchImpl = options.fetch || ((...args) => globalThis.fetch(...args));
  const onError = options.onError || (() => {});
  const onAccessLost = options.onAccessLost || (() => {});
  const onStateChange = options.onStateChange || (() => {});
  const onUnauthenticated = options.onUnauthenticated || (() => {});
  const now = options.now || (() => Date.now());
  const setTimer = options.setTimeout || ((fn, ms) => globalThis.setTimeout(fn, ms));
  const clearTimer = options.clearTimeout || ((handle) => globalThis.clearTimeout(handle));
  const confirmLink = options.confirm || ((text) => win.confirm(text));
  const openWindow = options.openWindow || ((url) => win.open(url, "_blank", "noopener,noreferrer"));
  const logger = options.logger || console;
  const mcpUrl = options.mcpUrl || "/mcp";
  const hostVersion = String(options.hostVersion || "0");
  const preview = typeof options.preview === "string" && options.preview !== "" ? options.preview : null;
  const { app, resource, iframeParent } = options;
  const sandboxOrigin = String(options.sandboxOrigin || "");

  const fullHeight = options.fullHeight === true;
  const maxHeight = fullHeight ? MAX_FULL_FRAME_HEIGHT : MAX_FRAME_HEIGHT;
  let hostContext = {
    ...defaultHostContext(win),
    ...(fullHeight ? FULL_HEIGHT_CONTEXT : {}),
    ...(options.hostContext || {}),
  };
  /**
   * "loading" (waiting for the proxy), "initializing" (resource sent, waiting
   * for the view's `initialized`), "ready", "closing" (teardown asked, no new
   * work), "closed", or "failed" (initialization did not finish).
   */
  let state = "loading";
  /** The outer frame's WindowProxy, pinned when the frame is attached. */
  let frameWindow = null;
  /** Whether the view's one `ui/initialize` has been answered. */
  let initializeAnswered = false;
  /** Requests from the view that arrived before `initialized`, in order. */
  const held = [];
  /** Ids of the view's requests still being served, so a reused id is dropped. */
  const servingIds = new Set();
  /** Our requests to the view, by id, awaiting its response. */
  const awaitingView = new Map();
  let nextViewRequestId = 1;
  let nextGatewayId = 1;
  /** Abort controllers of the `/mcp` requests in flight. */
  const inFlight = new Set();
  /** Single-flight tools currently running. */
  const runningSingleFlight = new Set();
  /** The app-callable tool names, loaded once (again after a failure). */
  let toolsPromise = null;
  let rateWindowStart = -Infinity;
  let rateCount = 0;
  let lastLinkAt = -Infinity;
  let initTimer = null;
  let watchdogTimer = null;
  let closing = null;

  let resolveReady;
  let rejectReady;
  let readySettled = false;
  const ready = new Promise((resolve, reject) => {
    resolveReady = resolve;
    rejectReady = reject;
  });
  ready.catch(() => {});

  function setState(next) {
    state = next;
    try {
      onStateChange(next);
    } catch (error) {
      logger.error("[sasha host] onStateChange failed", error);
    }
  }

  function settleReady(failure) {
    if (readySettled) {
      return;
    }
    readySettled = true;
    if (failure) {
      rejectReady(failure);
    } else {
      resolveReady();
    }
  }

  function post(message) {
    if (frameWindow === null) {
      return;
    }
    try {
      frameWindow.postMessage(message, sandboxOrigin);
    } catch (error) {
      logger.warn("[sasha host] cannot post to the app frame", error);
    }
  }

  /** Answers a view request, only while the view is live and initialized. */
  function respond(id, result) {
    servingIds.delete(idKey(id));
    if (state === "ready") {
      post({ jsonrpc: "2.0", id, result });
    }
  }

  function respondError(id, code, message, data) {
    servingIds.delete(idKey(id));
    if (state === "ready") {
      const error = { code, message };
      if (data !== undefined) {
        error.data = data;
      }
      post({ jsonrpc: "2.0", id, error });
    }
  }

  function refuse(id, failure) {
    respondError(id, -32000, failure.message, failure.envelope);
  }

  function notifyView(method, params) {
    if (state === "ready") {
      post({ jsonrpc: "2.0", method, params });
    }
  }

  function idKey(id) {
    return `${typeof id}:${id}`;
  }

  function withinRate() {
    const at = now();
    if (at - rateWindowStart >= 1000) {
      rateWindowStart = at;
      rateCount = 0;
    }
    rateCount += 1;
    if (rateCount === MAX_MESSAGES_PER_SECOND + 1) {
      logger.warn(`[app ${app.id}] too many messages; dropping the rest of this second`);
    }
    return rateCount <= MAX_MESSAGES_PER_SECOND;
  }

  function onMessage(event) {
    if (frameWindow === null || event.source !== frameWindow || event.origin !== sandboxOrigin) {
      return;
    }
    if (state === "closed" || state === "failed" || !withinRate()) {
      return;
    }
    const message = plainJson(event.data);
    if (message === null) {
      return;
    }
    const hasId = Object.prototype.hasOwnProperty.call(message, "id");
    if (typeof message.method !== "string") {
      // A response: only to a request this host issued, and only once.
      const hasResult = Object.prototype.hasOwnProperty.call(message, "result");
      const hasError = Object.prototype.hasOwnProperty.call(message, "error");
      if (!hasId || !isId(message.id) || hasResult === hasError) {
        return;
      }
      const waiting = awaitingView.get(message.id);
      if (waiting) {
        awaitingView.delete(message.id);
        waiting(message);
      }
      return;
    }
    if (hasId && !isId(message.id)) {
      return;
    }
    if (message.params !== undefined && !isPlainObject(message.params)) {
      return;
    }
    const params = message.params || {};
    if (message.method.startsWith("ui/notifications/sandbox-")) {
      // The proxy's control plane; the proxy never relays the view's.
      if (message.method === "ui/notifications/sandbox-proxy-ready" && !hasId && state === "loading") {
        setState("initializing");
        post({
          jsonrpc: "2.0",
          method: "ui/notifications/sandbox-resource-ready",
          params: { html: resource.text },
        });
      }
      return;
    }
    if (state === "loading" || state === "closing") {
      return;
    }
    if (hasId) {
      const key = idKey(message.id);
      if (servingIds.has(key)) {
        return;
      }
      servingIds.add(key);
      request(message.id, message.method, params);
    } else {
      notification(message.method, params);
    }
  }

  function request(id, method, params) {
    if (method === "ui/initialize") {
      servingIds.delete(idKey(id));
      if (initializeAnswered || state !== "initializing") {
        return;
      }
      initializeAnswered = true;
      // The one message the view gets before `initialized`.
      post({
        jsonrpc: "2.0",
        id,
        result: {
          protocolVersion: APPS_PROTOCOL_VERSION,
          hostInfo: { name: "Sasha Studio", version: hostVersion },
          hostCapabilities: { openLinks: {}, serverTools: {}, logging: {} },
          hostContext,
        },
      });
      return;
    }
    if (state !== "ready") {
      if (held.length < MAX_HELD_REQUESTS) {
        held.push([id, method, params]);
      } else {
        servingIds.delete(idKey(id));
      }
      return;
    }
    serve(id, method, params);
  }

  function serve(id, method, params) {
    switch (method) {
      case "ping":
        respond(id, {});
        return;
      case "tools/call":
        callTool(id, params);
        return;
      case "tools/list":
        listTools(id);
        return;
      case "ui/open-link":
        openLink(id, params);
        return;
      case "ui/request-display-mode":
        // The mode is the host's choice (the pane's): it answers the one it has.
        respond(id, { mode: hostContext.displayMode });
        return;
      default:
        respondError(id, -32601, `Method not found: ${method.slice(0, 100)}`);
    }
  }

  function notification(method, params) {
    switch (method) {
      case "ui/notifications/initialized":
        if (state === "initializing" && initializeAnswered) {
          clearTimer(initTimer);
          setState("ready");
          watch();
          settleReady();
          for (const [id, heldMethod, heldParams] of held.splice(0)) {
            serve(id, heldMethod, heldParams);
          }
        }
        return;
      case "ui/notifications/size-changed": {
        const height = clampHeight(params.height, maxHeight);
        if (height !== null && iframe.style.height !== `${height}px`) {
          iframe.style.height = `${height}px`;
        }
        return;
      }
      case "notifications/message":
        log(params);
        return;
      default:
        // Other notifications (request-teardown, list_changed, …) need nothing.
        return;
    }
  }

  function log(params) {
    const level = typeof params.level === "string" ? params.level : "info";
    let data = params.data;
    if (typeof data !== "string") {
      try {
        data = JSON.stringify(data);
      } catch {
        data = String(data);
      }
    }
    const text = `[app ${app.id}]${typeof params.logger === "string" ? ` ${params.logger.slice(0, 100)}:` : ""} ${String(data).slice(0, 4000)}`;
    if (level === "debug") {
      logger.debug(text);
    } else if (level === "info" || level === "notice") {
      logger.info(text);
    } else if (level === "warning") {
      logger.warn(text);
    } else {
      logger.error(text);
    }
  }

  function openLink(id, params) {
    const url = params.url;
    const refused = [win.location ? win.location.origin : "", sandboxOrigin];
    if (!linkAllowed(url, refused)) {
      refuse(id, new HostFailure("APP_INPUT_INVALID", "only external https links can be opened"));
      return;
    }
    const at = now();
    if (at - lastLinkAt < 1000) {
      refuse(id, new HostFailure("APP_BUSY", "one link at a time; try again in a moment", { retryable: true }));
      return;
    }
    lastLinkAt = at;
    const href = new URL(url).href;
    let allowed = false;
    try {
      allowed = Boolean(confirmLink(`${app.name || app.id} wants to open this link in a new tab:\n\n${href}`));
    } catch {
      allowed = false;
    }
    if (allowed) {
      openWindow(href);
      respond(id, {});
    } else {
      respond(id, { isError: true });
    }
  }

  /** Sends one JSON-RPC request to Studio's `/mcp`; answers its response. */
  async function mcpRequest(method, params, toolName, signal, onNotification) {
    const id = nextGatewayId++;
    const headers = {
      "Content-Type": "application/json",
      Accept: "application/json, text/event-stream",
      "MCP-Protocol-Version": MCP_PROTOCOL_VERSION,
      "Mcp-Method": method,
      "Sasha-App": app.id,
    };
    if (preview !== null) {
      headers["Sasha-Preview"] = preview;
    }
    if (toolName !== null) {
      headers["Mcp-Name"] = toolName;
    }
    const body = {
      jsonrpc: "2.0",
      id,
      method,
      params: {
        ...params,
        _meta: {
          ...(params._meta || {}),
          "io.modelcontextprotocol/protocolVersion": MCP_PROTOCOL_VERSION,
          "io.modelcontextprotocol/clientCapabilities": {},
          "io.modelcontextprotocol/clientInfo": CLIENT_INFO,
        },
      },
    };
    let response;
    try {
      response = await fetchImpl(mcpUrl, {
        method: "POST",
        credentials: "same-origin",
        cache: "no-store",
        headers,
        body: JSON.stringify(body),
        signal,
      });
    } catch (error) {
      if (signal && signal.aborted) {
        throw new HostFailure("APP_CANCELLED", "the app was closed");
      }
      throw new HostFailure("APP_NOT_READY", "Studio's MCP endpoint cannot be reached", { retryable: true });
    }
    const contentType = (response.headers.get("content-type") || "").toLowerCase();
    if (!response.ok) {
      if (response.status === 401) {
        onUnauthenticated();
      }
      let json = null;
      try {
        json = await response.json();
      } catch {
        json = null;
      }
      if (isPlainObject(json) && json.jsonrpc === "2.0" && isPlainObject(json.error)) {
        return json;
      }
      throw failureFromBody(response.status, json);
    }
    let reply = null;
    try {
      reply = contentType.startsWith("text/event-stream")
        ? await readEventStream(response, id, onNotification)
        : await response.json();
    } catch (error) {
      if (error instanceof HostFailure) {
        throw error;
      }
      if (signal && signal.aborted) {
        throw new HostFailure("APP_CANCELLED", "the app was closed");
      }
      throw new HostFailure("APP_INTERNAL", "the MCP answer could not be read");
    }
    if (!isPlainObject(reply) || reply.id !== id) {
      throw new HostFailure("APP_INTERNAL", "the MCP answer could not be read");
    }
    return reply;
  }

  /** The tools this view may call (by name), from the gateway's list for this app. */
  function callableTools() {
    if (toolsPromise === null) {
      toolsPromise = loadTools().catch((error) => {
        toolsPromise = null;
        throw error;
      });
    }
    return toolsPromise;
  }

  async function loadTools() {
    const names = new Map();
    let cursor;
    for (let page = 0; page < 20; page += 1) {
      const controller = new AbortController();
      inFlight.add(controller);
      let reply;
      try {
        reply = await mcpRequest("tools/list", cursor ? { cursor } : {}, null, controller.signal, () => {});
      } finally {
        inFlight.delete(controller);
      }
      if (reply.error || !isPlainObject(reply.result) || !Array.isArray(reply.result.tools)) {
        throw new HostFailure("APP_NOT_READY", "the app's tools could not be listed", { retryable: true });
      }
      for (const tool of reply.result.tools) {
        if (toolCallableByApp(tool, app.id)) {
          names.set(tool.name, tool);
        }
      }
      cursor = reply.result.nextCursor;
      if (typeof cursor !== "string" || cursor === "") {
        return names;
      }
    }
    return names;
  }

  /** The view's `tools/list`: every tool it may call, in one page. */
  async function listTools(id) {
    let callable;
    try {
      callable = await callableTools();
    } catch (error) {
      refuse(id, error instanceof HostFailure ? error : new HostFailure("APP_NOT_READY", "the app's tools could not be listed", { retryable: true }));
      return;
    }
    if (state === "ready") {
      respond(id, { tools: [...callable.values()] });
    }
  }

  async function callTool(id, params) {
    const name = params.name;
    if (typeof name !== "string" || name === "" || name.length > 200) {
      respondError(id, -32602, "tools/call needs a tool name");
      return;
    }
    const args = params.arguments === undefined ? {} : params.arguments;
    if (!isPlainObject(args)) {
      respondError(id, -32602, "tools/call arguments must be an object");
      return;
    }
    const meta = {};
    if (isPlainObject(params._meta)) {
      for (const key of FORWARDED_META_KEYS) {
        const value = params._meta[key];
        if ((typeof value === "string" && value.length <= MAX_ID_LENGTH) || Number.isSafeInteger(value)) {
          meta[key] = value;
        }
      }
    }
    if (!toolBelongsToApp(name, app.id)) {
      refuse(id, new HostFailure("APP_CAPABILITY_DENIED", "That is not something this app can do.", { details: { tool: name } }));
      return;
    }
    let callable;
    try {
      callable = await callableTools();
    } catch (error) {
      refuse(id, error instanceof HostFailure ? error : new HostFailure("APP_NOT_READY", "the app's tools could not be listed", { retryable: true }));
      return;
    }
    if (state !== "ready") {
      return;
    }
    if (!callable.has(name)) {
      refuse(id, new HostFailure("APP_CAPABILITY_DENIED", "That is not something this app may do here.", { details: { tool: name } }));
      return;
    }
    if (SINGLE_FLIGHT_TOOLS.has(name) && runningSingleFlight.size > 0) {
      // One chat turn or upload at a time per view; data calls keep flowing.
      refuse(id, new HostFailure("APP_BUSY", "another chat or upload is in progress", { retryable: true }));
      return;
    }
    if (inFlight.size >= MAX_CALLS_IN_FLIGHT) {
      refuse(id, new HostFailure("APP_BUSY", "the app has too many operations in progress", { retryable: true }));
      return;
    }
    const controller = new AbortController();
    inFlight.add(controller);
    if (SINGLE_FLIGHT_TOOLS.has(name)) {
      runningSingleFlight.add(name);
    }
    const progressToken = meta.progressToken;
    const onNotification = (message) => {
      if (
        message.method === "notifications/progress" &&
        progressToken !== undefined &&
        isPlainObject(message.params) &&
        message.params.progressToken === progressToken
      ) {
        notifyView("notifications/progress", message.params);
      }
    };
    try {
      const reply = await mcpRequest("tools/call", { name, arguments: args, _meta: meta }, name, controller.signal, onNotification);
      if (isPlainObject(reply.error)) {
        const code = Number.isSafeInteger(reply.error.code) ? reply.error.code : -32603;
        const message = typeof reply.error.message === "string" ? reply.error.message.slice(0, 500) : "the call failed";
        respondError(id, code, message, reply.error.data);
        // A tool this host listed that the gateway no longer knows: the app
        // may be gone for this person.
        queueMicrotask(() => onAccessLost({ code: "APP_NOT_FOUND", message }));
      } else {
        const result = isPlainObject(reply.result) ? reply.result : {};
        const refusal = result.isError === true && isPlainObject(result.structuredContent) && isPlainObject(result.structuredContent.error) ? result.structuredContent.error : null;
        respond(id, result);
        if (refusal && ACCESS_LOST_CODES.has(refusal.code)) {
          // The page checks whether the app is still the person's; if not it
          // closes the app and says so in a plain sentence.
          queueMicrotask(() => onAccessLost(refusal));
        }
      }
    } catch (error) {
      refuse(id, error instanceof HostFailure ? error : new HostFailure("APP_INTERNAL", "the call failed"));
    } finally {
      inFlight.delete(controller);
      runningSingleFlight.delete(name);
    }
  }

  /** Sends a request to the view and waits for its response or `timeoutMs`. */
  function askView(method, params, timeoutMs) {
    const id = nextViewRequestId++;
    return new Promise((resolve) => {
      const timer = setTimer(() => {
        awaitingView.delete(id);
        resolve(null);
      }, timeoutMs);
      awaitingView.set(id, (message) => {
        clearTimer(timer);
        resolve(message);
      });
      post({ jsonrpc: "2.0", id, method, params });
    });
  }

  /** The watchdog: pings the ready view; no answer in time fails the app. */
  function watch() {
    watchdogTimer = setTimer(async () => {
      if (state !== "ready") {
        return;
      }
      const answer = await askView("ping", {}, WATCHDOG_TIMEOUT_MS);
      if (state !== "ready") {
        return;
      }
      if (answer === null) {
        fail(new HostFailure("APP_TIMEOUT", "The app stopped responding and was closed.", { retryable: true }));
        return;
      }
      watch();
    }, WATCHDOG_INTERVAL_MS);
  }

  /** Removes the frame and everything attached to it; final `state`. */
  function finish(finalState) {
    win.removeEventListener("message", onMessage);
    clearTimer(initTimer);
    clearTimer(watchdogTimer);
    for (const controller of inFlight) {
      controller.abort();
    }
    inFlight.clear();
    held.length = 0;
    awaitingView.clear();
    servingIds.clear();
    frameWindow = null;
    iframe.remove();
    setState(finalState);
  }

  function fail(failure) {
    if (state === "closed" || state === "failed" || closing !== null) {
      return;
    }
    settleReady(failure);
    finish("failed");
    try {
      onError(failure.envelope);
    } catch (error) {
      logger.error("[sasha host] onError failed", error);
    }
  }

  /**
   * Closes the app: no new work from now on; a view that finished
   * initializing is asked `ui/resource-teardown` and given its answer or two
   * seconds; then the frame is removed. Safe to call more than once.
   */
  function close() {
    if (closing !== null) {
      return closing;
    }
    closing = (async () => {
      if (state === "closed" || state === "failed") {
        return;
      }
      const wasReady = state === "ready";
      clearTimer(initTimer);
      clearTimer(watchdogTimer);
      setState("closing");
      held.length = 0;
      settleReady(new HostFailure("APP_CANCELLED", "the app was closed"));
      if (wasReady) {
        await askView("ui/resource-teardown", {}, TEARDOWN_TIMEOUT_MS);
      }
      finish("closed");
    })();
    return closing;
  }

  /** Merges `partial` into the host context and tells a ready view. */
  function updateHostContext(partial) {
    hostContext = { ...hostContext, ...partial };
    notifyView("ui/notifications/host-context-changed", partial);
  }

  const iframe = win.document.createElement("iframe");
  iframe.setAttribute("sandbox", SANDBOX_FLAGS);
  iframe.setAttribute("allow", "");
  iframe.referrerPolicy = "origin";
  iframe.setAttribute("referrerpolicy", "origin");
  iframe.title = app.name ? `App: ${app.name}` : `App ${app.id}`;
  iframe.className = fullHeight ? "app-frame app-frame-full" : "app-frame";
  iframe.style.height = `${MIN_FRAME_HEIGHT}px`;

  let invalid = null;
  let sandboxUrl = "";
  try {
    if (new URL(sandboxOrigin).origin !== sandboxOrigin) {
      invalid = "the sandbox origin is not an origin";
    }
    sandboxUrl = `${sandboxOrigin}/app-sandbox`;
  } catch {
    invalid = "the sandbox origin is not an origin";
  }
  if (!resource || typeof resource.text !== "string") {
    invalid = "the app's resource has no document";
  } else if (resource.mimeType !== undefined && resource.mimeType !== RESOURCE_MIME_TYPE) {
    invalid = "the app's resource is not an MCP App";
  }
  if (invalid !== null) {
    state = "failed";
    const failure = new HostFailure("APP_NOT_READY", invalid);
    settleReady(failure);
    queueMicrotask(() => onError(failure.envelope));
    return {
      iframe,
      ready,
      close: () => Promise.resolve(),
      updateHostContext: () => {},
      get state() {
        return state;
      },
    };
  }

  // Listen before the frame exists: the proxy announces itself as soon as its
  // script runs.
  win.addEventListener("message", onMessage);
  iframe.src = sandboxUrl;
  iframeParent.appendChild(iframe);
  frameWindow = iframe.contentWindow;
  setState("loading");
  initTimer = setTimer(() => {
    if (state === "loading" || state === "initializing") {
      fail(new HostFailure("APP_TIMEOUT", "The app did not start within 15 seconds.", { retryable: true }));
    }
  }, INIT_TIMEOUT_MS);
  // Load the tool list now, so the first call does not wait for it.
  callableTools().catch(() => {});

  return {
    iframe,
    ready,
    close,
    updateHostContext,
    get state() {
      return state;
    },
  };
}
