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

/**
 * `GET /api/auth/providers`: `{sso: {name, start} | null, passwords}`, how
 * people sign in here (`passwords` false: only the break-glass admin may use one).
 */
export function providers() {
  return request("GET", "/api/auth/providers");
}

/** `POST /api/auth/logout`. */
export function logout() {
  return request("POST", "/api/auth/logout");
}

/** `GET /api/me`: `{id, username, role, scopes}`. */
export function me() {
  return request("GET", "/api/me");
}

/**
 * `GET /api/session`: `{user}` (as `me` answers) or `{user: null}` when the
 * page is not signed in, so an ordinary signed-out load is no 401 in the console.
 */
export function session() {
  return request("GET", "/api/session");
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

/**
 * `GET /api/users` (admin and staff): every user, by name, with `role`,
 * `status` (active, invited or disabled), `lastSignInAt` and
 * `invitationExpiresAt`.
 */
export function listUsers() {
  return request("GET", "/api/users");
}

/**
 * `GET /api/admin/replication` (admins): `{enabled}`, and with replication on
 * `{roles: {<role>: {mode, ok, databasesTotal, databases: [...]}}}`.
 */
export function replicationState() {
  return request("GET", "/api/admin/replication");
}

/**
 * `POST /api/users` (admins): `{user, invitation: {url, expiresAt}}`; `apps`
 * (`[{appId, access}]`) are theirs once they accept.
 */
export function inviteUser(username, role, apps = []) {
  return request("POST", "/api/users", { username, role, apps });
}

/** `POST /api/users/:username/password-reset` (admins): a one-time link, `{reset: {url, expiresAt}}`. */
export function resetPassword(username) {
  return request("POST", `/api/users/${segment(username)}/password-reset`);
}

/** `PATCH /api/users/:username` with `{role}` or `{status}` (admins): `{user, changed}`. */
export function changeUser(username, change) {
  return request("PATCH", `/api/users/${segment(username)}`, change);
}

/** `GET /api/scim/tokens` (admins): `{tokens: [{id, label, createdAt, lastUsedAt, revokedAt}], base}`. */
export function listScimTokens() {
  return request("GET", "/api/scim/tokens");
}

/** `POST /api/scim/tokens` (admins): `{secret, token, base}`; the secret is shown once. */
export function mintScimToken(label) {
  return request("POST", "/api/scim/tokens", { label });
}

/** `DELETE /api/scim/tokens/:id` (admins): `{revoked}`. */
export function revokeScimToken(id) {
  return request("DELETE", `/api/scim/tokens/${segment(String(id))}`);
}

/** `DELETE /api/users/:username` (admins): `{removed: {grantsRevoked, memberAppsOrphaned}}`. */
export function removeUser(username) {
  return request("DELETE", `/api/users/${segment(username)}`);
}

/** `POST /api/users/:username/invitation` (admins): a new link, `{invitation}`. */
export function renewInvitation(username) {
  return request("POST", `/api/users/${segment(username)}/invitation`);
}

/** `POST /api/invitation`: who an invitation or reset link is for, `{username, role, expiresAt, purpose}`. */
export function invitation(token) {
  return request("POST", "/api/invitation", { token });
}

/** `POST /api/invitation/accept`: sets the password and signs in; answers the user. */
export function acceptInvitation(token, password) {
  return request("POST", "/api/invitation/accept", { token, password });
}

/** `GET /api/tokens`: `{mcpUrl, scopes, defaultDays, maxDays, tokens}`, the caller's own. */
export function listTokens() {
  return request("GET", "/api/tokens");
}

/** `POST /api/tokens` with `{label, scopes, expiresInDays}`: `{secret, token}`, the secret once. */
export function createToken(label, scopes, expiresInDays) {
  return request("POST", "/api/tokens", { label, scopes, expiresInDays });
}

/** `DELETE /api/tokens/:id`. */
export function revokeToken(id) {
  return request("DELETE", `/api/tokens/${segment(String(id))}`);
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

/**
 * `GET /api/apps/:id/draft` (managers with `apps:write`): `{app, draft}`, the
 * app's one draft (`{previewId, baseRevision, liveRevision, stale, status,
 * createdBy, createdAt, updatedAt, changes, review}`). Without a draft: a 404
 * whose `details.cause` is "DRAFT_NOT_FOUND" (see `isNoDraft`).
 */
export function getDraft(appId) {
  return request("GET", `/api/apps/${segment(appId)}/draft`);
}

/**
 * Whether `error` is the answer for an app that has no draft: a 404 naming
 * the cause "DRAFT_NOT_FOUND" (its code is the envelope's not-found code). Any
 * other 404 (a hidden refusal carries no details) is not this.
 */
export function isNoDraft(error) {
  return Boolean(
    error &&
      error.status === 404 &&
      (error.code === "APP_RECORD_NOT_FOUND" || error.code === "APP_NOT_FOUND") &&
      error.details &&
      error.details.cause === "DRAFT_NOT_FOUND",
  );
}

/** `POST /api/apps/:id/draft`: starts the draft (201) or answers the one there is (200); `{app, draft}`. */
export function startDraft(appId) {
  return request("POST", `/api/apps/${segment(appId)}/draft`);
}

/**
 * `GET /api/apps/:id/draft/resource`: the draft's UI resource, the shape of
 * `appResource` (`{uri, mimeType, text, meta}`); `APP_INPUT_INVALID` when the
 * draft does not validate.
 */
export function draftResource(appId) {
  return request("GET", `/api/apps/${segment(appId)}/draft/resource`);
}

/**
 * `POST /api/apps/:id/draft/publish` with `{expectedRevision, contentHash}`
 * (the draft's `baseRevision` and the `contentHash` of the draft as the
 * person reviewed it): `{app, published: {revision, previousRevision,
 * migrationsApplied, status}}`. Refusals: `APP_CONFLICT` (the live app moved,
 * `details.diagnostics`; or the draft changed since that review,
 * `details.cause = "DRAFT_CHANGED"`), `APP_ACCESS_DENIED`,
 * `APP_INPUT_INVALID`, `APP_MIGRATION_FAILED`.
 */
export function publishDraft(appId, expectedRevision, contentHash) {
  return request("POST", `/api/apps/${segment(appId)}/draft/publish`, { expectedRevision, contentHash });
}

/** `DELETE /api/apps/:id/draft`: `{app, discarded: true}`. */
export function discardDraft(appId) {
  return request("DELETE", `/api/apps/${segment(appId)}/draft`);
}

/** `GET /api/apps/:id/draft/files`: `{app, files: [{path, content, encoding?, version}]}`, the draft's files for the Draft page's editor. */
export function draftFiles(appId) {
  return request("GET", `/api/apps/${segment(appId)}/draft/files`);
}

/**
 * `PUT /api/apps/:id/draft/files` with `{path, content, encoding?,
 * expectedVersion?}`: writes one file into the draft by the source tools'
 * rules; `{app, path, version, previousVersion, status}`.
 */
export function writeDraftFile(appId, file) {
  return request("PUT", `/api/apps/${segment(appId)}/draft/files`, file);
}

/** `DELETE /api/apps/:id/draft/files` with `{path, expectedVersion?}`: `{app, path, previousVersion, status}`. */
export function deleteDraftFile(appId, path, expectedVersion) {
  return request("DELETE", `/api/apps/${segment(appId)}/draft/files`, expectedVersion ? { path, expectedVersion } : { path });
}

/**
 * `GET /api/apps/:id/revisions/:revision/file?path=`: one file as it was at
 * `revision`, `{app, revision, path, content, bytes, version, encoding?}`
 * (`encoding` "base64" for a binary asset). 404 when the revision has no such file.
 */
export function revisionFile(appId, revision, path) {
  return request(
    "GET",
    `/api/apps/${segment(appId)}/revisions/${segment(revision)}/file?path=${segment(path)}`,
  );
}

/**
 * `POST /api/apps/:id/withdraw` (admins): the app disappears for everyone, its
 * data, history and grants kept; `{app, changed, withdrawn, packageDeleted, dataDeleted}`.
 */
export function withdrawApp(appId) {
  return request("POST", `/api/apps/${segment(appId)}/withdraw`);
}

/** `POST /api/apps/:id/restore` (admins): the shape of `withdrawApp`; `APP_CONFLICT` when its package was deleted. */
export function restoreApp(appId) {
  return request("POST", `/api/apps/${segment(appId)}/restore`);
}

/**
 * `POST /api/apps/:id/delete` with `{deleteData, confirmAppId}` (admins, a
 * withdrawn app): deletes its package and, with `deleteData` and the id typed
 * again, its data file (backed up first; the answer's `dataBackup` names it).
 */
export function deleteApp(appId, { deleteData = false, confirmAppId = "" } = {}) {
  return request("POST", `/api/apps/${segment(appId)}/delete`, { deleteData: Boolean(deleteData), confirmAppId: String(confirmAppId) });
}

/**
 * `GET /api/withdrawn-apps` (admins): `{apps: [{app, name, revision,
 * withdrawnAt, withdrawnBy, packageDeleted, dataDeleted}]}`.
 */
export function listWithdrawnApps() {
  return request("GET", "/api/withdrawn-apps");
}

// ---------------------------------------------------------------------------
// Member apps (`/api/member-apps`, App Studio) and the settings behind them

/**
 * `GET /api/member-apps` (`?all=true` for admin and staff: every member app,
 * else 403 APP_ACCESS_DENIED): `{enabled, canModerate, isAdmin, apps: [{id,
 * name, author: {id, username}|null, revision, size, createdAt, updatedAt,
 * status: "active"|"disabled", shares: [username], mine}]}`.
 */
export function listMemberApps({ all = false } = {}) {
  return request("GET", all ? "/api/member-apps?all=true" : "/api/member-apps");
}

/**
 * `POST /api/member-apps/check` with `{id?, files: {path: text | {base64}}}`
 * (`id` one of the caller's apps; null checks a new app): `{ok,
 * diagnostics: [{file, line, code, reason}]}` (`line` a number or null).
 */
export function checkMemberApp(id, files) {
  return request("POST", "/api/member-apps/check", id ? { id, files } : { files });
}

/**
 * `POST /api/member-apps` with `{name, files}`: 201 `{app}`, whose `id` the
 * platform chose (and wrote into APP.md's `id:`). Refusals:
 * `APP_INPUT_INVALID` (`details.diagnostics`), a cap reached (the message
 * names it), `APP_BUSY` (too many deploys; `details.retryAfterSeconds`),
 * `APP_OPERATION_UNAVAILABLE` (`details.reason` "member-apps-off").
 */
export function createMemberApp(name, files) {
  return request("POST", "/api/member-apps", { name, files });
}

/** `GET /api/member-apps/:id` (its author): `{app, files: {path: text | {base64}}}`. */
export function getMemberApp(appId) {
  return request("GET", `/api/member-apps/${segment(appId)}`);
}

/**
 * `PUT /api/member-apps/:id` with `{files, expectedRevision}`: `{app}`;
 * `APP_CONFLICT` with `details.reason` "stale-revision" when it changed meanwhile.
 */
export function updateMemberApp(appId, files, expectedRevision) {
  return request("PUT", `/api/member-apps/${segment(appId)}`, { files, expectedRevision });
}

/** `DELETE /api/member-apps/:id` (its author, or admin and staff moderating): `{deleted: true}`. */
export function deleteMemberApp(appId) {
  return request("DELETE", `/api/member-apps/${segment(appId)}`);
}

/** `POST /api/member-apps/:id/disable` (admin and staff): `{app}`. */
export function disableMemberApp(appId) {
  return request("POST", `/api/member-apps/${segment(appId)}/disable`);
}

/** `POST /api/member-apps/:id/enable` (admin and staff): `{app}`. */
export function enableMemberApp(appId) {
  return request("POST", `/api/member-apps/${segment(appId)}/enable`);
}

/** `POST /api/member-apps/:id/promote` (admins): the app joins the catalogue; `{promoted: id}`. */
export function promoteMemberApp(appId) {
  return request("POST", `/api/member-apps/${segment(appId)}/promote`);
}

/**
 * `GET /api/member-apps/:id/revisions`: `{revisions: [{revision, recordedAt,
 * summary, current, bytes, files}]}`, newest first.
 */
export function memberAppRevisions(appId) {
  return request("GET", `/api/member-apps/${segment(appId)}/revisions`);
}

/** `POST /api/member-apps/:id/revert` with `{revision, expectedRevision}`: `{app}`. */
export function revertMemberApp(appId, revision, expectedRevision) {
  return request("POST", `/api/member-apps/${segment(appId)}/revert`, { revision, expectedRevision });
}

/**
 * `POST /api/member-apps/:id/shares` with `{username}`: `{app, shared}`, the
 * same for any name (`shared` says what it means in a sentence).
 */
export function shareMemberApp(appId, username) {
  return request("POST", `/api/member-apps/${segment(appId)}/shares`, { username });
}

/** `DELETE /api/member-apps/:id/shares/:username`: `{app, shared}`, the same for any name. */
export function unshareMemberApp(appId, username) {
  return request("DELETE", `/api/member-apps/${segment(appId)}/shares/${segment(username)}`);
}

/**
 * `POST /api/member-apps/:id/draft` with `{files}`: stores them as the app's
 * draft; `{previewId, ok, diagnostics}`. When `ok`, `draftResource(id)` and
 * `createHost({preview: previewId})` preview it as the Draft page does.
 */
export function draftMemberApp(appId, files) {
  return request("POST", `/api/member-apps/${segment(appId)}/draft`, { files });
}

/** `GET /api/settings`: `{memberAppsEnabled}`. */
export function settings() {
  return request("GET", "/api/settings");
}

/** `PUT /api/settings/member-apps` with `{enabled}` (admins): `{memberAppsEnabled}`. */
export function setMemberAppsEnabled(enabled) {
  return request("PUT", "/api/settings/member-apps", { enabled: Boolean(enabled) });
}

// ---------------------------------------------------------------------------
// The Studio assistant (`/api/assistant`)

/**
 * `GET /api/assistant`: `{available, model, configure}` (`configure` says how
 * to set a model up when none is).
 */
export function assistantStatus() {
  return request("GET", "/api/assistant");
}

/** `GET /api/assistant/conversations`: `{conversations: [{id, title, createdAt, updatedAt}]}`, most recent first. */
export function listConversations() {
  return request("GET", "/api/assistant/conversations");
}

/** `POST /api/assistant/conversations` with `{title}` (optional): 201 `{id, title, createdAt, updatedAt}`. */
export function createConversation(title) {
  return request("POST", "/api/assistant/conversations", title ? { title } : {});
}

/** `GET /api/assistant/conversations/:id`: the conversation and its `messages`. */
export function getConversation(conversationId) {
  return request("GET", `/api/assistant/conversations/${segment(conversationId)}`);
}

/** `DELETE /api/assistant/conversations/:id`: `{deleted: true}`. */
export function deleteConversation(conversationId) {
  return request("DELETE", `/api/assistant/conversations/${segment(conversationId)}`);
}

/**
 * `POST /api/assistant/confirmations/:id` with `{approve, conversation}`:
 * `{decided, approved}`; 404 `APP_RECORD_NOT_FOUND` when it does not wait for
 * this person in that conversation, 409 `APP_CONFLICT` when it lapsed, was
 * cancelled or expired.
 */
export function decideConfirmation(confirmationId, approve, conversationId) {
  return request("POST", `/api/assistant/confirmations/${segment(confirmationId)}`, { approve: Boolean(approve), conversation: String(conversationId ?? "") });
}

/** `GET /api/assistant/confirmations`: `{confirmations: [card]}`, the person's confirmations still waiting (any page of theirs may decide them). */
export function listConfirmations() {
  return request("GET", "/api/assistant/confirmations");
}

/** `POST /api/assistant/conversations/:id/cancel`: `{cancelled}`, ends the conversation's running turn. */
export function cancelTurn(conversationId) {
  return request("POST", `/api/assistant/conversations/${segment(conversationId)}/cancel`);
}

/**
 * A server-sent event parser: `push` it text as it arrives (split anywhere,
 * `\n`, `\r\n` or `\r` line ends) and it calls `onData(data)` with each
 * event's `data` (its `data:` lines joined by newlines) when the blank line
 * ending the event arrives. Comments (`:` lines, the keep-alives) and other
 * fields are ignored; `end()` dispatches an event left without its blank line.
 */
export function sseParser(onData) {
  let buffer = "";
  let data = [];
  let pendingCr = false;
  const line = (text) => {
    if (text === "") {
      if (data.length > 0) {
        const joined = data.join("\n");
        data = [];
        onData(joined);
      }
      return;
    }
    if (text.startsWith(":")) {
      return;
    }
    const colon = text.indexOf(":");
    const field = colon === -1 ? text : text.slice(0, colon);
    let value = colon === -1 ? "" : text.slice(colon + 1);
    if (value.startsWith(" ")) {
      value = value.slice(1);
    }
    if (field === "data") {
      data.push(value);
    }
  };
  return {
    push(chunk) {
      let text = String(chunk);
      if (pendingCr && text.startsWith("\n")) {
        // The "\n" of a "\r\n" split across chunks.
        text = text.slice(1);
      }
      pendingCr = false;
      buffer += text;
      for (;;) {
        const match = /\r\n|\r|\n/.exec(buffer);
        if (!match) {
          break;
        }
        if (match[0] === "\r" && match.index === buffer.length - 1) {
          pendingCr = true;
        }
        line(buffer.slice(0, match.index));
        buffer = buffer.slice(match.index + match[0].length);
      }
    },
    end() {
      if (buffer !== "") {
        line(buffer);
        buffer = "";
      }
      line("");
    },
  };
}

/**
 * `POST /api/assistant/conversations/:id/turn` with `{prompt}`: reads the
 * turn's event stream, calling `onEvent(event)` with each event's JSON
 * object, and resolves when the stream ends. An answer that is not a stream
 * (the error envelope: `APP_CHAT_UNAVAILABLE`, `APP_BUSY`, …) throws its
 * `ApiError`. Aborting `signal` closes the stream (the turn goes on:
 * `cancelTurn` ends it); the promise then rejects with the fetch's
 * `AbortError`.
 */
export async function streamTurn(conversationId, prompt, { signal, onEvent }) {
  let response;
  try {
    response = await fetch(`/api/assistant/conversations/${segment(conversationId)}/turn`, {
      method: "POST",
      credentials: "same-origin",
      cache: "no-store",
      headers: { Accept: "text/event-stream", "Content-Type": "application/json" },
      body: JSON.stringify({ prompt }),
      signal,
    });
  } catch (error) {
    if (error && error.name === "AbortError") {
      throw error;
    }
    throw new ApiError({
      status: 0,
      code: "APP_NOT_READY",
      message: "Studio cannot be reached. Check your connection and try again.",
      retryable: true,
    });
  }
  const type = (response.headers.get("content-type") || "").toLowerCase();
  if (!response.ok || !type.startsWith("text/event-stream")) {
    let envelope = {};
    try {
      envelope = (await response.json()) || {};
    } catch {
      envelope = {};
    }
    throw new ApiError({
      status: response.status,
      code: typeof envelope.code === "string" ? envelope.code : "APP_INTERNAL",
      message: typeof envelope.message === "string" ? envelope.message : `Studio answered ${response.status}.`,
      retryable: envelope.retryable,
      diagnosticId: typeof envelope.diagnosticId === "string" ? envelope.diagnosticId : "",
      details: envelope.details,
    });
  }
  const parser = sseParser((data) => {
    let event;
    try {
      event = JSON.parse(data);
    } catch {
      return;
    }
    if (event && typeof event === "object") {
      onEvent(event);
    }
  });
  const reader = response.body.getReader();
  const decoder = new TextDecoder();
  for (;;) {
    const { done, value } = await reader.read();
    if (done) {
      break;
    }
    parser.push(decoder.decode(value, { stream: true }));
  }
  parser.push(decoder.decode());
  parser.end();
}
