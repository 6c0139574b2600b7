// Studio's Activity panel end to end in real Chromium: the dev admin opens
// the app's Activity, sees its four changes with who started each (the app's
// view, and the assistant's conversation), filters to the conversation,
// previews the undo (three rows to remove, no conflict) and undoes it; the
// list then holds the conversation's changes still, and the done line and
// the status name the undo's id. Then a restore to an instant before every
// change: refused from the copy in object storage (no replication here),
// previewed and applied from the ledger, which says it starts later.
//
// Environment (set by tests/chromium/activity.rs): CHROMIUM, STUDIO_URL,
// ADMIN_USER, ADMIN_PASSWORD, CONVERSATION, ARTIFACTS.

import fs from "node:fs";

import { Checks, env, launchChromium, runAndClose } from "./harness.mjs";
import { newStudioPage, screenshots, signIn } from "./studio-page.mjs";

const started = Date.now();
const STUDIO = env("STUDIO_URL");
const ADMIN = { username: env("ADMIN_USER"), password: env("ADMIN_PASSWORD") };
const CONVERSATION = env("CONVERSATION");
const ARTIFACTS = env("ARTIFACTS");
fs.mkdirSync(ARTIFACTS, { recursive: true });

const NAME = "Field log";
const ID = "field-log";

const checks = new Checks();
const taken = [];

const browser = await launchChromium();
await runAndClose(browser, run, taken);
console.log(`${checks.passed} checks passed in ${((Date.now() - started) / 1000).toFixed(1)} s; screenshots in ${ARTIFACTS}`);

async function run() {
  const { page } = await newStudioPage(browser, "admin");
  await page.goto(`${STUDIO}/#/apps/${ID}`);
  await signIn(page, ADMIN);
  await page.getByText(`${NAME} is open.`).waitFor({ timeout: 20_000 });

  const button = page.getByRole("button", { name: "Activity", exact: true });
  checks.ok(await button.isVisible(), "a manager is offered Activity");
  await button.click();
  const panel = page.locator(".activity-panel");
  await panel.getByRole("heading", { name: `Activity of ${NAME}` }).waitFor();
  checks.ok(page.url().endsWith(`#/apps/${ID}/activity`), "Activity has its own route", page.url());
  await panel.getByText("4 changes shown, newest first.").waitFor();
  const through = await panel.locator(".activity-initiator").allTextContents();
  checks.equal(through.filter((text) => text === `assistant ${CONVERSATION}`).length, 3, "three changes are the conversation's", through);
  checks.equal(through.filter((text) => text === "app-view").length, 1, "one was made in the app's own view", through);
  await screenshots(page, ARTIFACTS, "activity-list", taken, panel);

  await panel.getByLabel("Started by").selectOption("assistant");
  await panel.getByLabel("Id").fill(CONVERSATION);
  await panel.getByRole("button", { name: "Show" }).click();
  await panel.getByText("3 changes shown, newest first.").waitFor();

  await panel.getByRole("button", { name: "Preview undo" }).click();
  await panel.getByRole("heading", { name: "Undo 3 changes: 3 rows, 0 conflicts" }).waitFor();
  const actions = await panel.locator(".activity-preview tbody tr td:nth-child(2)").allTextContents();
  checks.equal(actions.join(","), "delete,delete,delete", "undoing creates removes the rows", actions);
  await screenshots(page, ARTIFACTS, "activity-preview", taken, panel);

  await panel.getByRole("button", { name: "Undo 3 rows" }).click();
  const done = panel.locator(".activity-done");
  const refused = panel.locator(".alert");
  await Promise.race([done.waitFor(), refused.waitFor()]);
  checks.ok(await refused.isHidden(), "the undo is not refused", await refused.textContent());
  const line = await done.textContent();
  checks.ok(/^Undone: 0 recreated, 0 put back, 3 removed, 0 left alone\. To take it back, undo undo-[0-9a-f]{16}\.$/.test(line), "the undo says what it did and its id", line);
  await panel.getByText(/^Undone \(undo-[0-9a-f]{16}\)\.$/).waitFor();
  checks.equal(await panel.locator(".activity-list tbody tr").count(), 3, "the conversation's changes stay listed after the undo");
  await screenshots(page, ARTIFACTS, "activity-undone", taken, panel);

  // A restore to an instant before every change: from the copy in object
  // storage it is refused (this Studio does not replicate), from the
  // ledger it undoes all seven changes, and the preview says the ledger
  // starts after the instant.
  await panel.getByLabel("Started by").selectOption("");
  await panel.getByLabel("Id").fill("");
  await panel.getByLabel("Restore the rows as they were at").fill("2000-01-01T00:00:00");
  await panel.getByLabel("from the copy in object storage").check();
  await panel.getByRole("button", { name: "Preview restore" }).click();
  await refused.waitFor();
  checks.ok((await refused.textContent()).includes("SASHA_REPLICA_URL"), "without replication the copy in object storage is refused, saying why", await refused.textContent());
  await panel.getByLabel("from the copy in object storage").uncheck();
  await panel.getByRole("button", { name: "Preview restore" }).click();
  await panel.getByRole("heading", { name: "Restore to 2000-01-01T00:00:00.000Z by undoing 7 changes: 1 rows, 0 conflicts" }).waitFor();
  checks.ok(await refused.isHidden(), "the ledger's restore is not refused");
  const note = await panel.locator(".activity-note").textContent();
  checks.ok(note.startsWith("The ledger starts at ") && note.includes("only in the copy in object storage"), "the preview says the ledger starts after the instant", note);
  await screenshots(page, ARTIFACTS, "activity-restore", taken, panel);
  await panel.getByRole("button", { name: "Restore 1 rows" }).click();
  await done.waitFor();
  const restored = await done.textContent();
  checks.ok(/^Undone: 0 recreated, 0 put back, 1 removed, 0 left alone\. To take it back, undo undo-[0-9a-f]{16}\.$/.test(restored), "the restore removes the row written after the instant", restored);
}
