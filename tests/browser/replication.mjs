// Replication on the Users page in real Chromium, against the real `sasha up`
// replicating to SeaweedFS (set up by tests/chromium/replication.rs):
//
//  1. the admin opens Users from the sidebar; the Replication section shows
//     Studio's core database and the data worker's expense-log, each with its
//     generation, how far it is replicated and "Replicating", every role in
//     synchronous mode and all confirmed;
//  2. the Rust test stops object storage and a write is refused; the section,
//     refreshing itself, shows the data worker behind or failing with why;
//  3. object storage returns and a write is acknowledged; the section shows
//     all confirmed again;
//  4. no horizontal overflow at 375 and 390 px; screenshots at 1440 and 375 px.
//
// Environment: CHROMIUM, STUDIO_URL, ADMIN_USER, ADMIN_PASSWORD, ARTIFACTS.
// Handshakes: `{"step": "stop object storage"}`, `{"step": "start object
// storage"}`, each answered once the Rust side has done it.

import fs from "node:fs";

import { Checks, env, handshake, launchChromium, runAndClose, waitFor } from "./harness.mjs";
import { fitsNarrow, newStudioPage, screenshots, sidebar, signIn } from "./studio-page.mjs";

const started = Date.now();
const STUDIO = env("STUDIO_URL");
const ADMIN = { username: env("ADMIN_USER"), password: env("ADMIN_PASSWORD") };
const ARTIFACTS = env("ARTIFACTS");
fs.mkdirSync(ARTIFACTS, { recursive: true });

const GENERATION = /^\d{13}-[0-9a-f]{8}$/;

const checks = new Checks();
const taken = [];

const browser = await launchChromium();
await runAndClose(browser, run, taken);
console.log(`${checks.passed} checks passed in ${((Date.now() - started) / 1000).toFixed(1)} s; screenshots in ${ARTIFACTS}`);

/** The text of `locator`, trimmed. */
async function text(locator) {
  return ((await locator.textContent()) || "").trim();
}

/** One database's row: its cells by column. */
async function databaseRow(role, database) {
  const row = role.locator(`tr[data-database="${database}"]`);
  await row.waitFor({ timeout: 20_000 });
  const cells = await row.locator("td").allTextContents();
  return { database: cells[0], generation: cells[1], position: cells[2], confirmed: cells[3], lag: cells[4], state: cells[5] };
}

async function run() {
  const { page } = await newStudioPage(browser, "admin");
  await page.goto(STUDIO);
  await signIn(page, ADMIN);
  await sidebar(page).getByRole("button", { name: "Users" }).click();
  const section = page.locator(".replication-section");
  await section.getByRole("heading", { name: "Replication", level: 2 }).waitFor();
  const core = section.locator('.replication-role[data-role="studio-core"]');
  const data = section.locator('.replication-role[data-role="data-worker"]');

  // 1. Both roles replicate, everything confirmed.
  const coreRow = await databaseRow(core, "core");
  checks.ok(GENERATION.test(coreRow.generation), "the core database's generation is shown", coreRow);
  checks.ok(/^transaction \d+$/.test(coreRow.position), "the core database's replicated position is shown", coreRow);
  checks.equal(coreRow.state, "Replicating", "the core database is replicating");
  const appRow = await databaseRow(data, "expense-log");
  checks.ok(GENERATION.test(appRow.generation), "the app database's generation is shown", appRow);
  checks.equal(appRow.state, "Replicating", "the app database is replicating");
  checks.equal(appRow.lag, "none", "no lag while object storage confirms every write");
  for (const [role, name] of [
    [core, "Studio"],
    [data, "the data worker"],
  ]) {
    const summary = await text(role.locator(".replication-summary"));
    checks.ok(/synchronous/.test(summary) && /all confirmed/.test(summary), `${name}'s replication is synchronous and all confirmed`, summary);
  }
  await fitsNarrow(page, checks, "the Users page with replication");
  await screenshots(page, ARTIFACTS, "replication", taken, section);

  // 2. Object storage stopped: the section shows it by itself.
  await handshake({ step: "stop object storage" });
  await waitFor(
    "the data worker's failure on the page",
    async () => /^Failing: /.test((await databaseRow(data, "expense-log")).state),
    30_000,
  );
  const failing = await databaseRow(data, "expense-log");
  checks.ok(/object storage/.test(failing.state), "the failure says object storage did not confirm", failing);
  checks.ok(/behind or failing/.test(await text(data.locator(".replication-summary"))), "the data worker's summary says it is behind or failing");
  await screenshots(page, ARTIFACTS, "replication-failing", taken, section);

  // 3. Back: all confirmed again, without a reload.
  await handshake({ step: "start object storage" });
  await waitFor("all confirmed again", async () => /all confirmed/.test(await text(data.locator(".replication-summary"))), 30_000);
  checks.equal((await databaseRow(data, "expense-log")).state, "Replicating", "the app database is replicating again");
}
