// Fetch wrappers for Studio's own `/api`, same-origin with the session cookie.
//
// Every failure becomes an `ApiError` carrying the closed envelope's fields
// (`code`, `message`, `retryable`, `diagnosticId`) and the HTTP status, so the
// page can show the server's own safe message and the id to quote.

export class ApiError extends Error {
  constructor({ status, code, message, retryable, diagnosticId, details }) {
    super(message);
    this.name = "ApiError";
    this.status = status;
    this.code = code;
    this.retryable = Boolean(retryable);
    this.diagnosticId = diagnosticId || "";
    this.details = details && typeof details === "object" ? details : null;
  }
}

async function request(method, path, body) {
  const init = {
    method,
    credentials: "same-origin",
    cache: "no-store",
    headers: { Accept: "application/json" },
  };
  if (body !== undefined) {
    init.headers["Content-Type"] = "application/json";
    init.body = JSON.stringify(body);
  }
  let response;
  try {
    response = await fetch(path, init);
  } catch {
    throw new ApiError({
      status: 0,
      code: "APP_NOT_READY",
      message: "Studio cannot be reached. Check your connection and try again.",
      retryable: true,
    });
  }
  if (response.status === 204) {
    return null;
  }
  let json = null;
  try {
    json = await response.json();
  } catch {
    json = null;
  }
  if (!response.ok) {
    const envelope = json && typeof json === "object" ? json : {};
    throw new ApiError({
      status: response.status,
      code: typeof envelope.code === "string" ? envelope.code : "APP_INTERNAL",
      message:
        typeof envelope.message === "string"
          ? envelope.message
          : `Studio answered ${response.status}.`,
      retryable: envelope.retryable,
      diagnosticId: typeof envelope.diagnosticId === "string" ? envelope.diagnosticId : "",
      details: envelope.details,
    });
  }
  return json;
}

const segment = encodeURIComponent;

/** `POST /api/auth/login`: sets the session cookie; answers the user. */
export function login(username, password) {
  return request("POST", "/api/auth/login", { username, password });
}

/** `POST /api/auth/logout`. */
export function logout() {
  return request("POST", "/api/auth/logout");
}

/** `GET /api/me`: `{id, username, role, scopes}`. */
export function me() {
  return request("GET", "/api/me");
}

/** `GET /api/apps`: `{apps, sandboxOrigin}`. */
export function listApps() {
  return request("GET", "/api/apps");
}

/**
 * `POST /api/apps` with `{app, name, description, withTable}` (admin and
 * staff): creates the app; answers `{app, status: {ok, revision, diagnostics}}`.
 */
export function createApp(values) {
  return request("POST", "/api/apps", values);
}

/** `GET /api/apps/:id/resource?revision=`: `{uri, mimeType, text, _meta}`. */
export function appResource(appId, revision) {
  return request(
    "GET",
    `/api/apps/${segment(appId)}/resource?revision=${segment(revision)}`,
  );
}

/** `GET /api/apps/:id/access`: `{grants: [{userId, username, access, grantedAt}]}`. */
export function listAccess(appId) {
  return request("GET", `/api/apps/${segment(appId)}/access`);
}

/** `PUT /api/apps/:id/access/:userId` with `{access}`. */
export function grantAccess(appId, userId, access) {
  return request("PUT", `/api/apps/${segment(appId)}/access/${segment(userId)}`, { access });
}

/** `DELETE /api/apps/:id/access/:userId`. */
export function revokeAccess(appId, userId) {
  return request("DELETE", `/api/apps/${segment(appId)}/access/${segment(userId)}`);
}

/**
 * `GET /api/apps/:id/recovery` (needs `manage`): the app's declared tables,
 * their fields and the data tools that reach them.
 */
export function recovery(appId) {
  return request("GET", `/api/apps/${segment(appId)}/recovery`);
}

/**
 * `GET /api/oauth/requests/:id`: a pending MCP client authorization request
 * (`{requestId, client: {id, name}, redirectUri, redirectHost, resource,
 * requestedScopes, offeredScopes: [{scope, description, requested}],
 * unavailableScopes, expiresAt}`). Unknown or expired is the hidden 404.
 */
export function oauthRequest(requestId) {
  return request("GET", `/api/oauth/requests/${segment(requestId)}`);
}

/** `POST /api/oauth/requests/:id/approve` with `{scopes}`: `{redirectTo}`. */
export function approveOAuthRequest(requestId, scopes) {
  return request("POST", `/api/oauth/requests/${segment(requestId)}/approve`, { scopes });
}

/** `POST /api/oauth/requests/:id/deny`: `{redirectTo}` (the client's error redirect). */
export function denyOAuthRequest(requestId) {
  return request("POST", `/api/oauth/requests/${segment(requestId)}/deny`, {});
}

/**
 * `GET /api/oauth/connections`: the signed-in user's connected clients,
 * `{connections: [{id, clientId, clientName, redirectHost, scopes, connectedAt, lastUsedAt}]}`.
 */
export function listConnections() {
  return request("GET", "/api/oauth/connections");
}

/** `DELETE /api/oauth/connections/:id`: every token of that connection stops working. */
export function revokeConnection(connectionId) {
  return request("DELETE", `/api/oauth/connections/${segment(connectionId)}`);
}

/**
 * `GET /api/apps/:id/revisions` (admin and staff with `manage` and
 * `apps:write`): `{app, revisions: [{revision, uri, recordedAt, user,
 * surface, summary, files, bytes, current}]}`, newest first.
 */
export function listRevisions(appId) {
  return request("GET", `/api/apps/${segment(appId)}/revisions`);
}

/**
 * `GET /api/apps/:id/revisions/:revision/diff?from=`: `{app, from, to,
 * files: [{path, change, fromVersion, toVersion, diff?, binary?, truncated?}], truncated}`.
 */
export function diffRevisions(appId, from, to) {
  return request(
    "GET",
    `/api/apps/${segment(appId)}/revisions/${segment(to)}/diff?from=${segment(from)}`,
  );
}

/**
 * `POST /api/apps/:id/revert` with `{revision, expectedRevision}`:
 * `{app, revision, previousRevision, status: {ok, revision, diagnostics}}`.
 */
export function revertApp(appId, revision, expectedRevision) {
  return request("POST", `/api/apps/${segment(appId)}/revert`, { revision, expectedRevision });
}
