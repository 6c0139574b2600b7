// Time Sheet Entry end to end in real Chromium (issue 9): the bundled app
// package (apps/time-sheet-entry), seeded by the real `sasha up`, used by role
// and label, as people would.
//
//  1. sign in as the dev admin; open the app's recovery panel and add the
//     shared projects there (a duplicate name is refused; an edit made
//     elsewhere first makes the panel's stale save a conflict it shows, never
//     an overwrite; a delete asks first; a row's History shows its create
//     and its edit with the value before and after; a CSV with a duplicate
//     name imports nothing and names its row, a good one adds its rows, and
//     Export CSV downloads them all);
//  2. back in the app's own view, log hours on three days of the shown week
//     through the form (the app-only log-hours action); per-day and
//     per-project totals follow;
//  3. edit one entry's hours in place;
//  4. a second browser context (same user) changes the same entry first; the
//     first context's stale save gets the conflict message and the reloaded
//     value, never an overwrite;
//  5. delete one entry after confirming in the app's own dialog;
//  6. a member sees no apps (and no recovery, and no data tools) until the
//     admin grants `use` in the access panel; then sees none of the admin's
//     entries, logs their own, and still has no recovery; the admin, who
//     manages the app (entries: managersReadAll), then sees the team's week;
//  7. print the UI's totals (`UI_TOTALS {json}` for the admin, `MEMBER_TOTALS`
//     for the member) for the Rust test to compare with
//     app__time_sheet_entry__weekly_project_totals read by the MCP SDK client;
//  8. screenshots of the recovery panel, the week view and the conflict at
//     1440 and 375 px.
//
// Environment (set by tests/browser_timesheet.rs): CHROMIUM, STUDIO_URL,
// ADMIN_USER, ADMIN_PASSWORD, MEMBER_USER, MEMBER_PASSWORD, MEMBER_ID,
// ARTIFACTS. BROWSER_CONSOLE=1 echoes the console.

import fs from "node:fs";

import { Checks, env, launchChromium, runAndClose, waitFor } from "./harness.mjs";
import { appLink, callTool, fitsNarrow, innerFrame, openApp, screenshots, sidebar, signIn, WIDE } from "./studio-page.mjs";

const started = Date.now();
const STUDIO = env("STUDIO_URL");
const ADMIN = { username: env("ADMIN_USER"), password: env("ADMIN_PASSWORD") };
const MEMBER = { username: env("MEMBER_USER"), password: env("MEMBER_PASSWORD"), id: env("MEMBER_ID") };
const ARTIFACTS = env("ARTIFACTS");
fs.mkdirSync(ARTIFACTS, { recursive: true });

const APP = "Time Sheet Entry";
const CONFLICT = "This entry changed elsewhere; reloaded the latest values — apply your change again.";

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

