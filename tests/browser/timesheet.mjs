// Time Sheet Entry end to end in real Chromium (issue 9, part 1): the bundled
// app package (apps/time-sheet-entry) in the real `sasha up`, used through
// its own UI by role and label, as a person would.
//
//  1. sign in as the dev admin; seed two projects through /mcp from the
//     Studio page (session cookie + Sasha-App, as the host does);
//  2. open Time Sheet Entry; log hours on three days of the shown week through
//     the form (the app-only log-hours action); per-day and per-project
//     totals follow;
//  3. edit one entry's hours in place;
//  4. a second browser context (same user) changes the same entry first; the
//     first context's stale save gets the conflict message and the reloaded
//     value, never an overwrite;
//  5. delete one entry after confirming in the app's own dialog;
//  6. print the UI's totals (`UI_TOTALS {json}`) for the Rust test to compare
//     with app__time_sheet_entry__weekly_project_totals called over MCP;
//  7. screenshots of the week view and the conflict at 1440 and 375 px.
//
// Environment (set by tests/browser_timesheet.rs): CHROMIUM, STUDIO_URL,
// ADMIN_USER, ADMIN_PASSWORD, ARTIFACTS. BROWSER_CONSOLE=1 echoes the console.

import fs from "node:fs";
import path from "node:path";

import { Checks, env, launchChromium, waitFor } from "./harness.mjs";
import { callTool, innerFrame, openApp, signIn } from "./studio-page.mjs";

const started = Date.now();
const STUDIO = env("STUDIO_URL");
const ADMIN = { username: env("ADMIN_USER"), password: env("ADMIN_PASSWORD") };
const ARTIFACTS = env("ARTIFACTS");
fs.mkdirSync(ARTIFACTS, { recursive: true });

const WIDE = { width: 1440, height: 900 };
const NARROW = { width: 375, height: 812 };
const APP = "Time Sheet Entry";
const CONFLICT = "This entry changed elsewhere; reloaded the latest values — apply your change again.";

const checks = new Checks();
const timings = {};
const screenshots = [];

const browser = await launchChromium();
try {
  await run();
} finally {
  await browser.close();
}
for (const file of screenshots) {
  console.log(`screenshot ${file}`);
}
console.log(`timings ${JSON.stringify(timings)}`);
console.log(`${checks.passed} checks passed in ${((Date.now() - started) / 1000).toFixed(1)} s; screenshots in ${ARTIFACTS}`);

// ---------------------------------------------------------------------------
// Helpers

async function studioPage(label) {
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
  await signIn(page, ADMIN);
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

/** Screenshots at both widths, each scrolled so `subject` (in the app) is in view. */
async function screenshot(page, name, subject) {
  for (const size of [WIDE, NARROW]) {
    await page.setViewportSize(size);
    await page.waitForTimeout(250);
    await subject.scrollIntoViewIfNeeded();
    const file = path.join(ARTIFACTS, `${name}-${size.width}x${size.height}.png`);
    await page.screenshot({ path: file });
    screenshots.push(file);
  }
  await page.setViewportSize(WIDE);
  await page.waitForTimeout(100);
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

  // --- 1. Two shared projects, seeded through /mcp -------------------------
  at = Date.now();
  const projects = {};
  for (const name of ["Apollo", "Borealis"]) {
    const seeded = await callTool(page, "time-sheet-entry", "app__time_sheet_entry__projects__create", {
      values: { name },
      idempotencyKey: `timesheet-e2e-project-${name}`,
    });
    const created = seeded.message?.result?.structuredContent;
    checks.ok(
      seeded.status === 200 && seeded.message?.result?.isError !== true && Number.isInteger(created?.id),
      `project ${name} is created through /mcp with the admin's session and Sasha-App`,
      seeded,
    );
    projects[name] = created.id;
  }

  // --- 2. Log hours on three days ------------------------------------------
  const app = await openTimesheet(page);
  const weekStart = await app.locator("#week-start").getAttribute("datetime");
  checks.ok(/^\d{4}-\d{2}-\d{2}$/.test(weekStart) && new Date(`${weekStart}T00:00:00Z`).getUTCDay() === 1, `the view shows a week starting on a Monday (${weekStart})`);
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

  // --- 6. Hand the UI's totals to the Rust test ----------------------------
  const uiTotals = Object.fromEntries(Object.entries(byProject).map(([name, hours]) => [String(projects[name]), hours]));
  console.log(`UI_TOTALS ${JSON.stringify({ weekStart, projects: uiTotals })}`);
}
