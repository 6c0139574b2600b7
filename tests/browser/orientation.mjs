// The Studio's orientation, phone shell and consistency in real Chromium: the
// real `sasha up` over an empty apps folder, the dev admin and one member
// (made by the Rust test before anyone signs in), driven by role and label.
//
//  1. the admin's first sign-in: the getting-started checklist says what
//     Sasha is and ticks "Invite people" from the server (a member exists),
//     the rest to do; every page has its own title;
//  2. Create (the one entry) offers three paths: "Ask the assistant" opens the
//     assistant with a started message, "Write it myself" opens App Studio's
//     editor on a new app, "Start from a template" is the New app form, which
//     creates an app with a long unbroken description;
//  3. an ordinary launch of that app logs no console error, and neither the
//     app's page nor the home page scrolls sideways at 1440 or 390 px; the
//     checklist has ticked "Create an app" and "Open an app";
//  4. Escape closes the Withdraw panel (focus back on Withdraw…) and the
//     Delete panel of Withdrawn apps; doing something else closes them too;
//  5. at 390 px with the app open: the header is one short row, Menu reaches
//     Users, App Studio, Create and Withdrawn apps, and the assistant's Send
//     button is on screen;
//  6. the member's first sign-in: no checklist, the empty state points to App
//     Studio, the assistant and asking an admin; an admin page says it needs
//     an admin, at its own address;
//  7. no console error on a signed-out load nor in the member's whole visit;
//     screenshots of each step at 1440 and 390 px.
//
// Environment (set by tests/chromium/orientation.rs): CHROMIUM, STUDIO_URL,
// ADMIN_USER, ADMIN_PASSWORD, MEMBER_USER, MEMBER_PASSWORD, ARTIFACTS.

import fs from "node:fs";

import { Checks, env, launchChromium, runAndClose, waitFor } from "./harness.mjs";
import { WIDE, appLink, innerFrame, newStudioPage, sidebar, signIn } from "./studio-page.mjs";

const started = Date.now();
const STUDIO = env("STUDIO_URL");
const ADMIN = { username: env("ADMIN_USER"), password: env("ADMIN_PASSWORD") };
const MEMBER = { username: env("MEMBER_USER"), password: env("MEMBER_PASSWORD") };
const ARTIFACTS = env("ARTIFACTS");
fs.mkdirSync(ARTIFACTS, { recursive: true });

const PHONE = { width: 390, height: 844 };
const NAME = "Long notes";
const ID = "long-notes";
// One word longer than any screen: a pasted link or a code without spaces.
const LONG_DESCRIPTION = `Notes${"x".repeat(240)}end`;

const checks = new Checks();
const taken = [];

const browser = await launchChromium();
await runAndClose(browser, run, taken);
console.log(`${checks.passed} checks passed in ${((Date.now() - started) / 1000).toFixed(1)} s; screenshots in ${ARTIFACTS}`);

/** Two animation frames: the page has laid itself out at its new size. */
function laidOut(page) {
  return page.evaluate(() => new Promise((done) => requestAnimationFrame(() => requestAnimationFrame(done))));
}

/** How far the page scrolls sideways (0 when it does not), and what sticks out. */
function sideways(page) {
  return page.evaluate(() => {
    const client = document.documentElement.clientWidth;
    const out = [...document.querySelectorAll("body *")]
      .filter((element) => element.getBoundingClientRect().right > client + 1)
      .slice(0, 5)
      .map((element) => `${element.tagName.toLowerCase()}.${[...element.classList].join(".")}`);
    return { overflow: document.documentElement.scrollWidth - client, out };
  });
}