function screenshot(page, name, subject) {
  return screenshots(page, ARTIFACTS, name, taken, subject);
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

/** The entry row of the table whose hours input is labelled for this project and day. */
function hoursInput(app, project, dayPrefix) {
  return app.getByRole("spinbutton", { name: new RegExp(`^Hours for ${project} on ${dayPrefix}`) });
}

// ---------------------------------------------------------------------------

async function run() {
  let at = Date.now();
  const admin = await studioPage("admin");
  const page = admin.page;
  timings.signIn = Date.now() - at;

  // --- 1. Shared projects, added in the recovery panel ----------------------
  at = Date.now();
  await appLink(page, APP).click();
  await page.getByText(`${APP} is open.`).waitFor();
  await page.getByRole("button", { name: "Recovery" }).click();
  const recovery = page.getByRole("region", { name: `Recovery: ${APP}` });
  await recovery.waitFor();
  checks.ok(await page.getByText(`${APP}'s own view is closed while recovery is open.`).isVisible(), "recovery opens with the app's own view closed");
  const recoveryStatus = recovery.getByRole("status");
  const recoveryAlert = recovery.getByRole("alert");
  const projectsGrid = recovery.getByRole("region", { name: "projects", exact: true });
  const entriesGrid = recovery.getByRole("region", { name: "entries", exact: true });
  await projectsGrid.getByText("No rows in projects that you can see.").waitFor();
  checks.ok(await entriesGrid.getByText("every owner's rows (created_by)").isVisible(), "the entries grid says a manager sees every owner's rows (managersReadAll)");
  checks.equal(
    await entriesGrid.locator("form label").allTextContents(),
    ["date (required)", "project (required)", "hours (required)", "note"],
    "the entries form offers the writable fields, required ones marked; id and the owner field are not editable",
  );
  const projectRows = projectsGrid.getByRole("table", { name: "Rows of projects" }).locator("tbody tr");
  const projects = {};
  for (const name of ["Apollo", "Borealis", "Cygnus"]) {
    await projectsGrid.getByLabel("name (required)").fill(name);
    await projectsGrid.getByRole("button", { name: "Add to projects" }).click();
    await recoveryStatus.filter({ hasText: /^Added projects row \d+\.$/ }).waitFor();
    const text = await recoveryStatus.textContent();
    projects[name] = Number(/row (\d+)/.exec(text)[1]);
    await projectRows.filter({ hasText: name }).waitFor();
  }
  checks.equal(await projectRows.count(), 3, "three projects are added in the recovery panel");
  await fitsNarrow(page, checks, "the recovery grid with rows");
  checks.ok(Object.values(projects).every(Number.isInteger), "each added project's id is announced", projects);

  await projectsGrid.getByLabel("name (required)").fill("Apollo");
  await projectsGrid.getByRole("button", { name: "Add to projects" }).click();
  await recoveryAlert.filter({ hasText: "APP_CONFLICT" }).waitFor();
  checks.ok(/name must be unique/i.test(await recoveryAlert.textContent()), "a duplicate project name is refused, naming the field and the rule", await recoveryAlert.textContent());
  checks.equal(await projectRows.count(), 3, "the refused duplicate adds nothing");

  await projectsGrid.getByLabel("name (required)").fill("");
  await projectsGrid.getByRole("button", { name: "Add to projects" }).click();
  await recoveryAlert.filter({ hasText: "name is required." }).waitFor();
  checks.ok(true, "an empty required field is refused before anything is sent");

  const cygnus = `projects row ${projects.Cygnus}`;
  await projectsGrid.getByRole("button", { name: `Edit ${cygnus}` }).click();
  await projectsGrid.getByLabel(`name of ${cygnus}`).fill("Cygnus I");
  await projectsGrid.getByRole("button", { name: "Save" }).click();
  await recoveryStatus.filter({ hasText: `Saved ${cygnus}.` }).waitFor();
  const cygnusRow = projectRows.filter({ hasText: "Cygnus" });
  checks.equal(await cygnusRow.locator(".recovery-version").textContent(), "2", "an edit in the panel moves the row to version 2");

  // The row's history: its create and the edit, with the value before and after.
  await projectsGrid.getByRole("button", { name: `History of ${cygnus}` }).click();
  const cygnusHistory = projectsGrid.getByRole("list", { name: `History of ${cygnus}` });
  await cygnusHistory.waitFor();
  const historyItems = cygnusHistory.locator(":scope > li");
  checks.equal(await historyItems.count(), 2, "the history lists the create and the edit");
  checks.ok(/^create .* via ui/.test(await historyItems.nth(0).textContent()), "the first entry is the create, from the Studio page", await historyItems.nth(0).textContent());
  checks.ok((await historyItems.nth(1).textContent()).includes("name: Cygnus → Cygnus I"), "the edit shows the name before and after", await historyItems.nth(1).textContent());
  await projectsGrid.getByRole("button", { name: "Close history" }).click();

  // Someone else changes the row first (the same governed tool, from this page).
  const elsewhere = await callTool(page, "time-sheet-entry", "app__time_sheet_entry__projects__update", {
    id: projects.Cygnus,
    changes: { name: "Cygnus II" },
    expectedVersion: 2,
  });
  checks.ok(elsewhere.message?.result?.isError !== true, "another caller renames the project to Cygnus II first", elsewhere);
  await projectsGrid.getByRole("button", { name: `Edit ${cygnus}` }).click();
  await projectsGrid.getByLabel(`name of ${cygnus}`).fill("Cygnus III");
  await projectsGrid.getByRole("button", { name: "Save" }).click();
  const staleAlert = recoveryAlert.filter({ hasText: "This row changed since it was loaded, so nothing was overwritten." });
  await staleAlert.waitFor();
  await cygnusRow.filter({ hasText: "Cygnus II" }).waitFor();
  checks.ok(true, "the panel's stale save is a conflict: it says so and shows the other caller's value");
  checks.equal(await cygnusRow.locator(".recovery-version").textContent(), "3", "the reloaded row shows version 3");
  checks.equal(await projectRows.filter({ hasText: "Cygnus III" }).count(), 0, "the stale value was not written");
  await screenshot(page, "recovery-panel", staleAlert);

  await projectsGrid.getByRole("button", { name: `Delete ${cygnus}` }).click();
  await recoveryStatus.filter({ hasText: `Deleted ${cygnus}.` }).waitFor();
  checks.ok(admin.dialogs.some((text) => text.startsWith(`Delete ${cygnus}?`)), "deleting in the panel asks first", admin.dialogs);
  admin.dialogs.length = 0;
  checks.equal(await projectRows.count(), 2, "two projects are left after the delete");
  delete projects.Cygnus;

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
  checks.equal(await projectRows.count(), 4, "both imported rows show in the grid");
  const downloading = page.waitForEvent("download");
  await projectsGrid.getByRole("button", { name: "Export projects as CSV" }).click();
  const exported = fs.readFileSync(await (await downloading).path(), "utf8");
  checks.ok(
    exported.startsWith("id,name\n") && ["Apollo", "Borealis", "Orion", "Vega"].every((name) => exported.includes(`,${name}\n`)),
    "the export holds every project, a header first",
    exported,
  );
  timings.recovery = Date.now() - at;

  // --- 2. Log hours on three days ------------------------------------------
  at = Date.now();
  await page.getByRole("button", { name: "Back to the app" }).click();
  await page.getByText(`${APP} is open.`).waitFor();
  const app = view(page);
  await app.getByRole("heading", { name: APP }).waitFor();
  // The heading is static markup; the week's datetime is set once the view's
  // script has rendered, so wait for the attribute, not just the element.
  const weekStart = await app.locator("#week-start[datetime]").getAttribute("datetime");
  checks.ok(/^\d{4}-\d{2}-\d{2}$/.test(weekStart) && new Date(`${weekStart}T00:00:00Z`).getUTCDay() === 1, `the view shows a week starting on a Monday (${weekStart})`);
  // Waits for the list to load: the text appears only once it is known empty.
  await app.getByText("No hours logged this week.").waitFor();
  checks.ok(await app.getByText("No hours logged this week.").isVisible(), "an empty week says so");
  const logged = [
    { day: 0, project: "Apollo", hours: "7.5", note: "kick-off" },
    { day: 1, project: "Borealis", hours: "3" },
    { day: 1, project: "Apollo", hours: "4.25" },
    { day: 3, project: "Borealis", hours: "6" },
  ];
  for (const entry of logged) {
    await app.getByLabel("Date", { exact: true }).fill(addDays(weekStart, entry.day));
    await app.getByLabel("Project", { exact: true }).selectOption({ label: entry.project });
    await app.getByLabel("Hours", { exact: true }).fill(entry.hours);
    await app.getByLabel("Note", { exact: true }).fill(entry.note || "");
    await app.getByRole("button", { name: "Log hours" }).click();
    await app.getByRole("status").filter({ hasText: `Logged ${Number(entry.hours).toFixed(2)} hours for ${entry.project}` }).waitFor();
  }
  checks.equal(await app.locator("#entries tbody tr").count(), 4, "four entries on three days are listed");
  let days = await totals(app, "Hours per day");
  const dayLabel = (offset) => Object.keys(days)[offset];
  checks.equal(Object.keys(days).length, 7, "the per-day totals cover Monday to Sunday");
  checks.equal(
    Object.values(days),
    [7.5, 7.25, 0, 6, 0, 0, 0],
    "per-day totals: Mon 7.50, Tue 7.25 (two projects), Thu 6.00",
  );
  checks.equal(await totals(app, "Hours per project"), { Apollo: 11.75, Borealis: 9 }, "per-project totals: Apollo 11.75, Borealis 9.00");
  checks.equal(await app.locator("#week-total").textContent(), "20.75", "the week total is 20.75");
  await screenshot(page, "week-view", app.getByRole("heading", { name: "Entries this week" }));
  timings.logHours = Date.now() - at;

  // --- 3. Edit one entry's hours in place ----------------------------------
  at = Date.now();
  const mondayApollo = hoursInput(app, "Apollo", "Mon");
  await mondayApollo.fill("8");
  await app.getByRole("button", { name: /^Save hours for Apollo on Mon/ }).click();
  await app.getByRole("status").filter({ hasText: "Saved 8.00 hours for Apollo" }).waitFor();
  checks.equal(await hoursInput(app, "Apollo", "Mon").inputValue(), "8", "the edited entry shows 8 hours");
  checks.equal((await totals(app, "Hours per project")).Apollo, 12.25, "Apollo's total follows the edit (12.25)");
  timings.edit = Date.now() - at;

  // --- 4. A conflict from a second context ---------------------------------
  at = Date.now();
  const other = await studioPage("admin-2");
  const otherApp = await openTimesheet(other.page);
  await hoursInput(otherApp, "Borealis", "Thu").waitFor();
  await hoursInput(otherApp, "Borealis", "Thu").fill("5");
  await otherApp.getByRole("button", { name: /^Save hours for Borealis on Thu/ }).click();
  await otherApp.getByRole("status").filter({ hasText: "Saved 5.00 hours for Borealis" }).waitFor();
  checks.ok(true, "a second browser context (same user) changes Thursday's Borealis entry to 5 hours first");
  await other.page.context().close();

  checks.equal(await hoursInput(app, "Borealis", "Thu").inputValue(), "6", "the first context still shows the stale 6 hours");
  await hoursInput(app, "Borealis", "Thu").fill("6.5");
  await app.getByRole("button", { name: /^Save hours for Borealis on Thu/ }).click();
  const alert = app.getByRole("alert").filter({ hasText: CONFLICT });
  await alert.waitFor();
  checks.ok(true, "the stale save shows the conflict message");
  await waitFor("the reloaded value", async () => (await hoursInput(app, "Borealis", "Thu").inputValue()) === "5", 5_000);
  checks.ok(true, "the entry is reloaded with the other context's 5 hours, not overwritten with 6.5");
  checks.equal((await totals(app, "Hours per project")).Borealis, 8, "Borealis's total shows the reloaded value (8.00)");
  await screenshot(page, "conflict", alert);
  timings.conflict = Date.now() - at;

  // --- 5. Delete one entry after confirming -------------------------------
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
  checks.equal(Object.values(days), [8, 4.25, 0, 5, 0, 0, 0], `per-day totals after the delete: ${dayLabel(0)} 8.00, ${dayLabel(1)} 4.25, ${dayLabel(3)} 5.00`);
  const byProject = await totals(app, "Hours per project");
  checks.equal(byProject, { Apollo: 12.25, Borealis: 5 }, "per-project totals after the delete: Apollo 12.25, Borealis 5.00");
  timings.delete = Date.now() - at;

  // --- 6. A member: nothing until granted use, then only their own rows ----
  at = Date.now();
  const member = await studioPage("member", MEMBER);
  const memberPage = member.page;
  await memberPage.getByText("No apps yet — ask an admin or staff member for access.").waitFor();
  checks.equal(await appLink(memberPage, APP).count(), 0, "a member without a grant sees no Time Sheet Entry");
  const refusedRecovery = await memberPage.evaluate(async () => (await fetch("/api/apps/time-sheet-entry/recovery")).status);
  checks.equal(refusedRecovery, 404, "a member without a grant gets the hidden 404 for the recovery descriptor");
  const refusedList = await callTool(memberPage, "time-sheet-entry", "app__time_sheet_entry__entries__list", {});
  checks.ok(
    refusedList.status !== 200 || refusedList.message?.error || refusedList.message?.result?.isError === true,
    "a member without a grant cannot list entries through /mcp",
    refusedList,
  );

  await page.getByRole("button", { name: "Manage access" }).click();
  const accessPanel = page.getByRole("region", { name: `Access to ${APP}` });
  await accessPanel.getByLabel("User name").fill(MEMBER.username);
  await accessPanel.getByLabel("Access", { exact: true }).selectOption("use");
  await accessPanel.getByRole("button", { name: "Grant access" }).click();
  await accessPanel.getByRole("status").filter({ hasText: `${MEMBER.username} now has use access.` }).waitFor();
  checks.ok(true, "the admin grants the member use in the access panel");

  await memberPage.reload();
  await sidebar(memberPage).waitFor();
  await appLink(memberPage, APP).waitFor();
  const memberApp = await openTimesheet(memberPage);
  // The empty-week text appears only once the member's list has loaded and
  // is empty (isVisible() would read the view before it loaded).
  const memberEmpty = await memberApp.getByText("No hours logged this week.").waitFor({ timeout: 10_000 }).then(() => true, () => false);
  checks.ok(memberEmpty, "the member sees none of the admin's entries");
  checks.equal(await memberPage.getByRole("button", { name: "Recovery" }).count(), 0, "use access offers no recovery panel");
  const stillRefused = await memberPage.evaluate(async () => (await fetch("/api/apps/time-sheet-entry/recovery")).status);
  checks.equal(stillRefused, 404, "use access is not enough for the recovery descriptor (manage is)");
  await memberApp.getByLabel("Date", { exact: true }).fill(addDays(weekStart, 2));
  await memberApp.getByLabel("Project", { exact: true }).selectOption({ label: "Apollo" });
  await memberApp.getByLabel("Hours", { exact: true }).fill("2");
  await memberApp.getByRole("button", { name: "Log hours" }).click();
  await memberApp.getByRole("status").filter({ hasText: "Logged 2.00 hours for Apollo" }).waitFor();
  checks.equal(await memberApp.locator("#entries tbody tr").count(), 1, "the member's week lists only their own entry");
  const memberTotals = await totals(memberApp, "Hours per project");
  checks.equal(memberTotals, { Apollo: 2 }, "the member's per-project totals count only their hours");
  await member.page.context().close();

  // The admin manages the app and `entries` declares managersReadAll: their
  // week is the team's.
  const adminRows = await memberAwareCount(app);
  checks.equal(adminRows, 4, "the admin's view, reloaded, lists the team's four entries (managersReadAll)");
  const teamByProject = await totals(app, "Hours per project");
  checks.equal(teamByProject, { Apollo: 14.25, Borealis: 5 }, "the admin's per-project totals are the team's");
  timings.member = Date.now() - at;

  // The team's entries in the recovery grid fit a phone: the grid scrolls in
  // its own box, the page never does.
  await page.getByRole("button", { name: "Recovery" }).click();
  const teamGrid = page.getByRole("region", { name: `Recovery: ${APP}` }).getByRole("region", { name: "entries", exact: true });
  await teamGrid.getByRole("table", { name: "Rows of entries" }).locator("tbody tr").nth(3).waitFor();
  await fitsNarrow(page, checks, "the recovery grid with the team's entries");
  await screenshot(page, "recovery-entries", teamGrid);

  // --- 7. Hand the UI's totals to the Rust test ----------------------------
  const uiTotals = Object.fromEntries(Object.entries(teamByProject).map(([name, hours]) => [String(projects[name]), hours]));
  console.log(`UI_TOTALS ${JSON.stringify({ weekStart, projects: uiTotals })}`);
  const memberIds = Object.fromEntries(Object.entries(memberTotals).map(([name, hours]) => [String(projects[name]), hours]));
  console.log(`MEMBER_TOTALS ${JSON.stringify({ weekStart, projects: memberIds })}`);
}

/** Reloads the shown week (away to the next week and back) and counts its entries. */
async function memberAwareCount(app) {
  await app.getByRole("button", { name: "Next week" }).click();
  await app.getByText("No hours logged this week.").waitFor();
  await app.getByRole("button", { name: "Previous week" }).click();
  await app.locator("#entries tbody tr").first().waitFor();
  return app.locator("#entries tbody tr").count();
}
