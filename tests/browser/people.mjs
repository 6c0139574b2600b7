// A new organisation's first day in real Chromium, with no CLI and no UUID:
// the real `sasha up` with its bundled Time Sheet Entry and the dev admin.
//
//  1. the admin opens Users from the sidebar, invites "maria" as a member
//     (a taken name is refused under the name field first) and copies her
//     one-time link;
//  2. maria opens the link in her own browser, sees who it is for, is told
//     under the field when her two passwords differ, sets one and is signed
//     in; the spent link then says it no longer works;
//  3. the admin opens Time Sheet Entry's access panel, types "maria" and
//     grants her use; inside the app the admin adds the project the team
//     logs against;
//  4. maria reloads, opens Time Sheet Entry and logs hours on that project;
//  5. maria opens Connected clients: the MCP URL and both setups are shown;
//     a token without a name is refused under its field; "Laptop" is made and
//     its setup (with the secret, shown once) is printed for the Rust side;
//     "Old" is made and revoked, and leaves the list;
//  6. the admin sees maria active with a last sign-in, invites and removes
//     "temp" (asked first), and cannot change their own row;
//  7. no horizontal overflow at 375 and 390 px on the Users page, the
//     invitation card and Connected clients; screenshots at 1440 and 375 px.
//
// Environment (set by tests/chromium/timesheet.rs): CHROMIUM, STUDIO_URL,
// ADMIN_USER, ADMIN_PASSWORD, ARTIFACTS. Prints `SETUP {json}` (the Laptop
// token's setup as pasted), `REVOKED {secret}` and `WEEK_START {date}`.

import fs from "node:fs";

import { Checks, env, launchChromium, runAndClose, waitFor } from "./harness.mjs";
import { appLink, fitsNarrow, innerFrame, newStudioPage, openApp, screenshots, sidebar, signIn } from "./studio-page.mjs";
import { addProjectInApp, logHoursInApp, weekStartInApp } from "./timesheet-app.mjs";

const started = Date.now();
const STUDIO = env("STUDIO_URL");
const ADMIN = { username: env("ADMIN_USER"), password: env("ADMIN_PASSWORD") };
const ARTIFACTS = env("ARTIFACTS");
fs.mkdirSync(ARTIFACTS, { recursive: true });

const APP = "Time Sheet Entry";
const MARIA = { username: "maria", password: "maria's own long password" };
const PROJECT = "Apollo";

const checks = new Checks();
const taken = [];

const browser = await launchChromium();
await runAndClose(browser, run, taken);
console.log(`${checks.passed} checks passed in ${((Date.now() - started) / 1000).toFixed(1)} s; screenshots in ${ARTIFACTS}`);

function screenshot(page, name, subject = null) {
  return screenshots(page, ARTIFACTS, name, taken, subject);
}

function usersPanel(page) {
  return page.locator(".users-panel");
}

/** Waits until a panel's live status line says `text`. */
function said(panel, text) {
  return panel.getByRole("status").filter({ hasText: text }).first().waitFor({ timeout: 20_000 });
}

/** The Users page's row of `name`. */
function personRow(page, name) {
  return usersPanel(page).locator(`tr[data-user="${name}"]`);
}

async function openUsers(page) {
  await sidebar(page).getByRole("button", { name: "Users" }).click();
  await usersPanel(page).getByRole("heading", { name: "Users", level: 1 }).waitFor();
  await said(usersPanel(page), /\d+ users?\./);
}

async function invite(page, name, role) {
  await usersPanel(page).getByLabel("User name").fill(name);
  await usersPanel(page).getByLabel("Role", { exact: true }).selectOption(role);
  await usersPanel(page).getByRole("button", { name: "Invite" }).click();
}

