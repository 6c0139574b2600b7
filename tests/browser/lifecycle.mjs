// Studio's lifecycle controls end to end in real Chromium: the real `sasha up`,
// one app, the dev admin, driven by role and label.
//
//  1. the admin opens the app: "Withdraw…" sits in the pane's header; it asks
//     in the pane (the app disappears for everyone, its data, history and
//     grants kept, it can be restored); Cancel leaves everything;
//  2. confirming withdraws it: it leaves the sidebar and the page becomes
//     Withdrawn apps, which lists it (name, id, when, by whom);
//  3. Restore brings it back into the sidebar, and the list is empty;
//  4. withdrawn again from the pane, "Delete…" with "Also delete its data"
//     keeps Delete disabled until the app id is typed exactly; deleting says
//     so (naming the data backup, printed as `backup <file>` for the Rust
//     side) and the app is listed without Restore;
//  5. screenshots of each step at 1440 and 390 px, with no horizontal
//     overflow at 390 px.
//
// Environment (set by tests/chromium/lifecycle.rs): CHROMIUM, STUDIO_URL,
// ADMIN_USER, ADMIN_PASSWORD, ARTIFACTS.

import fs from "node:fs";

import { Checks, env, launchChromium, runAndClose, waitFor } from "./harness.mjs";
import { NARROW, WIDE, appLink, newStudioPage, screenshots, sidebar, signIn } from "./studio-page.mjs";

const started = Date.now();
const STUDIO = env("STUDIO_URL");
const ADMIN = { username: env("ADMIN_USER"), password: env("ADMIN_PASSWORD") };
const ARTIFACTS = env("ARTIFACTS");
fs.mkdirSync(ARTIFACTS, { recursive: true });

const NAME = "Site visits";
const ID = "site-visits";

const checks = new Checks();
const taken = [];
let backupLine = null;

const browser = await launchChromium();
await runAndClose(browser, run, taken);
if (backupLine) {
  console.log(`backup ${backupLine}`);
}
console.log(`${checks.passed} checks passed in ${((Date.now() - started) / 1000).toFixed(1)} s; screenshots in ${ARTIFACTS}`);

/** Screenshots at both widths, checking at 390 px that nothing scrolls sideways. */
async function screenshot(page, name, subject = null) {
  await screenshots(page, ARTIFACTS, name, taken, subject);
  await page.setViewportSize(NARROW);
  await page.waitForTimeout(150);
  const overflow = await page.evaluate(() => document.documentElement.scrollWidth - document.documentElement.clientWidth);
  checks.ok(overflow <= 0, `${name}: no horizontal overflow at 390 px`, { overflow });
  await page.setViewportSize(WIDE);
  await page.waitForTimeout(100);
}

async function withdrawFromPane(page, { cancelFirst }) {
  await appLink(page, NAME).click();
  await page.getByText(`${NAME} is open.`).waitFor({ timeout: 20_000 });
  const withdraw = page.getByRole("button", { name: "Withdraw…", exact: true });
  checks.ok(await withdraw.isVisible(), "an admin is offered Withdraw… in the app's pane");
  await withdraw.click();
  const confirm = page.getByRole("region", { name: `Withdraw ${NAME}?` });
  await confirm.waitFor();
  const text = await confirm.textContent();
  checks.ok(/disappears for everyone/.test(text), "the confirmation says the app disappears for everyone", text);
  checks.ok(/data, history and access grants are kept/.test(text), "and that its data, history and grants are kept", text);
  checks.ok(/restore/.test(text), "and that it can be restored", text);
  if (cancelFirst) {
    await screenshot(page, "withdraw-confirm", confirm);
    await confirm.getByRole("button", { name: "Cancel" }).click();
    checks.equal(await confirm.count(), 0, "Cancel closes the confirmation");
    checks.ok(await appLink(page, NAME).isVisible(), "and the app stays");
    await withdraw.click();
    await confirm.waitFor();
  }
  await confirm.getByRole("button", { name: "Yes, withdraw" }).click();
  const panel = page.locator(".withdrawn-panel");
  await panel.getByRole("heading", { name: "Withdrawn apps", level: 1 }).waitFor({ timeout: 20_000 });
  checks.ok(page.url().endsWith("#/withdrawn"), "the page goes to Withdrawn apps", page.url());
  await panel.getByText(`Withdrew ${NAME}`).waitFor();
  await waitFor("the app to leave the sidebar", async () => (await appLink(page, NAME).count()) === 0);
  checks.ok(true, "the withdrawn app left the sidebar");
  return panel;
}

