// Signing in to the real Studio through a real OpenID provider (issue 49):
// oidc-provider on loopback (tests/oidc/provider.mjs), whose accounts'
// groups this script rewrites in GROUPS_FILE as an administrator would change
// them at the provider. Each scenario runs in a fresh browser context (its
// own cookies, so its own provider session).
//
// Scenarios, each a series of named checks:
//  1. the sign-in page offers "Sign in with Test IdP"; alice (sasha-members)
//     signs in at the provider and lands in Studio as a member;
//  2. alice is moved to sasha-admins at the provider: her next sign-in makes
//     her an admin; replaying the provider's callback URL is refused with a
//     page, not a second session;
//  3. bob (only in "sales") sees the refusal page and has no session;
//  4. an MCP client's authorization request, opened signed out, offers the
//     provider, and after it the consent card of that very request.
// With PHASE=sso-only (Studio restarted with SASHA_SSO_ONLY=1):
//  5. the sign-in page offers the provider and hides the password form
//     behind "Administrator sign-in"; a person with a password is refused
//     there with the envelope's message; the break-glass admin signs in.
//
// Environment (set by tests/chromium/sso.rs): CHROMIUM, STUDIO_URL, ISSUER,
// GROUPS_FILE, ARTIFACTS, PHASE (provider or sso-only); with sso-only also
// ADMIN_USER, ADMIN_PASSWORD, MEMBER_USER, MEMBER_PASSWORD.
// BROWSER_CONSOLE=1 echoes the pages' console.

import crypto from "node:crypto";
import fs from "node:fs";

import { Checks, env, launchChromium, runAndClose } from "./harness.mjs";
import { newStudioPage, screenshots } from "./studio-page.mjs";

const started = Date.now();
const STUDIO = env("STUDIO_URL");
const ISSUER = env("ISSUER");
const GROUPS_FILE = env("GROUPS_FILE");
const ARTIFACTS = env("ARTIFACTS");
const PHASE = env("PHASE");
fs.mkdirSync(ARTIFACTS, { recursive: true });

const checks = new Checks();
const taken = [];

/** Sets everyone's groups at the provider (read at each of its sign-ins). */
function setGroups(groups) {
  fs.writeFileSync(GROUPS_FILE, JSON.stringify(groups));
}

/** Who the page's session is (`/api/me`), or the status when none. */
function me(page) {
  return page.evaluate(async () => {
    const response = await fetch("/api/me");
    return response.ok ? response.json() : { status: response.status };
  });
}

/**
 * Clicks "Sign in with Test IdP" and goes through the provider's login and
 * consent pages as `login`, until the browser is back on Studio. Answers
 * the callback URLs the provider sent the browser to.
 */
async function signInThroughProvider(page, login) {
  const callbacks = [];
  const record = (request) => {
    if (request.url().startsWith(`${STUDIO}/auth/oidc/callback`)) {
      callbacks.push(request.url());
    }
  };
  page.on("request", record);
  const button = page.getByRole("link", { name: "Sign in with Test IdP" });
  await button.waitFor();
  await button.click();
  for (let step = 0; step < 6; step += 1) {
    await page.waitForLoadState("domcontentloaded");
    const url = page.url();
    if (!url.startsWith(ISSUER)) {
      break;
    }
    const submit = page.locator("button.login-submit");
    await submit.waitFor();
    if (await page.locator('input[name="login"]').count()) {
      await page.locator('input[name="login"]').fill(login);
      await page.locator('input[name="password"]').fill("any password will do");
    }
    await submit.click();
    await page.waitForURL((next) => next.href !== url);
  }
  page.off("request", record);
  return callbacks;
}