async function run() {
  // --- 1. The admin invites maria ---------------------------------------------
  const admin = (await newStudioPage(browser, "admin")).page;
  await admin.goto(`${STUDIO}/`);
  await signIn(admin, ADMIN);
  await openUsers(admin);
  checks.ok(await personRow(admin, ADMIN.username).isVisible(), "the admin is listed");
  checks.equal(await personRow(admin, ADMIN.username).getByRole("button").count(), 0, "the admin's own row has no controls");

  await invite(admin, ADMIN.username, "member");
  const nameError = usersPanel(admin).locator("#invite-username-error");
  await nameError.waitFor();
  checks.ok((await nameError.textContent()).includes("already taken"), "a taken name is refused under the name field", await nameError.textContent());
  checks.equal(await usersPanel(admin).getByLabel("User name").getAttribute("aria-invalid"), "true", "and the field is marked invalid");

  await invite(admin, MARIA.username, "member");
  const link = usersPanel(admin).getByLabel(`Invitation link for ${MARIA.username}`, { exact: true });
  await link.waitFor();
  const url = await link.inputValue();
  checks.ok(url.startsWith(`${STUDIO}/#/invite/`), "the invitation is a Studio link", url);
  checks.ok(await nameError.isHidden(), "the name field's refusal is cleared");
  await personRow(admin, MARIA.username).getByText("Invited").waitFor();
  checks.ok(true, "maria is listed as invited");
  await screenshot(admin, "users-invited", usersPanel(admin));
  await fitsNarrow(admin, checks, "the Users page");

  // --- 2. maria accepts in her own browser --------------------------------------
  const maria = (await newStudioPage(browser, "maria")).page;
  await maria.goto(url);
  await maria.getByRole("heading", { name: `Welcome, ${MARIA.username}` }).waitFor();
  checks.ok((await maria.locator(".login-card").textContent()).includes("(member)"), "the card says who the link is for and as what");
  await fitsNarrow(maria, checks, "the invitation card");
  await screenshot(maria, "invitation");
  await maria.getByLabel("Password", { exact: true }).fill(MARIA.password);
  await maria.getByLabel("The same password again").fill(`${MARIA.password}!`);
  await maria.getByRole("button", { name: "Set password and sign in" }).click();
  const againError = maria.locator("#invite-password-again-error");
  await againError.waitFor();
  checks.equal(await againError.textContent(), "The two passwords are not the same.", "a mismatch is said under the second field");
  await maria.getByLabel("The same password again").fill(MARIA.password);
  await maria.getByRole("button", { name: "Set password and sign in" }).click();
  await sidebar(maria).waitFor();
  await maria.getByRole("heading", { name: `Welcome, ${MARIA.username}` }).waitFor();
  checks.ok(!maria.url().includes("/invite/"), "signed in, the link leaves the address bar", maria.url());
  checks.ok(true, "maria is signed in through her link");

  const spent = (await newStudioPage(browser, "spent link")).page;
  await spent.goto(url);
  await spent.getByRole("heading", { name: "This invitation link no longer works" }).waitFor();
  checks.ok(true, "the spent link says it no longer works");
  await spent.context().close();

  // --- 3. The admin grants use by name and adds a project in the app ------------
  await openApp(admin, APP);
  await admin.getByRole("button", { name: "Manage access" }).click();
  const access = admin.getByRole("region", { name: `Access to ${APP}` });
  await access.getByLabel("User name").fill(MARIA.username);
  await access.getByLabel("Access", { exact: true }).selectOption("use");
  await access.getByRole("button", { name: "Grant access" }).click();
  await access.getByRole("status").filter({ hasText: `${MARIA.username} now has use access.` }).waitFor();
  checks.ok(true, "the admin grants maria use by typing her name");
  await admin.getByRole("button", { name: "Hide access" }).click();
  await addProjectInApp(innerFrame(admin, APP), PROJECT);
  checks.ok(true, `the admin adds ${PROJECT} inside ${APP}`);

  // --- 4. maria logs hours on it --------------------------------------------------
  await maria.reload();
  await appLink(maria, APP).waitFor();
  await openApp(maria, APP);
  const week = await weekStartInApp(innerFrame(maria, APP));
  await logHoursInApp(innerFrame(maria, APP), PROJECT, "2");
  checks.ok(true, `maria logs 2 hours on ${PROJECT}`);
  console.log(`WEEK_START ${week}`);

  // --- 5. maria connects a client -------------------------------------------------
  await maria.getByRole("link", { name: "Connected clients" }).click();
  const clients = maria.locator(".connections-panel");
  await clients.getByRole("heading", { name: "Connect a client" }).waitFor();
  const mcpUrl = await clients.locator(".mcp-url").textContent();
  checks.equal(mcpUrl, `${STUDIO}/mcp`, "the page shows the MCP URL");
  checks.ok((await clients.locator("#setup-oauth").textContent()).includes(mcpUrl), "and the setup of a client that signs in");
  await clients.getByRole("button", { name: "Make token" }).click();
  const labelError = clients.locator("#token-label-error");
  await labelError.waitFor();
  checks.ok((await labelError.textContent()).startsWith("Name the token"), "a token without a name is refused under its field");
  await clients.getByLabel("Name", { exact: true }).fill("Laptop");
  await clients.getByRole("button", { name: "Make token" }).click();
  const setup = clients.locator("#setup-token");
  await setup.waitFor();
  const pasted = JSON.parse(await setup.textContent());
  checks.equal(pasted.mcpServers.sasha.url, mcpUrl, "the token's setup names the MCP URL");
  checks.ok(pasted.mcpServers.sasha.headers.Authorization.startsWith("Bearer sasha_at_"), "and carries the token");
  console.log(`SETUP ${JSON.stringify(pasted)}`);
  const laptop = clients.locator(".tokens-table tr").filter({ hasText: "Laptop" });
  await laptop.waitFor();
  checks.ok((await laptop.textContent()).includes("Not yet"), "the new token is listed, not yet used");
  checks.ok(!(await clients.locator(".tokens-table").textContent()).includes("sasha_at_"), "the list never shows a secret");
  await fitsNarrow(maria, checks, "Connected clients with a new token");
  await screenshot(maria, "connected-clients", clients.locator(".connect-section").first());

  await clients.getByLabel("Name", { exact: true }).fill("Old");
  await clients.getByRole("button", { name: "Make token" }).click();
  await waitFor("the Old token's setup", async () => (await setup.textContent().catch(() => "")).length > 0 && !(await setup.textContent()).includes(pasted.mcpServers.sasha.headers.Authorization));
  const old = JSON.parse(await clients.locator("#setup-token").textContent()).mcpServers.sasha.headers.Authorization.replace("Bearer ", "");
  await clients.getByRole("button", { name: "Revoke Old" }).click();
  await said(clients, "Old is revoked.");
  checks.equal(await clients.locator(".tokens-table tr").filter({ hasText: "Old" }).count(), 0, "a revoked token leaves the list");
  console.log(`REVOKED ${old}`);

  // --- 6. The admin's list, and removing someone ----------------------------------
  await openUsers(admin);
  await personRow(admin, MARIA.username).getByText("Active").waitFor();
  checks.ok(!(await personRow(admin, MARIA.username).textContent()).includes("Never"), "maria is active with a last sign-in");
  await invite(admin, "temp", "staff");
  await usersPanel(admin).getByLabel("Invitation link for temp", { exact: true }).waitFor();
  await personRow(admin, "temp").getByRole("button", { name: "Remove temp" }).click();
  await said(usersPanel(admin), "temp is removed");
  checks.equal(await personRow(admin, "temp").count(), 0, "a removed person leaves the list");
  await screenshot(admin, "users", usersPanel(admin));
}
