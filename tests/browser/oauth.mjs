// OAuth 2.1 for MCP clients end to end (issue 13): the official MCP TypeScript
// SDK client (`StreamableHTTPClientTransport` with an `OAuthClientProvider`)
// connects to the real `sasha up`, and every authorization runs through the
// Studio page in real Chromium: sign in, the consent card, Allow or Deny, back
// to the client's loopback redirect.
//
// Scenarios, each a series of named checks:
//  0. an unauthenticated /mcp request names the protected-resource metadata,
//     which names Studio as the authorization server;
//  1. the admin connects a client and consents to apps:invoke + apps:write:
//     tools/list has the app tools and the source tools; the used request
//     then shows as expired;
//  2. a second admin client gets apps:invoke only (Allow with nothing ticked
//     is refused in the card first): app tools, no source tools;
//  3. a member's client asks for apps:write too: the card shows it as
//     unavailable, the token's scope is apps:invoke, no source tools;
//  4. refresh through the SDK's `auth()`: a new access token that works; the
//     replayed old refresh token revokes that connection;
//  5. the admin revokes the first client on the Connected clients page: its
//     next tools/list is refused and its refresh token is invalid_grant; the
//     other client keeps working;
//  6. Deny ends at the callback with error=access_denied and the SDK's state.
//
// Environment (set by tests/chromium/oauth.rs): CHROMIUM, STUDIO_URL,
// ADMIN_USER, ADMIN_PASSWORD, MEMBER_USER, MEMBER_PASSWORD, ARTIFACTS (the
// screenshot folder). BROWSER_CONSOLE=1 echoes the pages' console.

import crypto from "node:crypto";
import fs from "node:fs";
import http from "node:http";

import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StreamableHTTPClientTransport } from "@modelcontextprotocol/sdk/client/streamableHttp.js";
import {
  auth,
  discoverAuthorizationServerMetadata,
  refreshAuthorization,
  UnauthorizedError,
} from "@modelcontextprotocol/sdk/client/auth.js";
import { InvalidGrantError } from "@modelcontextprotocol/sdk/server/auth/errors.js";

import { Checks, env, launchChromium, runAndClose, waitFor } from "./harness.mjs";
import { newStudioPage, screenshots } from "./studio-page.mjs";

const started = Date.now();
const STUDIO = env("STUDIO_URL");
const MCP_URL = new URL(`${STUDIO}/mcp`);
const ADMIN = { username: env("ADMIN_USER"), password: env("ADMIN_PASSWORD") };
const MEMBER = { username: env("MEMBER_USER"), password: env("MEMBER_PASSWORD") };
const ARTIFACTS = env("ARTIFACTS");
fs.mkdirSync(ARTIFACTS, { recursive: true });

const SOURCE_TOOLS = ["listAppFiles", "readAppFile", "writeAppFile", "editAppFile", "deleteAppFile", "checkApp"];
const EXPENSE_LOG_TOOLS = [
  "open_app__expense_log",
  "app__expense_log__expenses__list",
  "app__expense_log__expenses__create",
  "app__expense_log__categories__list",
];

const checks = new Checks();
const taken = [];
const seconds = (ms) => `${(ms / 1000).toFixed(1)} s`;

// ---------------------------------------------------------------------------
// The client side: a loopback redirect server and an OAuthClientProvider

/**
 * The client's redirect target, `http://127.0.0.1:<port>/callback`, as a
 * native MCP client runs it: records each callback's query parameters.
 */
async function startCallbackServer() {
  const hits = [];
  const server = http.createServer((request, response) => {
    const url = new URL(request.url, "http://127.0.0.1");
    if (url.pathname !== "/callback") {
      response.writeHead(404).end();
      return;
    }
    hits.push(Object.fromEntries(url.searchParams));
    response.writeHead(200, { "content-type": "text/html; charset=utf-8", "cache-control": "no-store" });
    response.end("<!doctype html><title>Signed in</title><p>You can close this tab and return to your client.</p>");
  });
  const port = await new Promise((resolve, reject) => {
    server.once("error", reject);
    server.listen(0, "127.0.0.1", () => resolve(server.address().port));
  });
  return {
    server,
    host: `127.0.0.1:${port}`,
    url: `http://127.0.0.1:${port}/callback`,
    hits,
    /** The callback that carries `state`. */
    forState: (state) => waitFor(`the client's callback with state ${state}`, () => hits.find((hit) => hit.state === state)),
  };
}

