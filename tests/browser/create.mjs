// Studio's New app form end to end in real Chromium (issue 23, part 1): the
// real `sasha up` over an empty apps folder, driven by role and label.
//
//  1. the dev admin signs in to an empty Studio: the empty state and the
//     sidebar offer Create, whose "Start from a template" is the New app form;
//  2. the form suggests the id from the name, refuses an invalid id in place,
//     then creates a data app; the new app opens in the sandbox at once;
//  3. the app's own page adds a row through Sasha.data and lists it;
//  4. the same id again is refused with APP_CONFLICT, in the form;
//  5. a member sees no New app, the form's page says it needs an admin, and the API answers
//     APP_ACCESS_DENIED;
//  6. screenshots of the empty state, the form, the refusal and the created
//     app at 1440 and 375 px.
//
// Environment (set by tests/chromium/create.rs): CHROMIUM, STUDIO_URL,
// ADMIN_USER, ADMIN_PASSWORD, MEMBER_USER, MEMBER_PASSWORD, ARTIFACTS.
// BROWSER_CONSOLE=1 echoes the pages' console.

import fs from "node:fs";

import { Checks, env, launchChromium, runAndClose } from "./harness.mjs";
import { innerFrame, newStudioPage, screenshots, sidebar, signIn } from "./studio-page.mjs";

const started = Date.now();
const STUDIO = env("STUDIO_URL");
const ADMIN = { username: env("ADMIN_USER"), password: env("ADMIN_PASSWORD") };
const MEMBER = { username: env("MEMBER_USER"), password: env("MEMBER_PASSWORD") };
const ARTIFACTS = env("ARTIFACTS");
fs.mkdirSync(ARTIFACTS, { recursive: true });

const NAME = "Field notes";
const ID = "field-notes";

const checks = new Checks();
const taken = [];

const browser = await launchChromium();
await runAndClose(browser, run, taken);
console.log(`${checks.passed} checks passed in ${((Date.now() - started) / 1000).toFixed(1)} s; screenshots in ${ARTIFACTS}`);

function screenshot(page, name, subject = null) {
  return screenshots(page, ARTIFACTS, name, taken, subject);
}

/** The form's alert, once it says something. */
function formAlert(page) {
  return page.locator(".new-app-form").getByRole("alert");
}

