// Time Sheet Entry end to end in real Chromium (issues 9 and 28): the bundled
// app package (apps/time-sheet-entry), seeded by the real `sasha up`, used by
// role and label, as people would. The browser's (and so the host context's)
// locale is en-GB: dates are shown and typed dd/mm/yyyy and stored ISO.
//
//  1. sign in as the dev admin; the recovery panel of the new app has no
//     projects yet; the app's own view opens on its first run: "No projects
//     yet" with an inline "Add your first project" form;
//  2. a member sees no apps (and no recovery, and no data tools) until the
//     admin grants `use` in the access panel; then the member's first run
//     says to ask a manager and offers no project controls;
//  3. the admin keeps the projects inside the app: an empty name and a
//     duplicate are refused next to the field (one only the server can know
//     about, added elsewhere a moment before, is mapped from the error's
//     details), then three projects are added and one is renamed;
//  4. the recovery panel still works on the same governed rows: the in-app
//     rename is in the row's history; a duplicate name is refused; an edit
//     made elsewhere first makes the panel's stale save a conflict it shows,
//     never an overwrite; a delete asks first; a CSV with a duplicate name
//     imports nothing and names its row, a good one adds its rows, and
//     Export CSV downloads them all;
//  5. back in the app's view, log hours on three days of the shown week
//     through the form (the app-only log-hours action); per-day and
//     per-project totals follow; bad hours and bad dates are refused next to
//     their fields and nothing is logged;
//  6. edit entries in place: one's hours; another's date, project, hours and
//     note at once (bad values refused next to the row's fields first);
//  7. a second browser context (same user) changes an entry first; the first
//     context's stale save gets the conflict message and the reloaded value,
//     never an overwrite;
//  8. delete one entry after confirming in the app's own dialog;
//  9. retire a project: it leaves the picker for new hours, and the entry
//     logged against it keeps its name, in the row and in the totals;
// 10. the member, back in the app, sees none of the admin's entries and no
//     project controls, logs their own, and still has no recovery; the
//     admin, who manages the app (entries: managersReadAll), then sees the
//     team's week;
// 11. no horizontal scroll at 375 or 390 px, in the Studio page and in the
//     app's own view; screenshots at 1440 and 390 px wide;
// 12. print the UI's totals (`UI_TOTALS {json}` for the admin, `MEMBER_TOTALS`
//     for the member) for the Rust test to compare with
//     app__time_sheet_entry__weekly_project_totals read by the MCP SDK client.
//
// Environment (set by tests/chromium/timesheet.rs): CHROMIUM, STUDIO_URL,
// ADMIN_USER, ADMIN_PASSWORD, MEMBER_USER, MEMBER_PASSWORD, MEMBER_ID,
// ARTIFACTS. BROWSER_CONSOLE=1 echoes the console.

import fs from "node:fs";

import { Checks, env, launchChromium, runAndClose, waitFor } from "./harness.mjs";
import { appLink, callTool, fitsNarrow, innerFrame, openApp, outerFrame, sidebar, signIn, WIDE } from "./studio-page.mjs";

const started = Date.now();
const STUDIO = env("STUDIO_URL");
const ADMIN = { username: env("ADMIN_USER"), password: env("ADMIN_PASSWORD") };
const MEMBER = { username: env("MEMBER_USER"), password: env("MEMBER_PASSWORD"), id: env("MEMBER_ID") };
const ARTIFACTS = env("ARTIFACTS");
fs.mkdirSync(ARTIFACTS, { recursive: true });

const APP = "Time Sheet Entry";
const APP_ID = "time-sheet-entry";
const CONFLICT = "This entry changed elsewhere; reloaded the latest values — apply your change again.";
const HOURS_RULE = "Hours must be between 0.25 and 24.";
/** The screenshot sizes: desktop and the commonest phone width. */
const SHOT_SIZES = [WIDE, { width: 390, height: 844 }];

const checks = new Checks();
const timings = {};
const taken = [];

const browser = await launchChromium();
await runAndClose(browser, run, taken);
console.log(`timings ${JSON.stringify(timings)}`);
console.log(`${checks.passed} checks passed in ${((Date.now() - started) / 1000).toFixed(1)} s; screenshots in ${ARTIFACTS}`);

// ---------------------------------------------------------------------------
// Helpers

async function studioPage(label, user = ADMIN) {
  const context = await browser.newContext({ viewport: WIDE, locale: "en-GB", timezoneId: "Europe/London" });
  const page = await context.newPage();
  page.setDefaultTimeout(10_000);
  const record = { page, dialogs: [] };
  page.on("console", (message) => {
    if (process.env.BROWSER_CONSOLE) {
      console.log(`  [${label} console ${message.type()}] ${message.text()}`);
    }
  });
  page.on("pageerror", (error) => console.log(`  [${label} page error] ${error.message}`));
  // Native dialogs are recorded (the app must not need any) and accepted.
  page.on("dialog", (dialog) => {
    record.dialogs.push(dialog.message());
    dialog.accept().catch(() => {});
  });
  await page.goto(`${STUDIO}/`);
  await signIn(page, user);
  return record;
}

function view(page) {
  return innerFrame(page, APP);
}

async function openTimesheet(page) {
  await openApp(page, APP);
  const app = view(page);
  await app.getByRole("heading", { name: APP }).waitFor();
  return app;
}

/** Two animation frames: the page has laid itself out at its new size. */
function laidOut(page) {
  return page.evaluate(() => new Promise((done) => requestAnimationFrame(() => requestAnimationFrame(done))));
}

/**
 * Waits until the app's frame is tall enough for its content (the view
 * reports its height and the host resizes the frame, up to 1200 px; a taller
 * view scrolls inside it).
 */
async function frameSettled(page) {
  await laidOut(page);
  if ((await outerFrame(page, APP).count()) === 0) {
    return; // the view is closed (recovery is open)
  }
  let last = null;
  try {
    await waitFor(
      "the app's frame to fit its content",
      async () => {
        last = await view(page)
          .locator("html")
          .evaluate(() => new Promise((done) => requestAnimationFrame(() => done({ content: document.documentElement.scrollHeight, frame: window.innerHeight }))))
          .catch(() => null);
        return last && (last.content <= last.frame + 2 || last.frame >= 1190);
      },
      5_000,
    );
  } catch (error) {
    throw new Error(`${error.message}: ${JSON.stringify(last)}`);
  }
}