/**
 * An in-memory `OAuthClientProvider`: a public client (no secret) with the
 * loopback redirect. `redirectToAuthorization` only records the URL; the
 * scenario drives Chromium to it.
 */
class TestProvider {
  constructor(clientName) {
    this.clientName = clientName;
    this.client = undefined;
    this.saved = undefined;
    this.verifier = undefined;
    this.lastState = undefined;
    this.authorizationUrls = [];
    this.invalidated = [];
  }

  get redirectUrl() {
    return callbacks.url;
  }

  get clientMetadata() {
    return {
      client_name: this.clientName,
      redirect_uris: [callbacks.url],
      grant_types: ["authorization_code", "refresh_token"],
      response_types: ["code"],
      token_endpoint_auth_method: "none",
    };
  }

  state() {
    this.lastState = crypto.randomBytes(16).toString("base64url");
    return this.lastState;
  }

  clientInformation() {
    return this.client;
  }

  saveClientInformation(information) {
    this.client = information;
  }

  tokens() {
    return this.saved;
  }

  saveTokens(tokens) {
    this.saved = tokens;
  }

  redirectToAuthorization(url) {
    this.authorizationUrls.push(new URL(url));
  }

  saveCodeVerifier(verifier) {
    this.verifier = verifier;
  }

  codeVerifier() {
    return this.verifier;
  }

  invalidateCredentials(scope) {
    this.invalidated.push(scope);
    if (scope === "all" || scope === "tokens") {
      this.saved = undefined;
    }
    if (scope === "all" || scope === "client") {
      this.client = undefined;
    }
    if (scope === "all" || scope === "verifier") {
      this.verifier = undefined;
    }
  }
}

function newClient(label) {
  return new Client({ name: `sasha-oauth-${label}`, version: "1.0.0" });
}

async function toolNames(client) {
  const { tools } = await client.listTools();
  return tools.map((tool) => tool.name).sort();
}

/** A client that presents `accessToken` itself (no provider, no refresh). */
async function connectWithToken(label, accessToken) {
  const client = newClient(label);
  await client.connect(
    new StreamableHTTPClientTransport(MCP_URL, { requestInit: { headers: { Authorization: `Bearer ${accessToken}` } } }),
  );
  return client;
}

const sortedScopes = (scope) => (scope || "").split(" ").filter(Boolean).sort();

// ---------------------------------------------------------------------------
// The browser side

/** A Studio page in a fresh browser context (its own cookie jar). */
async function studioPage(label) {
  // Every confirm() the Studio asks (revoking a client) is accepted.
  return { ...(await newStudioPage(browser, label)), signedIn: false };
}

function screenshot(page, name) {
  return screenshots(page, ARTIFACTS, name, taken);
}

/**
 * Starts a flow: the SDK client's first connect is refused (401) and the
 * provider is asked to send the user to the authorization URL. Answers that
 * URL and the transport the code is finished on.
 */