async function run() {
  const { page } = await newStudioPage(browser, "admin");

  // --- 1. An empty Studio offers New app ------------------------------------
  await page.goto(`${STUDIO}/`);
  await signIn(page, ADMIN);
  await page.getByText(/^No apps yet — create one with Create/).waitFor();
  checks.ok(await sidebar(page).getByRole("button", { name: "Create", exact: true }).isVisible(), "the sidebar offers Create to the admin");
  checks.ok(await page.getByRole("main").getByRole("button", { name: "Create", exact: true }).isVisible(), "the empty state offers Create too");
  await screenshot(page, "empty-with-new-app");

  // --- 2. The form ----------------------------------------------------------
  await sidebar(page).getByRole("button", { name: "Create", exact: true }).click();
  await page.getByRole("heading", { name: "Create an app" }).waitFor();
  await page.getByRole("button", { name: "Start from a template" }).click();
  await page.getByRole("heading", { name: "New app" }).waitFor();
  checks.equal(page.url().endsWith("#/new"), true, "New app has its own route");
  const name = page.getByLabel("Name", { exact: true });
  const id = page.getByLabel("App id");
  const description = page.getByLabel("Description");
  checks.equal(await name.evaluate((input) => input === document.activeElement), true, "the form starts at the name");
  checks.equal(await name.getAttribute("maxlength"), "80", "the name's bound is the platform's");
  checks.equal(await description.getAttribute("maxlength"), "300", "the description's bound is the platform's");
  await name.fill(NAME);
  checks.equal(await id.inputValue(), ID, "the id is suggested from the name");
  await id.fill("Field Notes!");
  await description.fill("What we saw on site, one note per visit");
  await page.getByLabel("Keep records in a table").check();
  await page.getByRole("button", { name: "Create app" }).click();
  await formAlert(page).filter({ hasText: /lowercase letters/ }).waitFor();
  checks.equal(await id.getAttribute("aria-invalid"), "true", "an invalid id is refused in place, on its field");
  checks.equal(await id.evaluate((input) => input === document.activeElement), true, "the refused field has the focus");
  await screenshot(page, "new-app-refused-id", formAlert(page));
  await id.fill(ID);
  checks.ok(
    (await id.getAttribute("aria-invalid")) === null && (await formAlert(page).isHidden()),
    "editing the refused id clears its refusal",
  );
  await screenshot(page, "new-app-form");
  await page.getByRole("button", { name: "Create app" }).click();
  await page.getByText(`${NAME} is open.`).waitFor({ timeout: 20_000 });
  checks.ok(page.url().endsWith(`#/apps/${ID}`), "the new app opens once created", page.url());
  checks.ok(await sidebar(page).getByRole("link", { name: new RegExp(`^${NAME}`) }).isVisible(), "the sidebar lists the new app");
  await page.getByText("Version 0.1.0 · manage access").waitFor();
  checks.ok(true, "the creator manages the new app");

  // --- 3. Its own page stores a row -----------------------------------------
  const app = innerFrame(page, NAME);
  await app.getByRole("heading", { name: NAME }).waitFor();
  await app.getByText("No items yet. Add the first one above.").waitFor();
  await app.getByLabel("New item").fill("Fence post leaning at gate 3");
  await app.getByRole("button", { name: "Add" }).click();
  await app.getByRole("listitem").filter({ hasText: "Fence post leaning at gate 3" }).waitFor();
  checks.ok(await app.getByText("No items yet.").isHidden(), "the app lists the row it added through Sasha.data");
  await screenshot(page, "created-app");

  // --- 4. The same id again -------------------------------------------------
  await page.goto(`${STUDIO}/#/new`);
  await page.getByRole("heading", { name: "New app" }).waitFor();
  await page.getByLabel("Name", { exact: true }).fill("Field notes again");
  await page.getByLabel("App id").fill(ID);
  await page.getByLabel("Description").fill("A second try");
  await page.getByRole("button", { name: "Create app" }).click();
  await formAlert(page).filter({ hasText: /APP_CONFLICT/ }).waitFor();
  checks.ok(
    (await formAlert(page).textContent()).includes("already taken"),
    "a taken id is refused with its reason",
    await formAlert(page).textContent(),
  );
  checks.equal(await page.getByLabel("App id").getAttribute("aria-invalid"), "true", "the conflict points at the id");
  await screenshot(page, "new-app-conflict", formAlert(page));

  // --- 5. A member ----------------------------------------------------------
  const member = (await newStudioPage(browser, "member")).page;
  await member.goto(`${STUDIO}/`);
  await signIn(member, MEMBER);
  await member.getByText("No apps yet — ask an admin or staff member for access.").waitFor();
  checks.equal(await member.getByRole("button", { name: "New app" }).count(), 0, "a member is offered no New app");
  await member.goto(`${STUDIO}/#/new`);
  await member.getByRole("heading", { name: "New shared app needs an admin" }).waitFor();
  checks.equal(await member.getByRole("heading", { name: "New app" }).count(), 0, "the form refuses a member");
  const answer = await member.evaluate(async () => {
    const response = await fetch("/api/apps", {
      method: "POST",
      credentials: "same-origin",
      headers: { "Content-Type": "application/json" },
      body: JSON.stringify({ app: "member-app", name: "Mine", description: "Not allowed" }),
    });
    return { status: response.status, body: await response.json() };
  });
  checks.equal([answer.status, answer.body.code], [403, "APP_ACCESS_DENIED"], "the API refuses a member");
}