/** Screenshots at 1440 and 390 px wide (scrolled so `subject` is in view), then back to the wide view. */
async function screenshot(page, name, subject = null) {
  for (const size of SHOT_SIZES) {
    await page.setViewportSize(size);
    await frameSettled(page);
    if (subject) {
      await subject.scrollIntoViewIfNeeded();
    }
    const file = `${ARTIFACTS}/${name}-${size.width}x${size.height}.png`;
    await page.screenshot({ path: file });
    taken.push(file);
  }
  await page.setViewportSize(WIDE);
  await frameSettled(page);
}

/** At 375 and 390 px neither the Studio page nor the app's own view scrolls sideways, nor does any box inside the view. */
async function viewFitsNarrow(page, what) {
  for (const width of [375, 390]) {
    await page.setViewportSize({ width, height: 812 });
    await frameSettled(page);
    const widths = await view(page)
      .locator("html")
      .evaluate(() => {
        const client = document.documentElement.clientWidth;
        const name = (element) => `${element.tagName.toLowerCase()}${element.id ? `#${element.id}` : ""}${element.classList.length ? `.${[...element.classList].join(".")}` : ""}`;
        const sticking = [...document.querySelectorAll("body *")].filter((element) => element.getBoundingClientRect().right > client + 1).map(name);
        const scrolling = [...document.querySelectorAll("body *")]
          .filter((element) => ["auto", "scroll"].includes(getComputedStyle(element).overflowX) && element.scrollWidth > element.clientWidth + 1)
          .map(name);
        return { scroll: document.documentElement.scrollWidth, client, sticking: sticking.slice(0, 5), scrolling: scrolling.slice(0, 5) };
      });
    checks.ok(
      widths.scroll <= widths.client && widths.sticking.length === 0 && widths.scrolling.length === 0,
      `${what}: the app's view has no horizontal scroll at ${width} px`,
      widths,
    );
  }
  await fitsNarrow(page, checks, what);
}

/** A totals table's rows as {label: hours}. */
async function totals(app, title) {
  const table = app.getByRole("table", { name: title });
  const rows = await table.locator("tbody tr").evaluateAll((trs) =>
    trs.map((tr) => [tr.querySelector("th").textContent.trim(), Number(tr.querySelector("td").textContent)]),
  );
  return Object.fromEntries(rows);
}

function addDays(text, days) {
  const date = new Date(`${text}T00:00:00Z`);
  date.setUTCDate(date.getUTCDate() + days);
  return date.toISOString().slice(0, 10);
}

/** An ISO day as en-GB types it: dd/mm/yyyy. */
function ukDate(iso) {
  const [year, month, day] = iso.split("-");
  return `${day}/${month}/${year}`;
}

/** An entry row's fields, found by the labels of the project and day it was saved with. */
function entryField(app, role, what, project, dayPrefix) {
  return app.getByRole(role, { name: new RegExp(`^${what} ${project} on ${dayPrefix}`) });
}
function hoursInput(app, project, day) {
  return entryField(app, "spinbutton", "Hours for", project, day);
}
function dateInput(app, project, day) {
  return entryField(app, "textbox", "Date for", project, day);
}
function projectSelect(app, project, day) {
  return entryField(app, "combobox", "Project for", project, day);
}
function noteInput(app, project, day) {
  return entryField(app, "textbox", "Note for", project, day);
}
function saveButton(app, project, day) {
  return entryField(app, "button", "Save changes to", project, day);
}

/**
 * The error a field shows: its text when the field is aria-invalid and
 * describes itself by a visible error right under it (same wrapper, within
 * a line below its bottom edge); null otherwise.
 */
async function fieldError(field) {
  return field.evaluate((input) => {
    if (input.getAttribute("aria-invalid") !== "true") {
      return null;
    }
    const ids = (input.getAttribute("aria-describedby") || "").split(/\s+/).filter(Boolean);
    const box = input.getBoundingClientRect();
    const errors = ids
      .map((id) => document.getElementById(id))
      .filter((element) => element && !element.hidden && element.classList.contains("field-error") && element.textContent.trim());
    const beside = errors.filter((element) => {
      const at = element.getBoundingClientRect();
      return element.parentElement === input.parentElement && at.top >= box.bottom - 1 && at.top - box.bottom < 40 && at.left < box.right && at.right > box.left;
    });
    return beside.length ? beside.map((element) => element.textContent.trim()).join(" ") : null;
  });
}

/** Waits for a field's error and answers its text. */
function waitForFieldError(what, field) {
  return waitFor(`an error next to ${what}`, () => fieldError(field), 5_000);
}

/** The options of a select, as their labels. */
function optionLabels(select) {
  return select.locator("option").allTextContents();
}

/** The projects as the governed list tool answers (the app-view path from this page): {name: row}. */
async function projectRowsByName(page) {
  const listed = await callTool(page, APP_ID, "app__time_sheet_entry__projects__list", { limit: 200 });
  const rows = listed.message?.result?.structuredContent?.rows;
  checks.ok(Array.isArray(rows), "the projects list tool answers rows", listed);
  return Object.fromEntries(rows.map((row) => [row.name, row]));
}

// ---------------------------------------------------------------------------

