// What the Studio page states that Rust decides, generated from Rust
// (sasha_contract::browser::studio_module): a test fails when this file
// differs, and SASHA_REGENERATE=1 cargo test -p sasha-contract --test
// browser_constants rewrites it. Do not edit it by hand.

/** An app id: lowercase kebab-case starting with a letter (sasha_contract::ids). */
export const APP_ID_PATTERN = /^[a-z][a-z0-9]*(-[a-z0-9]+)*$/;
/** Most characters of an app id. */
export const APP_ID_MAX_CHARS = 60;

/** Whether `text` is an app id. */
export function isAppId(text) {
  return typeof text === "string" && text.length <= APP_ID_MAX_CHARS && APP_ID_PATTERN.test(text);
}

/** An app's opener tool is this prefix and the app id with `_` for `-`. */
export const OPENER_PREFIX = "open_app__";
/** An app's table and action tools start with this prefix and the encoded app id. */
export const APP_TOOL_PREFIX = "app__";
/** The open app's chat tool. */
export const CHAT_TOOL = "sasha__chat_execute";
/** The open app's upload tool. */
export const UPLOAD_TOOL = "sasha__files_upload";

/** The largest JSON-RPC message relayed, as UTF-8 bytes of its JSON text. */
export const MAX_MESSAGE_BYTES = 4 * 1024 * 1024;
/** The largest `tools/call` of the upload tool: its documents as base64 and the JSON around them. */
export const MAX_UPLOAD_MESSAGE_BYTES = 36 * 1024 * 1024;

/** Both app frames' sandbox flags (the Studio's outer frame and the proxy's inner one). */
export const SANDBOX_FLAGS = "allow-scripts allow-same-origin allow-forms";
/** The least height of an app's frame, in CSS pixels. */
export const MIN_FRAME_HEIGHT = 240;
/** The most height of an inline app frame, in CSS pixels. */
export const MAX_FRAME_HEIGHT = 1200;
/** The most height of an app frame shown in full height (display mode fullscreen), in CSS pixels. */
export const MAX_FULL_FRAME_HEIGHT = 16000;

/** The scopes a credential may hold. */
export const SCOPES = Object.freeze({
  CHAT_USE: "chat:use",
  APPS_INVOKE: "apps:invoke",
  APPS_WRITE: "apps:write",
  APPS_AUTHOR: "apps:author",
});
/** A user's roles. */
export const ROLES = Object.freeze({
  ADMIN: "admin",
  STAFF: "staff",
  MEMBER: "member",
});
/** A user's grant on an app; manage covers use. */
export const ACCESS = Object.freeze({
  USE: "use",
  MANAGE: "manage",
});
/** Who starts a data change and through what, as its audit entry records it. */
export const INITIATORS = Object.freeze(["app-view","recovery-view","assistant","mcp-client","automation","import","undo","migration"]);