async function run() {
  const { page } = await newStudioPage(browser, "admin");
  await page.goto(`${STUDIO}/#/`);
  await signIn(page, ADMIN);
  await appLink(page, NAME).waitFor();
  checks.ok(await sidebar(page).getByRole("button", { name: "Withdrawn apps" }).isVisible(), "admins have Withdrawn apps in the sidebar");

  // --- 1 and 2. Withdraw from the pane -------------------------------------
  let panel = await withdrawFromPane(page, { cancelFirst: true });
  const item = panel.locator(`.withdrawn-item[data-app="${ID}"]`);
  await item.waitFor();
  checks.equal(await panel.locator(".withdrawn-item").count(), 1, "one withdrawn app is listed");
  checks.equal(await item.getByRole("heading", { name: NAME }).count(), 1, "by its name");
  const meta = await item.locator(".withdrawn-meta").textContent();
  checks.ok(meta.startsWith(`${ID} · withdrawn `) && meta.endsWith(`by ${ADMIN.username}`), "with its id, when and by whom", meta);
  checks.ok((await item.textContent()).includes("kept"), "and what is kept");
  await screenshot(page, "withdrawn-list", panel);

  // --- 3. Restore -----------------------------------------------------------
  await item.getByRole("button", { name: `Restore ${NAME}` }).click();
  await panel.getByText(`Restored ${NAME}`).waitFor({ timeout: 20_000 });
  await appLink(page, NAME).waitFor();
  checks.ok(true, "Restore puts the app back in the sidebar");
  await panel.getByText(/^No app is withdrawn/).waitFor();
  checks.equal(await panel.locator(".withdrawn-item").count(), 0, "the list is empty again");
  await screenshot(page, "withdrawn-restored", panel);
  // The restored app opens again.
  await appLink(page, NAME).click();
  await page.getByText(`${NAME} is open.`).waitFor({ timeout: 20_000 });
  checks.ok(page.url().endsWith(`#/apps/${ID}`), "the restored app opens");

  // --- 4. Withdraw again, then delete with its data -------------------------
  panel = await withdrawFromPane(page, { cancelFirst: false });
  await item.waitFor();
  await item.getByRole("button", { name: `Delete ${NAME}…` }).click();
  const confirm = item.locator(".withdrawn-confirm");
  await confirm.getByRole("heading", { name: `Delete ${NAME}?` }).waitFor();
  const deleteButton = confirm.getByRole("button", { name: "Delete", exact: true });
  checks.ok(await deleteButton.isEnabled(), "without the data, Delete needs no more");
  const dataBox = confirm.getByLabel("Also delete its data (a backup is kept)");
  await dataBox.check();
  const typed = confirm.getByLabel(`Type the app id ${ID} to confirm`);
  await typed.waitFor();
  checks.ok(await deleteButton.isDisabled(), "with the data, Delete is disabled until the id is typed");
  await typed.fill(ID.slice(0, -1));
  checks.ok(await deleteButton.isDisabled(), "a partial id keeps it disabled");
  await typed.fill("Site-Visits");
  checks.ok(await deleteButton.isDisabled(), "so does the wrong case");
  await screenshot(page, "delete-confirm", confirm);
  await typed.fill(ID);
  checks.ok(await deleteButton.isEnabled(), "the exact id enables Delete");
  await deleteButton.click();
  const outcome = panel.locator(".withdrawn-outcome");
  await outcome.getByText(`Deleted the package of ${NAME}.`).waitFor({ timeout: 20_000 });
  const said = await outcome.textContent();
  checks.ok(/Its data was (backed up to \S+ and )?deleted\./.test(said), "the data deletion is said", said);
  const backup = /backed up to (\S+) and deleted/.exec(said);
  if (backup) {
    backupLine = backup[1];
  }
  await item.locator(".badge", { hasText: "package deleted" }).waitFor();
  checks.equal(await item.getByRole("button", { name: `Restore ${NAME}` }).count(), 0, "a deleted package offers no Restore");
  checks.ok((await item.textContent()).includes("cannot be restored"), "and says it cannot be restored");
  checks.equal(await appLink(page, NAME).count(), 0, "the deleted app is not in the sidebar");
  await screenshot(page, "deleted", panel);

  // The Apps sidebar is the empty state again; its Withdrawn apps button finds the deleted app.
  checks.ok(await sidebar(page).getByText("No apps yet").isVisible(), "no apps are left");
  await page.goto(`${STUDIO}/#/`);
  await sidebar(page).getByRole("button", { name: "Withdrawn apps" }).click();
  await page.locator(`.withdrawn-panel .withdrawn-item[data-app="${ID}"]`).waitFor({ timeout: 20_000 });
  checks.ok(page.url().endsWith("#/withdrawn"), "the sidebar's Withdrawn apps opens the page", page.url());
  checks.equal(await sidebar(page).getByRole("button", { name: "Withdrawn apps" }).getAttribute("aria-current"), "page", "and marks itself current");
  // On a phone the sidebar is hidden: the home page offers Withdrawn apps instead.
  await page.setViewportSize(NARROW);
  await page.goto(`${STUDIO}/#/`);
  const home = page.getByRole("main").getByRole("button", { name: "Withdrawn apps" });
  await home.waitFor();
  await home.click();
  await page.getByRole("heading", { name: "Withdrawn apps", level: 1 }).waitFor();
  checks.ok(page.url().endsWith("#/withdrawn"), "on a phone, the home page's Withdrawn apps opens the page", page.url());
  await page.setViewportSize(WIDE);
}