async function run() {
  let at = Date.now();
  const admin = await studioPage("admin");
  const page = admin.page;
  timings.signIn = Date.now() - at;

  // --- 1. A new app: no projects in recovery, the app's first run ----------
  at = Date.now();
  await appLink(page, APP).click();
  await page.getByText(`${APP} is open.`).waitFor();
  await page.getByRole("button", { name: "Recovery" }).click();
  let recovery = page.getByRole("region", { name: `Recovery: ${APP}` });
  await recovery.waitFor();
  checks.ok(await page.getByText(`${APP}'s own view is closed while recovery is open.`).isVisible(), "recovery opens with the app's own view closed");
  let projectsGrid = recovery.getByRole("region", { name: "projects", exact: true });
  let entriesGrid = recovery.getByRole("region", { name: "entries", exact: true });
  await projectsGrid.getByText("No rows in projects that you can see.").waitFor();
  checks.ok(await entriesGrid.getByText("every owner's rows (created_by)").isVisible(), "the entries grid says a manager sees every owner's rows (managersReadAll)");
  checks.equal(
    await entriesGrid.locator("form label").allTextContents(),
    ["date (required)", "project (required)", "hours (required)", "note"],
    "the entries form offers the writable fields, required ones marked; id and the owner field are not editable",
  );
  await page.getByRole("button", { name: "Back to the app" }).click();
  await page.getByText(`${APP} is open.`).waitFor();
  const app = view(page);
  await app.getByRole("heading", { name: APP }).waitFor();
  await app.getByRole("heading", { name: "No projects yet" }).waitFor();
  const firstName = app.getByLabel("Project name", { exact: true });
  const firstAdd = app.getByRole("button", { name: "Add your first project" });
  await firstAdd.waitFor();
  checks.ok(await firstName.isVisible(), "a manager's first run offers an inline form to add the first project, right in the empty state");
  checks.equal(await app.getByRole("region", { name: "Log hours" }).count(), 0, "there is nothing to log hours against yet, so no log form");
  checks.equal(await app.getByRole("region", { name: "Projects", exact: true }).count(), 0, "the projects list waits for the first project");
  await screenshot(page, "first-run-manager", app.getByRole("heading", { name: "No projects yet" }));
  timings.firstRun = Date.now() - at;

  // --- 2. A member: nothing until granted use, then a first run without controls
  at = Date.now();
  const member = await studioPage("member", MEMBER);
  const memberPage = member.page;
  await memberPage.getByText("No apps yet — ask an admin or staff member for access.").waitFor();
  checks.equal(await appLink(memberPage, APP).count(), 0, "a member without a grant sees no Time Sheet Entry");
  const refusedRecovery = await memberPage.evaluate(async () => (await fetch("/api/apps/time-sheet-entry/recovery")).status);
  checks.equal(refusedRecovery, 404, "a member without a grant gets the hidden 404 for the recovery descriptor");
  const refusedList = await callTool(memberPage, APP_ID, "app__time_sheet_entry__entries__list", {});
  checks.ok(
    refusedList.status !== 200 || refusedList.message?.error || refusedList.message?.result?.isError === true,
    "a member without a grant cannot list entries through /mcp",
    refusedList,
  );

  // The panel's list of everyone answers only after the admin has pressed
  // Grant access, as it can on a loaded server: the name is looked up once
  // it is there, never refused as unknown meanwhile.
  const isUserList = (url) => new URL(url).pathname === "/api/users";
  let releaseUsers;
  const usersHeld = new Promise((resolve) => {
    releaseUsers = resolve;
  });
  await page.route(isUserList, async (route) => {
    const response = await route.fetch();
    await usersHeld;
    await route.fulfill({ response });
  });
  await page.getByRole("button", { name: "Manage access" }).click();
  const accessPanel = page.getByRole("region", { name: `Access to ${APP}` });
  await accessPanel.getByLabel("User name").fill(MEMBER.username);
  await accessPanel.getByLabel("Access", { exact: true }).selectOption("use");
  await accessPanel.getByRole("button", { name: "Grant access" }).click();
  releaseUsers();
  await accessPanel.getByRole("status").filter({ hasText: `${MEMBER.username} now has use access.` }).waitFor();
  await page.unroute(isUserList);
  checks.ok(await accessPanel.getByRole("alert").isHidden(), "a name submitted before the list of everyone arrives is not refused as unknown");
  checks.ok(true, "the admin grants the member use in the access panel");
  await page.getByRole("button", { name: "Hide access" }).click();

  await memberPage.reload();
  await sidebar(memberPage).waitFor();
  await appLink(memberPage, APP).waitFor();
  let memberApp = await openTimesheet(memberPage);
  await memberApp.getByRole("heading", { name: "No projects yet" }).waitFor();
  checks.ok(
    await memberApp.getByText("only a manager of this app can add them. Ask a manager to add the projects you work on.").isVisible(),
    "the member's empty state says plainly to ask a manager",
  );
  checks.equal(await memberApp.getByRole("button", { name: "Add your first project" }).count(), 0, "the member is offered no form to add a project");
  checks.equal(await memberApp.getByRole("region", { name: "Projects", exact: true }).count(), 0, "the member sees no projects list to manage");
  checks.equal(await memberPage.getByRole("button", { name: "Recovery" }).count(), 0, "use access offers no recovery panel");
  const stillRefused = await memberPage.evaluate(async () => (await fetch("/api/apps/time-sheet-entry/recovery")).status);
  checks.equal(stillRefused, 404, "use access is not enough for the recovery descriptor (manage is)");
  for (const [page, what] of [
    ["recovery", "Recovery"],
    ["history", "History"],
  ]) {
    await memberPage.goto(`${STUDIO}/#/apps/${APP_ID}/${page}`);
    const said = memberPage.locator(".shell-alert, [role=alert]").filter({ hasText: `${what} of` });
    await said.first().waitFor({ timeout: 10_000 });
    checks.ok(
      (await said.first().textContent()).includes("is for the people who manage it"),
      `a member at the app's ${page} address is told it is for its managers, not silently shown the app`,
    );
    await view(memberPage).getByRole("heading", { name: "No projects yet" }).waitFor();
  }
  await memberPage.goto(`${STUDIO}/#/apps/${APP_ID}`);
  memberApp = await openTimesheet(memberPage);
  await screenshot(memberPage, "first-run-member", memberApp.getByRole("heading", { name: "No projects yet" }));
  timings.memberFirstRun = Date.now() - at;

  // --- 3. The admin keeps the projects inside the app -----------------------
  at = Date.now();
  await firstAdd.click();
  checks.equal(await waitForFieldError("the first project's name", firstName), "Enter a project name.", "an empty name is refused next to its field, before anything is sent");
  await firstName.fill("Apollo");
  checks.equal(await fieldError(firstName), null, "typing clears the field's error");
  await firstAdd.click();
  await app.getByRole("status").filter({ hasText: "Added the project Apollo." }).waitFor();
  const logRegion = app.getByRole("region", { name: "Log hours" });
  await logRegion.waitFor();
  checks.equal(await app.getByRole("heading", { name: "No projects yet" }).count(), 0, "the empty state gives way to the log form once there is a project");
  checks.ok(await app.getByLabel("Date", { exact: true }).evaluate((input) => input === document.activeElement), "focus moves on to the log form's first field");
  const projectsPanel = app.getByRole("region", { name: "Projects", exact: true });
  const openList = projectsPanel.getByRole("list", { name: "Open" });
  await openList.getByText("Apollo", { exact: true }).waitFor();
  const newName = projectsPanel.getByLabel("New project", { exact: true });
  const addProject = projectsPanel.getByRole("button", { name: "Add project", exact: true });
  for (const name of ["Borealis", "Cygnus"]) {
    await newName.fill(name);
    await addProject.click();
    await app.getByRole("status").filter({ hasText: `Added the project ${name}.` }).waitFor();
    await openList.getByText(name, { exact: true }).waitFor();
  }
  checks.equal(await openList.locator(":scope > li").count(), 3, "three projects are added inside the app");
  checks.equal(await optionLabels(app.getByLabel("Project", { exact: true })), ["Apollo", "Borealis", "Cygnus"], "the log form's picker offers them, by name");

  await newName.fill("apollo");
  await addProject.click();
  checks.equal(await waitForFieldError("the new project's name", newName), "There is already a project called Apollo.", "a duplicate name (any case) is refused next to its field");
  checks.equal(await openList.locator(":scope > li").count(), 3, "the refused duplicate adds nothing");

  // A name only the server knows is taken: someone adds it a moment before.
  const elsewhereCreate = await callTool(page, APP_ID, "app__time_sheet_entry__projects__create", { values: { name: "Draco" } });
  checks.ok(elsewhereCreate.message?.result?.isError !== true, "another caller adds the project Draco first", elsewhereCreate);
  await newName.fill("Draco");
  await addProject.click();
  checks.equal(
    await waitForFieldError("the new project's name", newName),
    "There is already a project called Draco.",
    "the server's refusal (APP_CONFLICT, details naming the field name) is shown next to that field",
  );
  await openList.getByText("Draco", { exact: true }).waitFor();
  checks.ok(true, "the list is read again and shows the project added elsewhere");
  await newName.fill("");

  await projectsPanel.getByRole("button", { name: "Rename Cygnus" }).click();
  const renameCygnus = projectsPanel.getByLabel("New name for Cygnus");
  // The app moves the focus once it has drawn the field (and the frame has
  // taken the new height): waited for, not read at once.
  checks.ok(await waitFor("the rename field to take the focus", () => renameCygnus.evaluate((input) => input === document.activeElement).catch(() => false), 5_000), "Rename opens an inline field with the focus in it");
  await renameCygnus.fill("Borealis");
  await projectsPanel.getByRole("button", { name: "Save name" }).click();
  checks.equal(await waitForFieldError("the new name", renameCygnus), "There is already a project called Borealis.", "renaming to a taken name is refused next to the field");
  await renameCygnus.fill("Cygnus I");
  await projectsPanel.getByRole("button", { name: "Save name" }).click();
  await app.getByRole("status").filter({ hasText: "Renamed Cygnus to Cygnus I." }).waitFor();
  await openList.getByText("Cygnus I", { exact: true }).waitFor();
  checks.ok(await projectsPanel.getByRole("button", { name: "Rename Cygnus I" }).evaluate((button) => button === document.activeElement), "after the rename the focus is back on the project's Rename button");
  checks.equal(await optionLabels(app.getByLabel("Project", { exact: true })), ["Apollo", "Borealis", "Cygnus I", "Draco"], "the picker follows the rename");
  await screenshot(page, "projects", projectsPanel);
  timings.projects = Date.now() - at;

  // --- 4. The recovery panel on the same governed rows ----------------------
  at = Date.now();
  await page.getByRole("button", { name: "Recovery" }).click();
  recovery = page.getByRole("region", { name: `Recovery: ${APP}` });
  await recovery.waitFor();
  const recoveryStatus = recovery.getByRole("status");
  const recoveryAlert = recovery.getByRole("alert");
  projectsGrid = recovery.getByRole("region", { name: "projects", exact: true });
  const projectRows = projectsGrid.getByRole("table", { name: "Rows of projects" }).locator("tbody tr");
  await projectRows.filter({ hasText: "Cygnus I" }).waitFor();
  checks.equal(await projectRows.count(), 4, "the recovery grid lists the four projects kept in the app");
  let ids = Object.fromEntries(Object.entries(await projectRowsByName(page)).map(([name, row]) => [name, row.id]));
  const renamed = `projects row ${ids["Cygnus I"]}`;
  await projectsGrid.getByRole("button", { name: `History of ${renamed}` }).click();
  const renamedHistory = projectsGrid.getByRole("list", { name: `History of ${renamed}` });
  await renamedHistory.waitFor();
  checks.ok(
    (await renamedHistory.locator(":scope > li").nth(1).textContent()).includes("name: Cygnus → Cygnus I"),
    "the in-app rename went through the governed path: its row's history has the name before and after",
    await renamedHistory.textContent(),
  );
  await projectsGrid.getByRole("button", { name: "Close history" }).click();

  await projectsGrid.getByLabel("name (required)").fill("Lyra");
  await projectsGrid.getByRole("button", { name: "Add to projects" }).click();
  await recoveryStatus.filter({ hasText: /^Added projects row \d+\.$/ }).waitFor();
  const lyraId = Number(/row (\d+)/.exec(await recoveryStatus.textContent())[1]);
  await projectRows.filter({ hasText: "Lyra" }).waitFor();
  checks.ok(Number.isInteger(lyraId), "a project added in the recovery panel has its id announced", lyraId);
  checks.equal(await projectRows.count(), 5, "five projects");
  await fitsNarrow(page, checks, "the recovery grid with rows");

  await projectsGrid.getByLabel("name (required)").fill("Apollo");
  await projectsGrid.getByRole("button", { name: "Add to projects" }).click();
  await recoveryAlert.filter({ hasText: "APP_CONFLICT" }).waitFor();
  checks.ok(/name must be unique/i.test(await recoveryAlert.textContent()), "a duplicate project name is refused, naming the field and the rule", await recoveryAlert.textContent());
  checks.equal(await projectRows.count(), 5, "the refused duplicate adds nothing");

  await projectsGrid.getByLabel("name (required)").fill("");
  await projectsGrid.getByRole("button", { name: "Add to projects" }).click();
  await recoveryAlert.filter({ hasText: "name is required." }).waitFor();
  checks.ok(true, "an empty required field is refused before anything is sent");

  const lyra = `projects row ${lyraId}`;
  await projectsGrid.getByRole("button", { name: `Edit ${lyra}` }).click();
  await projectsGrid.getByLabel(`name of ${lyra}`).fill("Lyra I");
  await projectsGrid.getByRole("button", { name: "Save" }).click();
  await recoveryStatus.filter({ hasText: `Saved ${lyra}.` }).waitFor();
  const lyraRow = projectRows.filter({ hasText: "Lyra" });
  checks.equal(await lyraRow.locator(".recovery-version").textContent(), "2", "an edit in the panel moves the row to version 2");

  // The row's history: its create and the edit, with the value before and after.
  await projectsGrid.getByRole("button", { name: `History of ${lyra}` }).click();
  const lyraHistory = projectsGrid.getByRole("list", { name: `History of ${lyra}` });
  await lyraHistory.waitFor();
  const historyItems = lyraHistory.locator(":scope > li");
  checks.equal(await historyItems.count(), 2, "the history lists the create and the edit");
  checks.ok(/^create .* via ui/.test(await historyItems.nth(0).textContent()), "the first entry is the create, from the Studio page", await historyItems.nth(0).textContent());
  checks.ok((await historyItems.nth(1).textContent()).includes("name: Lyra → Lyra I"), "the edit shows the name before and after", await historyItems.nth(1).textContent());
  await projectsGrid.getByRole("button", { name: "Close history" }).click();

  // Someone else changes the row first (the same governed tool, from this page).
  const elsewhere = await callTool(page, APP_ID, "app__time_sheet_entry__projects__update", {
    id: lyraId,
    changes: { name: "Lyra II" },
    expectedVersion: 2,
  });
  checks.ok(elsewhere.message?.result?.isError !== true, "another caller renames the project to Lyra II first", elsewhere);
  await projectsGrid.getByRole("button", { name: `Edit ${lyra}` }).click();
  await projectsGrid.getByLabel(`name of ${lyra}`).fill("Lyra III");
  await projectsGrid.getByRole("button", { name: "Save" }).click();
  const staleAlert = recoveryAlert.filter({ hasText: "This row changed since it was loaded, so nothing was overwritten." });
  await staleAlert.waitFor();
  await lyraRow.filter({ hasText: "Lyra II" }).waitFor();
  checks.ok(true, "the panel's stale save is a conflict: it says so and shows the other caller's value");
  checks.equal(await lyraRow.locator(".recovery-version").textContent(), "3", "the reloaded row shows version 3");
  checks.equal(await projectRows.filter({ hasText: "Lyra III" }).count(), 0, "the stale value was not written");
  await screenshot(page, "recovery-panel", staleAlert);

  await projectsGrid.getByRole("button", { name: `Delete ${lyra}` }).click();
  await recoveryStatus.filter({ hasText: `Deleted ${lyra}.` }).waitFor();
  checks.ok(admin.dialogs.some((text) => text.startsWith(`Delete ${lyra}?`)), "deleting in the panel asks first", admin.dialogs);
  admin.dialogs.length = 0;
  checks.equal(await projectRows.count(), 4, "four projects are left after the delete");

  // A CSV with one bad row imports nothing and names the row; a good one
  // adds every row; the export holds them all.
  const csvFile = (name, text) => ({ name, mimeType: "text/csv", buffer: Buffer.from(text) });
  const importInput = projectsGrid.locator('input[type="file"]');
  await importInput.setInputFiles(csvFile("bad.csv", "name\nOrion\nApollo\n"));
  await recoveryAlert.filter({ hasText: "row 2" }).waitFor();
  checks.ok(/row 2: name must be unique/i.test(await recoveryAlert.textContent()), "an import with a duplicate name names its row and field", await recoveryAlert.textContent());
  checks.equal(await projectRows.filter({ hasText: "Orion" }).count(), 0, "nothing of the refused file was imported");
  await importInput.setInputFiles(csvFile("more.csv", "name\nOrion\nVega\n"));
  await recoveryStatus.filter({ hasText: "Imported 2 rows into projects." }).waitFor();
  checks.equal(await projectRows.count(), 6, "both imported rows show in the grid");
  const downloading = page.waitForEvent("download");
  await projectsGrid.getByRole("button", { name: "Export projects as CSV" }).click();
  const exported = fs.readFileSync(await (await downloading).path(), "utf8");
  checks.ok(
    exported.startsWith("id,name,retired_at\n") && ["Apollo", "Borealis", "Cygnus I", "Draco", "Orion", "Vega"].every((name) => exported.includes(`,${name},\n`)),
    "the export holds every project with its new retired_at column (empty: none is retired), a header first",
    exported,
  );
  timings.recovery = Date.now() - at;

  // --- 5. Log hours on three days ------------------------------------------
  at = Date.now();
  await page.getByRole("button", { name: "Back to the app" }).click();
  await page.getByText(`${APP} is open.`).waitFor();
  await app.getByRole("heading", { name: APP }).waitFor();
  // The heading is static markup; the week's datetime is set once the view's
  // script has rendered, so wait for the attribute, not just the element.
  const weekStart = await app.locator("#week-start[datetime]").getAttribute("datetime");
  checks.ok(/^\d{4}-\d{2}-\d{2}$/.test(weekStart) && new Date(`${weekStart}T00:00:00Z`).getUTCDay() === 1, `the view shows a week starting on a Monday (${weekStart})`);
  // Waits for the list to load: the text appears only once it is known empty.
  await app.getByText("No hours logged this week.").waitFor();
  checks.ok(await app.getByText("No hours logged this week.").isVisible(), "an empty week says so");
  const logDate = app.getByLabel("Date", { exact: true });
  const logHours = app.getByLabel("Hours", { exact: true });
  checks.equal(
    await logDate.evaluate((input) => ({ type: input.type, placeholder: input.placeholder, hint: document.getElementById("log-date-hint").textContent })),
    { type: "text", placeholder: "dd/mm/yyyy", hint: "Write it as dd/mm/yyyy" },
    "the date is typed in the host's locale (en-GB: dd/mm/yyyy), not in the browser's own date widget",
  );
  const defaultDay = await logDate.inputValue();
  const shownDays = Array.from({ length: 7 }, (_, day) => ukDate(addDays(weekStart, day)));
  checks.ok(shownDays.includes(defaultDay), `the log form starts on a day of the shown week, written dd/mm/yyyy (${defaultDay})`);
  const ukLong = (iso) => new Intl.DateTimeFormat("en-GB", { weekday: "short", day: "numeric", month: "short", year: "numeric", timeZone: "UTC" }).format(new Date(`${iso}T00:00:00Z`));
  checks.equal(await app.locator("#week-start").textContent(), `${ukLong(weekStart)} – ${ukLong(addDays(weekStart, 6))}`, "the week is shown in the host's locale (en-GB)");
  const logged = [
    { day: 0, project: "Apollo", hours: "7.5", note: "kick-off" },
    { day: 1, project: "Borealis", hours: "3" },
    { day: 1, project: "Apollo", hours: "4.25" },
    { day: 3, project: "Borealis", hours: "6" },
  ];
  for (const entry of logged) {
    await logDate.fill(ukDate(addDays(weekStart, entry.day)));
    await app.getByLabel("Project", { exact: true }).selectOption({ label: entry.project });
    await logHours.fill(entry.hours);
    await app.getByLabel("Note", { exact: true }).fill(entry.note || "");
    await app.getByRole("button", { name: "Log hours" }).click();
    await app.getByRole("status").filter({ hasText: `Logged ${Number(entry.hours).toFixed(2)} hours for ${entry.project}` }).waitFor();
  }
  checks.equal(await app.locator("#entries tbody tr").count(), 4, "four entries on three days are listed");
  checks.equal(await dateInput(app, "Apollo", "Mon").inputValue(), ukDate(weekStart), "an entry's date is shown dd/mm/yyyy");
  let days = await totals(app, "Hours per day");
  const dayLabel = (offset) => Object.keys(days)[offset];
  checks.equal(Object.keys(days).length, 7, "the per-day totals cover Monday to Sunday");
  checks.equal(dayLabel(0), `Mon ${Number(weekStart.slice(8))}`, "days are named in the host's locale");
  checks.equal(
    Object.values(days),
    [7.5, 7.25, 0, 6, 0, 0, 0],
    "per-day totals: Mon 7.50, Tue 7.25 (two projects), Thu 6.00",
  );
  checks.equal(await totals(app, "Hours per project"), { Apollo: 11.75, Borealis: 9 }, "per-project totals: Apollo 11.75, Borealis 9.00");
  checks.equal(await app.locator("#week-total").textContent(), "20.75", "the week total is 20.75");
  await screenshot(page, "week-view", app.getByRole("heading", { name: "Entries this week" }));

  // Bad values are refused next to their fields; nothing is logged.
  await logDate.fill(ukDate(addDays(weekStart, 2)));
  await logHours.fill("30");
  await app.getByRole("button", { name: "Log hours" }).click();
  checks.equal(await waitForFieldError("the hours", logHours), HOURS_RULE, "hours above 24 are refused next to the hours field");
  checks.ok(await logHours.evaluate((input) => input === document.activeElement), "the focus moves to the refused field");
  await logHours.fill("0");
  await app.getByRole("button", { name: "Log hours" }).click();
  checks.equal(await waitForFieldError("the hours", logHours), HOURS_RULE, "zero hours are refused next to the hours field");
  await logHours.fill("2");
  checks.equal(await fieldError(logHours), null, "correcting the hours clears their error");
  for (const bad of ["31/02/2026", `${addDays(weekStart, 2)}`, "3/13/2026", "next Wednesday"]) {
    await logDate.fill(bad);
    await app.getByRole("button", { name: "Log hours" }).click();
    const error = await waitForFieldError("the date", logDate);
    checks.ok(/^Enter a real date as dd\/mm\/yyyy, for example \d{2}\/\d{2}\/\d{4}\.$/.test(error), `the date "${bad}" is refused next to the date field`, error);
  }
  await screenshot(page, "field-errors", logRegion);
  await logDate.fill(ukDate(addDays(weekStart, 2)));
  checks.equal(await fieldError(logDate), null, "correcting the date clears its error");
  await logHours.fill("");
  checks.equal(await app.locator("#entries tbody tr").count(), 4, "nothing was logged by the refused attempts");
  timings.logHours = Date.now() - at;

  // --- 6. Edit entries in place --------------------------------------------
  at = Date.now();
  const mondayApollo = hoursInput(app, "Apollo", "Mon");
  await mondayApollo.fill("8");
  await saveButton(app, "Apollo", "Mon").click();
  await app.getByRole("status").filter({ hasText: "Saved 8.00 hours for Apollo" }).waitFor();
  checks.equal(await hoursInput(app, "Apollo", "Mon").inputValue(), "8", "the edited entry shows 8 hours");
  checks.equal((await totals(app, "Hours per project")).Apollo, 12.25, "Apollo's total follows the edit (12.25)");

  // Tuesday's Apollo entry: bad values first, each refused beside its field.
  await dateInput(app, "Apollo", "Tue").fill("30/02/2026");
  await hoursInput(app, "Apollo", "Tue").fill("0");
  await saveButton(app, "Apollo", "Tue").click();
  const rowDateError = await waitForFieldError("the row's date", dateInput(app, "Apollo", "Tue"));
  checks.ok(rowDateError.startsWith("Enter a real date as dd/mm/yyyy"), "a bad date in a row is refused next to that row's date", rowDateError);
  checks.equal(await fieldError(hoursInput(app, "Apollo", "Tue")), HOURS_RULE, "and bad hours next to that row's hours, at the same time");
  checks.ok(await dateInput(app, "Apollo", "Tue").evaluate((input) => input === document.activeElement), "the focus is on the first refused field");
  // Then its date, project, hours and note at once.
  await dateInput(app, "Apollo", "Tue").fill(ukDate(addDays(weekStart, 2)));
  await projectSelect(app, "Apollo", "Tue").selectOption({ label: "Cygnus I" });
  await hoursInput(app, "Apollo", "Tue").fill("4.5");
  await noteInput(app, "Apollo", "Tue").fill("design review");
  await saveButton(app, "Apollo", "Tue").click();
  await app.getByRole("status").filter({ hasText: "Saved 4.50 hours for Cygnus I on Wed" }).waitFor();
  checks.equal(await hoursInput(app, "Cygnus I", "Wed").inputValue(), "4.5", "the entry moved to Wednesday and Cygnus I with 4.5 hours");
  checks.equal(await dateInput(app, "Cygnus I", "Wed").inputValue(), ukDate(addDays(weekStart, 2)), "its date reads back dd/mm/yyyy");
  checks.equal(await noteInput(app, "Cygnus I", "Wed").inputValue(), "design review", "its note changed in place");
  checks.equal(await hoursInput(app, "Apollo", "Tue").count(), 0, "no entry is left for Apollo on Tuesday");
  checks.equal(Object.values(await totals(app, "Hours per day")), [8, 3, 4.5, 6, 0, 0, 0], "per-day totals follow the date: Tue 3.00, Wed 4.50");
  checks.equal(await totals(app, "Hours per project"), { Apollo: 8, Borealis: 9, "Cygnus I": 4.5 }, "per-project totals follow the project: Apollo 8.00, Cygnus I 4.50");
  timings.edit = Date.now() - at;

  // --- 7. A conflict from a second context ---------------------------------
  at = Date.now();
  const other = await studioPage("admin-2");
  const otherApp = await openTimesheet(other.page);
  await hoursInput(otherApp, "Borealis", "Thu").waitFor();
  await hoursInput(otherApp, "Borealis", "Thu").fill("5");
  await saveButton(otherApp, "Borealis", "Thu").click();
  await otherApp.getByRole("status").filter({ hasText: "Saved 5.00 hours for Borealis" }).waitFor();
  checks.ok(true, "a second browser context (same user) changes Thursday's Borealis entry to 5 hours first");
  await other.page.context().close();

  checks.equal(await hoursInput(app, "Borealis", "Thu").inputValue(), "6", "the first context still shows the stale 6 hours");
  await hoursInput(app, "Borealis", "Thu").fill("6.5");
  await saveButton(app, "Borealis", "Thu").click();
  const alert = app.getByRole("alert").filter({ hasText: CONFLICT });
  await alert.waitFor();
  checks.ok(true, "the stale save shows the conflict message");
  await waitFor("the reloaded value", async () => (await hoursInput(app, "Borealis", "Thu").inputValue()) === "5", 5_000);
  checks.ok(true, "the entry is reloaded with the other context's 5 hours, not overwritten with 6.5");
  checks.equal((await totals(app, "Hours per project")).Borealis, 8, "Borealis's total shows the reloaded value (8.00)");
  await screenshot(page, "conflict", alert);
  timings.conflict = Date.now() - at;

  // --- 8. Delete one entry after confirming -------------------------------
  // The view's sandbox has no allow-modals (window.confirm() would silently
  // answer false), so the app confirms with its own modal <dialog>.
  at = Date.now();
  const confirmation = app.getByRole("dialog", { name: "Delete entry?" });
  await app.getByRole("button", { name: /^Delete Borealis on Tue/ }).click();
  await confirmation.waitFor();
  checks.ok(
    /^Delete 3\.00 hours for Borealis on Tue/.test(await confirmation.locator("#confirm-text").textContent()),
    "deleting asks for confirmation first, naming the entry",
    await confirmation.textContent(),
  );
  await confirmation.getByRole("button", { name: "Keep it" }).click();
  await confirmation.waitFor({ state: "hidden" });
  checks.equal(await app.locator("#entries tbody tr").count(), 4, "keeping it deletes nothing");
  await app.getByRole("button", { name: /^Delete Borealis on Tue/ }).click();
  await confirmation.getByRole("button", { name: "Delete entry" }).click();
  await app.getByRole("status").filter({ hasText: "Deleted the entry for Borealis" }).waitFor();
  checks.ok(true, "confirming deletes the entry");
  checks.equal(admin.dialogs, [], "no native dialog was used");
  checks.equal(await app.locator("#entries tbody tr").count(), 3, "three entries are left");
  days = await totals(app, "Hours per day");
  checks.equal(Object.values(days), [8, 0, 4.5, 5, 0, 0, 0], `per-day totals after the delete: ${dayLabel(0)} 8.00, ${dayLabel(2)} 4.50, ${dayLabel(3)} 5.00`);
  const byProject = await totals(app, "Hours per project");
  checks.equal(byProject, { Apollo: 8, Borealis: 5, "Cygnus I": 4.5 }, "per-project totals after the delete: Apollo 8.00, Borealis 5.00, Cygnus I 4.50");
  timings.delete = Date.now() - at;

  // --- 9. Retire a project: out of the picker, kept by its entries ---------
  at = Date.now();
  await projectsPanel.getByRole("button", { name: "Retire Cygnus I" }).click();
  await app.getByRole("status").filter({ hasText: /^Retired Cygnus I: / }).waitFor();
  const retiredList = projectsPanel.getByRole("list", { name: "Retired" });
  await retiredList.getByText(/^Cygnus I \(retired /).waitFor();
  checks.equal(await openList.getByText("Cygnus I", { exact: true }).count(), 0, "the retired project leaves the open list");
  checks.ok(await retiredList.getByRole("button", { name: "Bring back Cygnus I" }).evaluate((button) => button === document.activeElement), "the focus follows the project to the retired list");
  checks.equal(await optionLabels(app.getByLabel("Project", { exact: true })), ["Apollo", "Borealis", "Draco", "Orion", "Vega"], "the retired project is no longer offered for new hours");
  checks.equal(await hoursInput(app, "Cygnus I", "Wed").inputValue(), "4.5", "the entry logged against it keeps its name");
  checks.equal(
    await projectSelect(app, "Cygnus I", "Wed").evaluate((select) => select.selectedOptions[0].textContent),
    "Cygnus I (retired)",
    "the entry's project field still shows it, marked retired",
  );
  checks.equal(await totals(app, "Hours per project"), { Apollo: 8, Borealis: 5, "Cygnus I": 4.5 }, "the totals keep the retired project's hours under its name");
  checks.equal(
    await projectSelect(app, "Borealis", "Thu").evaluate((select) => [...select.options].map((option) => option.textContent)),
    ["Apollo", "Borealis", "Draco", "Orion", "Vega"],
    "another entry's project field offers only open projects",
  );
  timings.retire = Date.now() - at;

  // --- 10. The member in a shared week; the admin sees the team's ----------
  at = Date.now();
  await memberPage.goto(`${STUDIO}/`);
  await sidebar(memberPage).waitFor();
  memberApp = await openTimesheet(memberPage);
  // The empty-week text appears only once the member's list has loaded and
  // is empty (isVisible() would read the view before it loaded).
  const memberEmpty = await memberApp.getByText("No hours logged this week.").waitFor({ timeout: 10_000 }).then(() => true, () => false);
  checks.ok(memberEmpty, "the member sees none of the admin's entries");
  const memberProject = memberApp.getByLabel("Project", { exact: true });
  checks.equal(await optionLabels(memberProject), ["Apollo", "Borealis", "Draco", "Orion", "Vega"], "the member picks from the open projects");
  checks.equal(await memberApp.getByRole("region", { name: "Projects", exact: true }).count(), 0, "the member sees no projects panel");
  checks.equal(await memberApp.getByRole("button", { name: /^(Rename|Retire|Bring back|Add project|Add your first project)/ }).count(), 0, "the member sees no project controls");
  await memberApp.getByLabel("Date", { exact: true }).fill(ukDate(addDays(weekStart, 2)));
  await memberProject.selectOption({ label: "Apollo" });
  await memberApp.getByLabel("Hours", { exact: true }).fill("2");
  await memberApp.getByRole("button", { name: "Log hours" }).click();
  await memberApp.getByRole("status").filter({ hasText: "Logged 2.00 hours for Apollo" }).waitFor();
  checks.equal(await memberApp.locator("#entries tbody tr").count(), 1, "the member's week lists only their own entry");
  const memberTotals = await totals(memberApp, "Hours per project");
  checks.equal(memberTotals, { Apollo: 2 }, "the member's per-project totals count only their hours");
  await screenshot(memberPage, "member-week", memberApp.getByRole("heading", { name: "Entries this week" }));
  await viewFitsNarrow(memberPage, "the member's week");
  await member.page.context().close();

  // The admin manages the app and `entries` declares managersReadAll: their
  // week is the team's.
  const adminRows = await memberAwareCount(app);
  checks.equal(adminRows, 4, "the admin's view, reloaded, lists the team's four entries (managersReadAll)");
  const teamByProject = await totals(app, "Hours per project");
  checks.equal(teamByProject, { Apollo: 10, Borealis: 5, "Cygnus I": 4.5 }, "the admin's per-project totals are the team's, the retired project's included");
  timings.member = Date.now() - at;

  // --- 11. Narrow screens ----------------------------------------------------
  at = Date.now();
  await viewFitsNarrow(page, "the admin's week with entries and projects");
  await screenshot(page, "manager-week", app.getByRole("heading", { name: "Entries this week" }));
  await screenshot(page, "manager-projects", projectsPanel);

  // The team's entries in the recovery grid fit a phone: the grid scrolls in
  // its own box, the page never does.
  await page.getByRole("button", { name: "Recovery" }).click();
  const teamGrid = page.getByRole("region", { name: `Recovery: ${APP}` }).getByRole("region", { name: "entries", exact: true });
  await teamGrid.getByRole("table", { name: "Rows of entries" }).locator("tbody tr").nth(3).waitFor();
  // People and projects by name, not by UUID and bare id (the id stays beside a project's name).
  const teamBody = teamGrid.getByRole("table", { name: "Rows of entries" }).locator("tbody");
  const named = await waitFor("the recovery grid to name owners and projects", async () => {
    const text = await teamBody.textContent();
    return text.includes(MEMBER.username) && text.includes(ADMIN.username) && /Apollo \(\d+\)/.test(text) ? text : null;
  });
  checks.ok(!named.includes(MEMBER.id), "the recovery grid names the entries' owners, with no user UUID", named);
  checks.ok(true, "and names each entry's project beside its id");
  await fitsNarrow(page, checks, "the recovery grid with the team's entries");
  await screenshot(page, "recovery-entries", teamGrid);
  timings.narrow = Date.now() - at;

  // --- 12. Hand the UI's totals to the Rust test ---------------------------
  ids = Object.fromEntries(Object.entries(await projectRowsByName(page)).map(([name, row]) => [name, row.id]));
  const uiTotals = Object.fromEntries(Object.entries(teamByProject).map(([name, hours]) => [String(ids[name]), hours]));
  console.log(`UI_TOTALS ${JSON.stringify({ weekStart, projects: uiTotals })}`);
  const memberIds = Object.fromEntries(Object.entries(memberTotals).map(([name, hours]) => [String(ids[name]), hours]));
  console.log(`MEMBER_TOTALS ${JSON.stringify({ weekStart, projects: memberIds })}`);
  console.log(`RETIRED_PROJECT ${JSON.stringify({ id: ids["Cygnus I"], name: "Cygnus I" })}`);
}

/** Reloads the shown week (away to the next week and back) and counts its entries. */
async function memberAwareCount(app) {
  await app.getByRole("button", { name: "Next week" }).click();
  await app.getByText("No hours logged this week.").waitFor();
  await app.getByRole("button", { name: "Previous week" }).click();
  await app.locator("#entries tbody tr").first().waitFor();
  return app.locator("#entries tbody tr").count();
}