async function startFlow(provider, label, scope) {
  const transport = new StreamableHTTPClientTransport(MCP_URL, { authProvider: provider });
  if (scope) {
    // A client that asks for more than the 401 challenge names.
    const outcome = await auth(provider, { serverUrl: MCP_URL, scope });
    checks.equal(outcome, "REDIRECT", `${label}: the SDK asks to authorize with scope ${scope}`);
  } else {
    const client = newClient(label);
    let refused = null;
    try {
      await client.connect(transport);
    } catch (error) {
      refused = error;
    }
    checks.ok(refused instanceof UnauthorizedError, `${label}: the SDK's first connect needs authorization`, String(refused));
  }
  checks.equal(provider.authorizationUrls.length, 1, `${label}: the SDK asks to open one authorization URL`);
  const url = provider.authorizationUrls[0];
  checks.equal(url.searchParams.get("state"), provider.lastState, `${label}: the authorization URL carries the SDK's state`);
  checks.equal(url.searchParams.get("code_challenge_method"), "S256", `${label}: the SDK uses PKCE S256`);
  checks.equal(url.searchParams.get("resource"), MCP_URL.href, `${label}: the SDK names the MCP resource`);
  return { url, transport };
}

/**
 * Opens the authorization URL in Chromium, signs in if the page asks, and
 * waits for the consent card. Answers the card's heading locator and the
 * `#/connect/<id>` URL it is on.
 */