/** Screenshots at 1440 and 390 px, checking at both that nothing scrolls sideways. */
async function screenshot(page, name) {
  for (const size of [WIDE, PHONE]) {
    await page.setViewportSize(size);
    await laidOut(page);
    const measured = await sideways(page);
    checks.ok(measured.overflow <= 0, `${name}: no sideways scroll at ${size.width} px`, measured);
    const file = `${ARTIFACTS}/${name}-${size.width}x${size.height}.png`;
    await page.screenshot({ path: file });
    taken.push(file);
  }
  await page.setViewportSize(WIDE);
  await laidOut(page);
}

function step(page, id) {
  return page.locator(`.checklist-step[data-step="${id}"]`);
}

async function stepDone(page, id) {
  return (await step(page, id).getAttribute("data-done")) === "true";
}

async function run() {
  const { page } = await newStudioPage(browser, "admin");
  const errors = [];
  page.on("console", (message) => {
    if (message.type() === "error") {
      errors.push(message.text());
    }
  });

  // --- 1. The admin's first sign-in -----------------------------------------
  await page.goto(`${STUDIO}/`);
  await page.getByLabel("User name").waitFor();
  checks.equal(await page.title(), "Sign in — Sasha", "the sign-in page has its own title");
  checks.equal(errors, [], "a signed-out load logs no console error (no refused /api/me)");
  await signIn(page, ADMIN);
  const list = page.getByRole("region", { name: "Get started with Sasha" });
  await list.waitFor();
  checks.ok((await list.textContent()).includes("Sasha runs your team's small internal apps"), "the checklist says what Sasha is");
  checks.equal(await list.locator(".checklist-step").count(), 4, "four steps");
  for (const title of ["Invite people", "Connect a client", "Create an app", "Open an app"]) {
    checks.equal(await list.getByRole("heading", { name: title, exact: true }).count(), 1, `a step: ${title}`);
  }
  await waitFor("the invite step to tick from the server", () => stepDone(page, "invite"));
  checks.ok(true, "Invite people is done: a member exists");
  for (const id of ["connect", "create", "open"]) {
    checks.equal(await stepDone(page, id), false, `${id} is still to do`);
  }
  checks.equal(await page.title(), "Apps — Sasha", "the home page has its own title");
  await screenshot(page, "admin-first-run");

  // --- 2. Create: the three paths --------------------------------------------
  checks.equal(await sidebar(page).getByRole("button", { name: "New app" }).count(), 0, "the sidebar has no second New app");
  await sidebar(page).getByRole("button", { name: "Create", exact: true }).click();
  const create = page.getByRole("region", { name: "Create an app" });
  await create.getByRole("heading", { name: "Create an app", level: 1 }).waitFor();
  checks.ok(page.url().endsWith("#/create"), "Create has its own address", page.url());
  checks.equal(await page.title(), "Create an app — Sasha", "and its own title");
  checks.equal(await create.locator(".create-option").count(), 3, "three ways to a new app");
  await screenshot(page, "create");

  await create.getByRole("button", { name: "Ask the assistant" }).click();
  const assistant = page.getByRole("complementary", { name: "Assistant" });
  await assistant.waitFor();
  checks.ok((await page.locator("#assistant-prompt").inputValue()).startsWith("I'd like an app that"), "Ask the assistant opens it with a started message");
  await page.getByRole("button", { name: "Assistant", exact: true }).click();
  await assistant.waitFor({ state: "hidden" });

  await create.getByRole("button", { name: "Write it myself" }).click();
  await page.locator("#studio-editor-heading").getByText("New app").waitFor();
  checks.ok(page.url().endsWith("#/create/studio"), "Write it myself opens App Studio's editor on a new app", page.url());
  checks.equal(await page.title(), "App Studio — Sasha", "App Studio has its own title");

  await page.goto(`${STUDIO}/#/create`);
  await create.getByRole("button", { name: "Start from a template" }).click();
  await page.getByRole("heading", { name: "New app", level: 1 }).waitFor();
  checks.ok(page.url().endsWith("#/new"), "Start from a template is the New app form", page.url());
  await page.getByLabel("Name", { exact: true }).fill(NAME);
  await page.getByLabel("Description").fill(LONG_DESCRIPTION);
  await page.getByRole("button", { name: "Create app" }).click();
  await page.getByText(`${NAME} is open.`).waitFor({ timeout: 20_000 });

  // --- 3. An ordinary launch: no console error, no sideways scroll -----------
  await sidebar(page).getByRole("button", { name: "App Studio" }).click();
  await page.getByRole("heading", { name: "App Studio", level: 1 }).waitFor();
  errors.length = 0;
  await appLink(page, NAME).click();
  await page.getByText(`${NAME} is open.`).waitFor({ timeout: 20_000 });
  await innerFrame(page, NAME).getByRole("heading", { name: NAME }).waitFor();
  checks.equal(errors, [], "an ordinary app launch logs no console error");
  checks.equal(await page.title(), `${NAME} — Sasha`, "the open app names the tab");
  await screenshot(page, "long-description");
  await page.goto(`${STUDIO}/#/`);
  await list.waitFor();
  await waitFor("the create and open steps to tick", async () => (await stepDone(page, "create")) && (await stepDone(page, "open")));
  checks.ok(true, "Create an app and Open an app are done");
  await screenshot(page, "admin-checklist-ticked");

  // --- 4. Escape and other work close the destructive panels ----------------
  await appLink(page, NAME).click();
  await page.getByText(`${NAME} is open.`).waitFor({ timeout: 20_000 });
  const withdraw = page.getByRole("button", { name: "Withdraw…", exact: true });
  const withdrawPanel = page.getByRole("region", { name: `Withdraw ${NAME}?` });
  await withdraw.click();
  await withdrawPanel.waitFor();
  await page.keyboard.press("Escape");
  await withdrawPanel.waitFor({ state: "detached" });
  checks.ok(await withdraw.evaluate((button) => button === document.activeElement), "Escape closes Withdraw and gives the focus back to Withdraw…");
  checks.equal(await withdraw.getAttribute("aria-expanded"), "false", "Withdraw… says it is closed");
  await withdraw.click();
  await withdrawPanel.waitFor();
  await page.getByRole("button", { name: "Manage access" }).click();
  await withdrawPanel.waitFor({ state: "detached" });
  checks.ok(true, "opening Manage access closes the Withdraw panel");
  await page.getByRole("button", { name: "Hide access" }).click();
  await withdraw.click();
  await withdrawPanel.getByRole("button", { name: "Yes, withdraw" }).click();
  const withdrawn = page.locator(".withdrawn-panel");
  await withdrawn.getByRole("heading", { name: "Withdrawn apps", level: 1 }).waitFor({ timeout: 20_000 });
  checks.equal(await page.title(), "Withdrawn apps — Sasha", "Withdrawn apps has its own title");
  const item = withdrawn.locator(`.withdrawn-item[data-app="${ID}"]`);
  const remove = item.getByRole("button", { name: `Delete ${NAME}…` });
  const deleteHeading = item.getByRole("heading", { name: `Delete ${NAME}?` });
  await remove.click();
  await deleteHeading.waitFor();
  await page.keyboard.press("Escape");
  await deleteHeading.waitFor({ state: "detached" });
  checks.ok(await remove.evaluate((button) => button === document.activeElement), "Escape closes Delete and gives the focus back to Delete…");
  await remove.click();
  await deleteHeading.waitFor();
  await withdrawn.getByRole("heading", { name: "Withdrawn apps", level: 1 }).click();
  await deleteHeading.waitFor({ state: "detached" });
  checks.ok(true, "a click elsewhere closes the Delete panel");
  await item.getByRole("button", { name: `Restore ${NAME}` }).click();
  await appLink(page, NAME).waitFor({ timeout: 20_000 });

  // --- 5. A phone with the app open -----------------------------------------
  await page.setViewportSize(PHONE);
  await page.goto(`${STUDIO}/#/apps/${ID}`);
  await page.getByText(`${NAME} is open.`).waitFor({ timeout: 20_000 });
  const header = await page.locator(".topbar").boundingBox();
  checks.ok(header.height <= PHONE.height * 0.08, "the phone header is one short row (at most 8 % of the screen)", header);
  const menu = page.getByRole("button", { name: "Menu" });
  // The open app chosen again from the menu: nothing to load, the menu closes all the same.
  await menu.click();
  await appLink(page, NAME).click();
  checks.equal(await menu.getAttribute("aria-expanded"), "false", "choosing the page already shown closes the menu");
  await menu.click();
  const nav = sidebar(page);
  for (const name of ["Users", "App Studio", "Create", "Withdrawn apps"]) {
    checks.ok(await nav.getByRole("button", { name, exact: true }).isVisible(), `with an app open, the menu reaches ${name}`);
  }
  checks.ok(await nav.getByRole("link", { name: "Connected clients" }).isVisible(), "and Connected clients");
  const file = `${ARTIFACTS}/phone-menu-390x844.png`;
  await page.screenshot({ path: file });
  taken.push(file);
  await nav.getByRole("button", { name: "Users", exact: true }).click();
  await page.getByRole("heading", { name: "Users", level: 1 }).waitFor();
  checks.equal(await menu.getAttribute("aria-expanded"), "false", "choosing a page closes the menu");
  await page.getByRole("button", { name: "Assistant", exact: true }).click();
  await assistant.waitFor();
  await assistant.getByRole("button", { name: "Send" }).waitFor();
  const send = await assistant.getByRole("button", { name: "Send" }).boundingBox();
  checks.ok(send && send.y >= 0 && send.y + send.height <= PHONE.height, "the assistant's Send button is on screen at 390 px", send);
  const phoneAssistant = `${ARTIFACTS}/phone-assistant-390x844.png`;
  await page.screenshot({ path: phoneAssistant });
  taken.push(phoneAssistant);
  await page.setViewportSize(WIDE);

  // --- 6. The member's first sign-in ----------------------------------------
  const member = (await newStudioPage(browser, "member")).page;
  const memberErrors = [];
  member.on("console", (message) => {
    if (message.type() === "error") {
      memberErrors.push(message.text());
    }
  });
  await member.goto(`${STUDIO}/`);
  await signIn(member, MEMBER);
  await member.getByRole("heading", { name: `Welcome, ${MEMBER.username}` }).waitFor();
  checks.equal(await member.locator(".checklist").count(), 0, "a member has no admin checklist");
  await member.getByText("No apps yet — ask an admin or staff member for access.").waitFor();
  const pointers = member.getByRole("region", { name: "What you can do now" });
  checks.ok(await pointers.getByRole("button", { name: "Open App Studio" }).isVisible(), "the empty state points to App Studio");
  checks.ok(await pointers.getByRole("button", { name: "Open the assistant" }).isVisible(), "and to the assistant");
  checks.ok((await pointers.textContent()).includes("Ask an admin or staff member"), "and to asking an admin");
  await screenshot(member, "member-first-run");
  await pointers.getByRole("button", { name: "Open App Studio" }).click();
  await member.getByRole("heading", { name: "App Studio", level: 1 }).waitFor();
  checks.ok(true, "Open App Studio opens it");

  for (const [hash, title] of [
    ["#/users", "Users"],
    ["#/withdrawn", "Withdrawn apps"],
  ]) {
    await member.goto(`${STUDIO}/${hash}`);
    await member.getByRole("heading", { name: `${title} needs an admin`, level: 1 }).waitFor();
    checks.ok(member.url().endsWith(hash), `a member on ${hash} stays at its address`, member.url());
    checks.equal(await member.title(), `${title} needs an admin — Sasha`, `and the tab says so`);
  }
  await screenshot(member, "member-needs-admin");
  checks.equal(memberErrors, [], "the member's whole first visit logs no console error");
}
