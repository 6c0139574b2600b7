// Studio's History panel end to end in real Chromium (issue 23, part 4): the
// real `sasha up`, an app with two revisions (created, then a file added on
// disk), driven by role and label.
//
//  1. the dev admin opens the app: History sits next to Recovery;
//  2. History lists both revisions newest first, the current one marked;
//  3. choosing the first shows what reverting to it would change (the added
//     file removed, styles.css changed); "View file" shows styles.css as it
//     was at the first revision, and a removed file at the current one;
//  4. "Revert to this revision" asks in the panel; Cancel (and Escape) leaves everything;
//     confirming reverts and the list marks the first revision current;
//  5. screenshots of the list, the diff, the confirmation and the result at
//     1440 and 375 px.
//
// Environment (set by tests/chromium/history.rs): CHROMIUM, STUDIO_URL,
// ADMIN_USER, ADMIN_PASSWORD, FIRST, SECOND, STYLES_FIRST, ARTIFACTS.

import fs from "node:fs";

import { Checks, env, launchChromium, runAndClose } from "./harness.mjs";
import { newStudioPage, screenshots, signIn } from "./studio-page.mjs";

const started = Date.now();
const STUDIO = env("STUDIO_URL");
const ADMIN = { username: env("ADMIN_USER"), password: env("ADMIN_PASSWORD") };
const FIRST = env("FIRST");
const SECOND = env("SECOND");
const STYLES_FIRST = env("STYLES_FIRST");
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

async function run() {
  const { page } = await newStudioPage(browser, "admin");
  await page.goto(`${STUDIO}/#/apps/${ID}`);
  await signIn(page, ADMIN);
  await page.getByText(`${NAME} is open.`).waitFor({ timeout: 20_000 });

  // --- 1. The button --------------------------------------------------------
  const historyButton = page.getByRole("button", { name: "History", exact: true });
  checks.ok(await historyButton.isVisible(), "a manager who may write apps is offered History");
  await historyButton.click();
  const panel = page.locator(".history-panel");
  await panel.getByRole("heading", { name: `History of ${NAME}` }).waitFor();
  checks.ok(page.url().endsWith(`#/apps/${ID}/history`), "History has its own route", page.url());

  // --- 2. The list ----------------------------------------------------------
  await panel.getByText("2 revisions.").waitFor();
  const items = panel.locator(".history-item");
  checks.equal(await items.count(), 2, "both revisions are listed");
  checks.equal(await items.nth(0).getAttribute("data-revision"), SECOND, "newest first");
  checks.equal(await items.nth(1).getAttribute("data-revision"), FIRST, "the first revision last");
  checks.equal(await items.nth(0).locator(".badge").textContent(), "current", "the current revision is marked");
  checks.equal(await items.nth(1).locator(".badge").count(), 0, "only the current one");
  checks.ok((await items.nth(1).textContent()).includes(ADMIN.username), "who made the first revision is shown", await items.nth(1).textContent());
  await screenshot(page, "history-list", panel);

  // --- 3. The diff ----------------------------------------------------------
  await items.nth(1).getByRole("button").click();
  await panel.getByRole("heading", { name: `Reverting to ${FIRST.slice(0, 12)} would change` }).waitFor();
  checks.ok(await panel.locator(".history-files").getByText("removed notes.txt").isVisible(), "the added file would be removed");
  checks.ok(await panel.locator(".history-files").getByText("changed styles.css").isVisible(), "the edited file would change back");
  await screenshot(page, "history-diff", panel);

  // --- 3b. View file: the file as it was at the older revision --------------
  const stylesAtFirst = `styles.css at ${FIRST.slice(0, 12)}`;
  await panel.getByRole("button", { name: `View ${stylesAtFirst}` }).click();
  const shown = panel.getByLabel(stylesAtFirst, { exact: true });
  await shown.waitFor();
  checks.equal(await shown.evaluate((element) => element.tagName), "PRE", "the file is shown in a <pre>");
  const content = await shown.textContent();
  checks.equal(content, STYLES_FIRST, "View file shows styles.css as it was at the older revision");
  checks.ok(!content.includes("Tuned on site"), "without the later edit");
  await screenshot(page, "history-view-file", shown);
  await panel.getByRole("button", { name: `Hide ${stylesAtFirst}` }).click();
  checks.equal(await shown.count(), 0, "Hide file closes it");
  // A file the older revision lacks is shown at the current one.
  const notesNow = `notes.txt at ${SECOND.slice(0, 12)} (current)`;
  await panel.getByRole("button", { name: `View ${notesNow}` }).click();
  await panel.getByLabel(notesNow, { exact: true }).getByText("Fence post leaning at gate 3").waitFor();
  checks.ok(true, "a removed file is shown as it is now");

  // --- 4. The revert, confirmed in the panel --------------------------------
  await panel.getByRole("button", { name: "Revert to this revision" }).click();
  const confirm = panel.locator(".history-confirm");
  await confirm.getByText(/^Revert Field notes to revision/).waitFor();
  await screenshot(page, "history-confirm", confirm);
  await confirm.getByRole("button", { name: "Cancel" }).click();
  checks.equal(await confirm.getByRole("button").count(), 0, "Cancel closes the confirmation");
  checks.equal(await items.nth(0).getAttribute("data-revision"), SECOND, "and nothing changed");
  // Escape closes the question too, and gives the focus back to the button that asked it.
  const revertButton = panel.getByRole("button", { name: "Revert to this revision" });
  await revertButton.click();
  await confirm.getByRole("button", { name: "Yes, revert" }).waitFor();
  await page.keyboard.press("Escape");
  checks.equal(await confirm.getByRole("button").count(), 0, "Escape closes the confirmation");
  checks.ok(await revertButton.evaluate((button) => button === document.activeElement), "and the focus is back on Revert to this revision");
  await revertButton.click();
  await confirm.getByRole("button", { name: "Yes, revert" }).click();
  await panel.getByText(`Reverted ${NAME} to ${FIRST.slice(0, 12)}.`).waitFor({ timeout: 20_000 });
  await panel.locator(`.history-item[data-revision="${FIRST}"] .badge`).waitFor();
  checks.equal(await panel.locator(".history-item .badge").count(), 1, "one current revision");
  checks.equal(
    await panel.locator(".history-item .badge").evaluate((badge) => badge.closest(".history-item").dataset.revision),
    FIRST,
    "the first revision is current again",
  );
  // The revert adds no revision (the first one is current again), so History lists the revert itself, first.
  const revertItem = panel.locator(".history-list > li").first();
  checks.ok(await revertItem.evaluate((item) => item.classList.contains("history-revert")), "the revert is the newest entry in History");
  const revertText = await revertItem.textContent();
  checks.ok(revertText.includes(`Reverted to ${FIRST.slice(0, 12)}`) && revertText.includes(ADMIN.username), "it says what was reverted to and by whom", revertText);
  await screenshot(page, "history-reverted", panel);

  // --- 5. Back to the app, at the reverted revision -------------------------
  await panel.getByRole("button", { name: "Back to the app" }).click();
  await page.getByText(`${NAME} is open.`).waitFor({ timeout: 20_000 });
  checks.ok(page.url().endsWith(`#/apps/${ID}`), "Back to the app closes History");
}