async function openConsent(studio, url, user, clientName) {
  const { page } = studio;
  await page.goto(url.href);
  await page.waitForURL(/\/#\/connect\/[A-Za-z0-9_-]{43}$/);
  const consentUrl = page.url();
  if (!studio.signedIn) {
    await page.getByRole("heading", { name: "Sign in" }).waitFor();
    checks.ok(true, `${studio.label}: a signed-out browser gets the sign-in form first, on the connect route`);
    await page.getByLabel("User name").fill(user.username);
    await page.getByLabel("Password").fill(user.password);
    await page.getByRole("button", { name: "Sign in" }).click();
    studio.signedIn = true;
  }
  const heading = page.getByRole("heading", { name: `Connect ${clientName} to Sasha?` });
  await heading.waitFor();
  checks.equal(page.url(), consentUrl, `${studio.label}: the consent card keeps the #/connect route`);
  return { heading, consentUrl };
}

/** The consent card's checkbox for `scope`. */
function scopeBox(page, scope) {
  return page.getByRole("checkbox", { name: new RegExp(scope.replace(":", "\\:")) });
}

/** Clicks `button` ("Allow" or "Deny") and answers the callback's parameters. */
async function answerConsent(page, provider, button) {
  await page.getByRole("button", { name: button, exact: true }).click();
  const hit = await callbacks.forState(provider.lastState);
  await page.waitForURL((url) => url.href.startsWith(callbacks.url));
  return hit;
}

/** Finishes the flow with the code and connects a fresh SDK client. */
async function finishFlow(provider, transport, hit, label) {
  checks.ok(typeof hit.code === "string" && hit.code.length > 0 && !hit.error, `${label}: the callback has a code`, hit);
  await transport.finishAuth(hit.code);
  const tokens = provider.tokens();
  checks.ok(/^sasha_at_/.test(tokens.access_token) && /^sasha_rt_/.test(tokens.refresh_token), `${label}: the SDK saved a sasha_at_ access and a sasha_rt_ refresh token`, tokens);
  checks.equal(String(tokens.token_type).toLowerCase(), "bearer", `${label}: the tokens are bearer tokens`);
  const client = newClient(label);
  await client.connect(new StreamableHTTPClientTransport(MCP_URL, { authProvider: provider }));
  return { client, tokens };
}

// ---------------------------------------------------------------------------

async function run() {
  // --- 0. Discovery ----------------------------------------------------------
  const unauthenticated = await fetch(MCP_URL, {
    method: "POST",
    headers: { "content-type": "application/json", accept: "application/json, text/event-stream" },
    body: JSON.stringify({ jsonrpc: "2.0", id: 1, method: "tools/list", params: {} }),
  });
  checks.equal(unauthenticated.status, 401, "an unauthenticated /mcp request is 401");
  const challenge = unauthenticated.headers.get("www-authenticate") || "";
  const metadataUrl = `${STUDIO}/.well-known/oauth-protected-resource/mcp`;
  checks.ok(challenge.includes(`resource_metadata="${metadataUrl}"`), "its WWW-Authenticate names the protected-resource metadata", challenge);
  const resource = await (await fetch(metadataUrl)).json();
  checks.equal(resource.resource, MCP_URL.href, "the protected-resource metadata names the MCP resource");
  checks.equal(resource.authorization_servers, [STUDIO], "…and Studio as its authorization server");
  const metadata = await discoverAuthorizationServerMetadata(new URL(STUDIO));
  checks.equal(metadata.issuer, STUDIO, "the authorization server metadata's issuer is the Studio origin");

  // --- 1. The admin consents to apps:invoke + apps:write ---------------------
  const admin = await studioPage("admin");
  const full = new TestProvider("OAuth test: admin, full access");
  const fullFlow = await startFlow(full, "admin full");
  const { consentUrl: usedConsentUrl } = await openConsent(admin, fullFlow.url, ADMIN, full.clientName);
  const page = admin.page;
  checks.equal(
    await page.locator(".consent-host").textContent(),
    callbacks.host,
    "the consent card shows the redirect host it will return to",
  );
  checks.ok(await page.getByText("will return you to").isVisible(), "…saying it will return you there");
  checks.equal(await page.locator(".consent-resource").textContent(), MCP_URL.href, "the consent card names the MCP resource");
  checks.equal(fullFlow.url.searchParams.get("scope"), "apps:invoke", "the SDK asks for the scope the 401 challenge names");
  checks.ok(await scopeBox(page, "apps:invoke").isChecked(), "apps:invoke is offered and pre-checked (requested)");
  checks.ok(!(await scopeBox(page, "apps:write").isChecked()), "apps:write is offered to the admin but not pre-checked (not requested)");
  await scopeBox(page, "apps:write").setChecked(true);
  await screenshot(page, "consent-admin");
  const fullHit = await answerConsent(page, full, "Allow");
  checks.equal(fullHit.iss, STUDIO, "the callback names the issuer (iss)");
  const fullSession = await finishFlow(full, fullFlow.transport, fullHit, "admin full");
  checks.equal(sortedScopes(full.tokens().scope), ["apps:invoke", "apps:write"], "the admin's full token has apps:invoke and apps:write");
  const fullTools = await toolNames(fullSession.client);
  for (const name of ["open_app__hello", ...EXPENSE_LOG_TOOLS, ...SOURCE_TOOLS]) {
    checks.ok(fullTools.includes(name), `admin full: tools/list has ${name}`, fullTools);
  }
  // The request was consumed by the answer.
  await page.goto(usedConsentUrl);
  await page.getByText("This connection request has expired or was already used; start again from your client.").waitFor();
  checks.ok(true, "the used connection request shows as expired or already used");
  await screenshot(page, "consent-expired");

  // --- 2. A second admin client, apps:invoke only ----------------------------
  const invoke = new TestProvider("OAuth test: admin, apps only");
  const invokeFlow = await startFlow(invoke, "admin invoke");
  await openConsent(admin, invokeFlow.url, ADMIN, invoke.clientName);
  checks.ok(true, "a signed-in browser goes straight to the consent card");
  await scopeBox(page, "apps:invoke").setChecked(false);
  await scopeBox(page, "apps:write").setChecked(false);
  await page.getByRole("button", { name: "Allow", exact: true }).click();
  const nothing = page.getByRole("alert").filter({ hasText: "Tick at least one thing" });
  await nothing.waitFor();
  checks.ok(page.url().startsWith(STUDIO), "Allow with no scope ticked is refused in the card");
  await scopeBox(page, "apps:invoke").setChecked(true);
  const invokeHit = await answerConsent(page, invoke, "Allow");
  const invokeSession = await finishFlow(invoke, invokeFlow.transport, invokeHit, "admin invoke");
  checks.equal(invoke.tokens().scope, "apps:invoke", "the second client's token scope is apps:invoke only");
  const invokeTools = await toolNames(invokeSession.client);
  for (const name of ["open_app__hello", ...EXPENSE_LOG_TOOLS]) {
    checks.ok(invokeTools.includes(name), `admin invoke: tools/list has ${name}`, invokeTools);
  }
  checks.ok(!SOURCE_TOOLS.some((name) => invokeTools.includes(name)), "admin invoke: tools/list has no source tools", invokeTools);

  // --- 3. A member asks for apps:write too -----------------------------------
  const member = await studioPage("member");
  const memberProvider = new TestProvider("OAuth test: member");
  const memberFlow = await startFlow(memberProvider, "member", "apps:invoke apps:write");
  checks.ok(
    sortedScopes(memberFlow.url.searchParams.get("scope")).includes("apps:write"),
    "member: the client asks for apps:write",
  );
  await openConsent(member, memberFlow.url, MEMBER, memberProvider.clientName);
  const memberPage = member.page;
  checks.ok(await scopeBox(memberPage, "apps:invoke").isChecked(), "member: apps:invoke is offered and pre-checked");
  checks.equal(await scopeBox(memberPage, "apps:write").count(), 0, "member: apps:write is not offered as a checkbox");
  const note = memberPage.getByRole("note").filter({ hasText: "apps:write" });
  checks.ok(
    (await note.textContent()).includes("asked for apps:write, which your role cannot hold"),
    "member: the card says apps:write was asked for and the role cannot hold it",
  );
  await screenshot(memberPage, "consent-member");
  const memberHit = await answerConsent(memberPage, memberProvider, "Allow");
  const memberSession = await finishFlow(memberProvider, memberFlow.transport, memberHit, "member");
  checks.equal(memberProvider.tokens().scope, "apps:invoke", "member: the token response's scope is apps:invoke");
  const memberTools = await toolNames(memberSession.client);
  for (const name of EXPENSE_LOG_TOOLS) {
    checks.ok(memberTools.includes(name), `member: tools/list has ${name}`, memberTools);
  }
  checks.ok(!memberTools.includes("open_app__hello"), "member: tools/list lacks hello (no grant)", memberTools);
  checks.ok(!SOURCE_TOOLS.some((name) => memberTools.includes(name)), "member: tools/list has no source tools", memberTools);

  // --- 4. Refresh --------------------------------------------------------------
  const before = full.tokens();
  checks.equal(await auth(full, { serverUrl: MCP_URL }), "AUTHORIZED", "refresh: the SDK's auth() refreshes with the refresh token");
  const after = full.tokens();
  checks.ok(after.access_token !== before.access_token, "refresh: a new access token");
  checks.ok(after.refresh_token && after.refresh_token !== before.refresh_token, "refresh: the refresh token rotated");
  checks.equal(sortedScopes(after.scope || before.scope), ["apps:invoke", "apps:write"], "refresh: the scope is kept");
  const refreshed = await connectWithToken("refreshed", after.access_token);
  const refreshedTools = await toolNames(refreshed);
  checks.ok(refreshedTools.includes("listAppFiles") && refreshedTools.includes("open_app__hello"), "refresh: tools/list works with the new access token", refreshedTools);
  await refreshed.close();
  checks.ok((await toolNames(fullSession.client)).includes("listAppFiles"), "refresh: the connected SDK client goes on with the new token");

  // A replayed (already used) refresh token revokes that whole connection.
  const memberOld = memberProvider.tokens();
  checks.equal(await auth(memberProvider, { serverUrl: MCP_URL }), "AUTHORIZED", "member refresh: auth() refreshes");
  const memberNew = memberProvider.tokens();
  const replay = await refreshAuthorization(new URL(STUDIO), {
    metadata,
    clientInformation: memberProvider.clientInformation(),
    refreshToken: memberOld.refresh_token,
    resource: MCP_URL,
  }).then(
    () => null,
    (error) => error,
  );
  checks.ok(replay instanceof InvalidGrantError, "replaying a used refresh token is invalid_grant", String(replay));
  const afterReplay = await fetch(MCP_URL, {
    method: "POST",
    headers: {
      authorization: `Bearer ${memberNew.access_token}`,
      "content-type": "application/json",
      accept: "application/json, text/event-stream",
    },
    body: JSON.stringify({ jsonrpc: "2.0", id: 1, method: "tools/list", params: {} }),
  });
  checks.equal(afterReplay.status, 401, "…and the connection's current access token stops working");

  // --- 5. Revocation on the Connected clients page ---------------------------
  const savedFull = full.tokens();
  await page.goto(`${STUDIO}/`);
  await page.getByRole("navigation", { name: "Apps" }).waitFor();
  await page.getByRole("link", { name: "Connected clients" }).click();
  await page.getByRole("heading", { name: "Connected clients" }).waitFor();
  const table = page.getByRole("table", { name: "Clients connected to Sasha as you" });
  await table.waitFor();
  const rowNames = await table.locator("tbody tr .grant-name").allTextContents();
  checks.equal([...rowNames].sort(), [full.clientName, invoke.clientName].sort(), "the admin's Connected clients lists both admin clients, not the member's");
  const fullRow = table.getByRole("row").filter({ hasText: full.clientName });
  checks.ok((await fullRow.textContent()).includes(callbacks.host), "the row shows the client's redirect host");
  checks.ok((await fullRow.textContent()).includes("apps:write"), "the row shows the client's scopes");
  await screenshot(page, "connections");
  await page.getByRole("button", { name: `Revoke ${full.clientName}` }).click();
  await page.getByRole("status").filter({ hasText: `${full.clientName} is disconnected.` }).waitFor();
  checks.equal(admin.dialogs.length, 1, "revoking asks for confirmation first");
  checks.equal(
    await table.locator("tbody tr .grant-name").allTextContents(),
    [invoke.clientName],
    "after the revoke the list shows only the other client",
  );
  const urlsBefore = full.authorizationUrls.length;
  const refused = await fullSession.client.listTools().then(
    () => null,
    (error) => error,
  );
  checks.ok(refused instanceof UnauthorizedError, "the revoked client's next tools/list is refused (UnauthorizedError)", String(refused));
  checks.equal(full.authorizationUrls.length, urlsBefore + 1, "…and the SDK falls back to asking the user again");
  const revokedRefresh = await refreshAuthorization(new URL(STUDIO), {
    metadata,
    clientInformation: full.clientInformation(),
    refreshToken: savedFull.refresh_token,
    resource: MCP_URL,
  }).then(
    () => null,
    (error) => error,
  );
  checks.ok(revokedRefresh instanceof InvalidGrantError, "the revoked client's refresh token is invalid_grant", String(revokedRefresh));
  checks.ok((await toolNames(invokeSession.client)).includes("open_app__hello"), "the other admin client keeps working");

  // --- 6. Deny -----------------------------------------------------------------
  const denied = new TestProvider("OAuth test: denied");
  const deniedFlow = await startFlow(denied, "denied");
  await openConsent(admin, deniedFlow.url, ADMIN, denied.clientName);
  const deniedHit = await answerConsent(page, denied, "Deny");
  checks.equal(deniedHit.error, "access_denied", "Deny: the callback has error=access_denied");
  checks.equal(deniedHit.state, denied.lastState, "Deny: the callback carries the state the SDK sent");
  checks.ok(!("code" in deniedHit), "Deny: the callback has no code", deniedHit);

  for (const client of [invokeSession.client, memberSession.client, fullSession.client]) {
    await client.close().catch(() => {});
  }
}

// ---------------------------------------------------------------------------
// Last, so every class and function above is defined when the scenario runs.

const callbacks = await startCallbackServer();
const browser = await launchChromium();
try {
  await runAndClose(browser, run, taken);
} finally {
  callbacks.server.close();
}
console.log(`${checks.passed} checks passed in ${seconds(Date.now() - started)}; screenshots in ${ARTIFACTS}`);
// The SDK clients may keep sockets (an SSE GET) open; the scenario is over.
process.exit(0);