async function run() {
  setGroups({ alice: ["sasha-members"], bob: ["sales"] });

  // --- 1. first sign-in ---------------------------------------------------------
  const first = await newStudioPage(browser, "alice");
  await first.page.goto(STUDIO);
  await first.page.getByRole("heading", { name: "Sign in" }).waitFor();
  // The providers arrive after the form (GET /api/auth/providers).
  const offered = first.page.getByRole("link", { name: "Sign in with Test IdP" });
  await offered.waitFor({ timeout: 10_000 });
  checks.ok(
    await offered.isVisible(),
    "the sign-in page offers the provider",
  );
  checks.ok(await first.page.getByLabel("Password").isVisible(), "passwords are still offered beside it");
  await screenshots(first.page, ARTIFACTS, "sign-in-with-provider", taken);
  await signInThroughProvider(first.page, "alice");
  await first.page.getByRole("navigation", { name: "Apps" }).waitFor();
  const alice = await me(first.page);
  checks.equal([alice.username, alice.role], ["alice", "member"], "alice's first sign-in makes her a member");
  await first.page.context().close();

  // --- 2. the role follows the provider; a replayed callback ----------------------
  setGroups({ alice: ["sasha-admins", "sales"], bob: ["sales"] });
  const second = await newStudioPage(browser, "alice again");
  await second.page.goto(STUDIO);
  const callbacks = await signInThroughProvider(second.page, "alice");
  await second.page.getByRole("navigation", { name: "Apps" }).waitFor();
  const promoted = await me(second.page);
  checks.equal([promoted.username, promoted.role], ["alice", "admin"], "moved to sasha-admins at the provider, alice signs in as an admin");
  checks.equal(callbacks.length, 1, "the provider sent the browser back once");
  // The Users page says where each person comes from.
  await second.page.getByRole("navigation", { name: "Apps" }).getByRole("button", { name: "Users" }).click();
  const users = second.page.locator(".users-panel");
  await users.getByRole("heading", { name: "Users", level: 1 }).waitFor();
  const aliceRow = users.locator('tr[data-user="alice"]');
  await aliceRow.waitFor();
  checks.equal(
    (await aliceRow.locator(".person-source").textContent()).trim(),
    "Single sign-on",
    "the Users page shows alice comes from single sign-on",
  );
  await screenshots(second.page, ARTIFACTS, "users-sources", taken);
  const replay = await second.page.goto(callbacks[0]);
  checks.equal(replay.status(), 400, "the replayed callback is refused");
  checks.ok(
    (await second.page.locator("#sso-reason").textContent()).includes("already been used"),
    "the replayed callback's page says the sign-in was used already",
  );
  await screenshots(second.page, ARTIFACTS, "replayed-callback", taken);
  await second.page.context().close();

  // --- 3. no mapped group -----------------------------------------------------------
  const third = await newStudioPage(browser, "bob");
  await third.page.goto(STUDIO);
  await signInThroughProvider(third.page, "bob");
  const reason = third.page.locator("#sso-reason");
  await reason.waitFor();
  checks.ok(
    (await reason.textContent()).includes("none of your groups gives access"),
    "bob, in no mapped group, sees the refusal page",
  );
  checks.ok((await third.page.content()).includes("Diagnostic id"), "the refusal page has a diagnostic id");
  await screenshots(third.page, ARTIFACTS, "no-mapped-group", taken);
  // The refusal page is Studio's own (its CSP lets it fetch nothing): ask
  // from the Studio page whether a session came with it.
  await third.page.goto(STUDIO);
  await third.page.getByRole("heading", { name: "Sign in" }).waitFor();
  const bob = await me(third.page);
  checks.equal(bob.status, 401, "bob has no session");
  await third.page.context().close();

  // --- 4. an MCP client's consent through the provider ------------------------------
  const registered = await (
    await fetch(`${STUDIO}/oauth/register`, {
      method: "POST",
      headers: { "content-type": "application/json" },
      body: JSON.stringify({
        client_name: "SSO test client",
        redirect_uris: ["http://127.0.0.1:9/callback"],
        token_endpoint_auth_method: "none",
      }),
    })
  ).json();
  checks.ok(typeof registered.client_id === "string", "an MCP client registers", registered);
  const verifier = crypto.randomBytes(32).toString("base64url");
  const challenge = crypto.createHash("sha256").update(verifier).digest("base64url");
  const authorize = new URL(`${STUDIO}/oauth/authorize`);
  for (const [name, value] of Object.entries({
    response_type: "code",
    client_id: registered.client_id,
    redirect_uri: "http://127.0.0.1:9/callback",
    code_challenge: challenge,
    code_challenge_method: "S256",
    state: "sso-test-state",
    scope: "apps:invoke",
  })) {
    authorize.searchParams.set(name, value);
  }
  const fourth = await newStudioPage(browser, "alice connects a client");
  await fourth.page.goto(authorize.href);
  await fourth.page.waitForURL(/\/#\/connect\/[A-Za-z0-9_-]{43}$/);
  const consentUrl = fourth.page.url();
  await fourth.page.getByRole("heading", { name: "Sign in" }).waitFor();
  await signInThroughProvider(fourth.page, "alice");
  await fourth.page.getByRole("heading", { name: "Connect SSO test client to Sasha?" }).waitFor();
  checks.equal(fourth.page.url(), consentUrl, "after the provider, the consent card of the same request shows");
  await screenshots(fourth.page, ARTIFACTS, "consent-after-sso", taken);
  await fourth.page.context().close();
}

async function runSsoOnly() {
  const admin = { username: env("ADMIN_USER"), password: env("ADMIN_PASSWORD") };
  const member = { username: env("MEMBER_USER"), password: env("MEMBER_PASSWORD") };
  const { page } = await newStudioPage(browser, "passwords off");
  await page.goto(STUDIO);
  await page.getByRole("link", { name: "Sign in with Test IdP" }).waitFor();
  checks.ok(!(await page.getByLabel("Password").isVisible()), "with passwords off, the password form is hidden");
  const adminLink = page.getByRole("button", { name: "Administrator sign-in" });
  checks.ok(await adminLink.isVisible(), "a small administrator sign-in link stays");
  await screenshots(page, ARTIFACTS, "sso-only", taken);
  await adminLink.click();
  await page.getByLabel("User name").fill(member.username);
  await page.getByLabel("Password").fill(member.password);
  await page.getByRole("button", { name: "Sign in", exact: true }).click();
  const alert = page.getByRole("alert");
  await alert.waitFor();
  const refusal = await alert.textContent();
  checks.ok(
    refusal.includes("Password sign-in is turned off on this Studio: use \"Sign in with Test IdP\""),
    "a person with a password is refused with the envelope's message",
    refusal,
  );
  checks.equal((await me(page)).status, 401, "and has no session");
  await page.getByLabel("User name").fill(admin.username);
  await page.getByLabel("Password").fill(admin.password);
  await page.getByRole("button", { name: "Sign in", exact: true }).click();
  await page.getByRole("navigation", { name: "Apps" }).waitFor();
  checks.equal((await me(page)).role, "admin", "the break-glass admin signs in with a password");
}

const browser = await launchChromium();
await runAndClose(browser, PHASE === "sso-only" ? runSsoOnly : run, taken);
console.log(`${checks.passed} checks passed in ${((Date.now() - started) / 1000).toFixed(1)} s; screenshots in ${ARTIFACTS}`);
