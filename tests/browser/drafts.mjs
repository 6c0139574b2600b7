// Studio's Draft page end to end in real Chromium: the real `sasha up`, an app
// with a table whose draft (started over HTTP, filled through the MCP source
// tools with `draft: true`) adds a migration and changes app.js, driven by
// role and label.
//
//  1. the dev admin opens the app: Draft sits next to History and opens its
//     own route, the app's own view closed;
//  2. the page says who started the draft, that it validates, lists the
//     changed files with their diffs, and the schema review (the migration
//     with its SQL, the new column);
//  3. Preview opens the draft's UI under the preview banner: it shows the
//     draft's "Now with notes" and a row added there carries the draft's new
//     column; Close preview removes it;
//  4. "Publish…" asks in the panel (the migration repeated, live for every
//     user); Cancel leaves everything; while the question is open another
//     session changes the draft (the Rust side, after the `reviewed`
//     handshake), and confirming is refused ("the draft changed since you
//     reviewed it"), nothing published, the late change drawn for review
//     (the `refused` handshake lets the Rust side check the live app);
//     confirming again publishes and names the revision; the live app then
//     shows the draft's UI without the preview's row;
//  5. the draft is gone after publishing ("No draft", "Start a draft"); a new
//     one is started and discarded after the in-panel confirmation;
//  6. no horizontal overflow at 375 px; screenshots of each step at 1440 and
//     375 px.
//
// Environment (set by tests/chromium/drafts.rs): CHROMIUM, STUDIO_URL,
// ADMIN_USER, ADMIN_PASSWORD, BASE, PREVIEW_ROW, ARTIFACTS.

import fs from "node:fs";

import { Checks, env, handshake, launchChromium, runAndClose } from "./harness.mjs";
import { fitsNarrow, innerFrame, newStudioPage, outerFrame, screenshots, signIn } from "./studio-page.mjs";

const started = Date.now();
const STUDIO = env("STUDIO_URL");
const ADMIN = { username: env("ADMIN_USER"), password: env("ADMIN_PASSWORD") };
const BASE = env("BASE");
const PREVIEW_ROW = env("PREVIEW_ROW");
const ARTIFACTS = env("ARTIFACTS");
fs.mkdirSync(ARTIFACTS, { recursive: true });

const NAME = "Field notes";
const ID = "field-notes";
const BANNER = "Preview — a scratch copy of the data with the draft's migrations; nothing here changes live records.";

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

  // --- 1. The button and the route ------------------------------------------
  const draftButton = page.getByRole("button", { name: "Draft", exact: true });
  checks.ok(await draftButton.isVisible(), "a manager who may write apps is offered Draft");
  checks.ok(await page.getByRole("button", { name: "History", exact: true }).isVisible(), "next to History");
  await draftButton.click();
  const panel = page.locator(".draft-panel");
  await panel.getByRole("heading", { name: `Draft of ${NAME}` }).waitFor();
  checks.ok(page.url().endsWith(`#/apps/${ID}/draft`), "Draft has its own route", page.url());
  await page.getByText(`${NAME}'s own view is closed while its draft is open.`).waitFor();
  checks.equal(await outerFrame(page, NAME).count(), 0, "the app's live view is closed");

  // --- 2. The review --------------------------------------------------------
  await panel.getByText("The draft validates.").waitFor({ timeout: 20_000 });
  const meta = await panel.locator(".draft-meta").textContent();
  checks.ok(meta.startsWith("Started by "), "who started the draft is shown", meta);
  checks.ok(meta.includes(`from revision ${BASE.slice(0, 12)}`), "and the revision it began from", meta);
  checks.ok(await panel.locator(".draft-status").getByText(/^Validates/).isVisible(), "the status says it validates");
  checks.equal(await panel.locator(".draft-stale").count(), 0, "no stale warning");
  const files = panel.getByRole("list", { name: "Changed files" });
  const migrationFile = files.locator('.draft-file[data-path="migrations/002-add-note.sql"]');
  const scriptFile = files.locator('.draft-file[data-path="app.js"]');
  checks.ok((await migrationFile.textContent()).includes("added"), "the migration is an added file", await migrationFile.textContent());
  checks.ok((await scriptFile.locator("summary").textContent()).includes("changed"), "app.js is a changed file");
  const scriptDiff = scriptFile.getByLabel("Changes to app.js");
  if (!(await scriptDiff.isVisible())) {
    await scriptFile.locator("summary").click();
  }
  checks.ok((await scriptDiff.textContent()).includes("+edition.textContent = \"Now with notes\";"), "the unified diff shows the added line", await scriptDiff.textContent());
  await screenshot(page, "draft-review", panel.getByRole("heading", { name: "Changes", exact: true }));

  const review = panel.locator(".draft-review");
  await review.getByRole("heading", { name: "Schema changes" }).waitFor();
  const migrationSql = review.getByLabel("SQL of migrations/002-add-note.sql");
  checks.ok((await migrationSql.textContent()).includes("ADD COLUMN note"), "the migration to apply is shown with its SQL", await migrationSql.textContent());
  const reviewText = await review.textContent();
  checks.ok(/Table items/.test(reviewText) && /note: added/.test(reviewText), "the new column is in the review", reviewText);
  checks.equal(await review.locator(".draft-drift").count(), 0, "no drift");
  await screenshot(page, "draft-schema", review);
  await fitsNarrow(page, checks, "the review");

  // --- 3. The preview -------------------------------------------------------
  await panel.getByRole("button", { name: "Preview", exact: true }).click();
  const preview = panel.locator(".draft-preview");
  await preview.getByText(BANNER).waitFor();
  checks.ok(await preview.getByRole("button", { name: "Close preview" }).isVisible(), "the preview can be closed");
  await panel.getByText("The preview is open.").waitFor({ timeout: 20_000 });
  const view = innerFrame(page, NAME);
  await view.getByText("Now with notes").waitFor({ timeout: 20_000 });
  checks.ok(true, "the preview shows the draft's UI");
  await view.getByLabel("New item").fill(PREVIEW_ROW);
  await view.getByRole("button", { name: "Add" }).click();
  await view.getByRole("listitem").filter({ hasText: `${PREVIEW_ROW} — noted in the draft` }).waitFor({ timeout: 20_000 });
  checks.ok(true, "a row added in the preview carries the draft's new column");
  await screenshot(page, "draft-preview", preview);
  await fitsNarrow(page, checks, "the preview");
  await preview.getByRole("button", { name: "Close preview" }).click();
  await panel.getByText("The preview is closed.").waitFor();
  checks.equal(await outerFrame(page, NAME).count(), 0, "Close preview removes its frame");
  checks.equal(await panel.locator(".draft-preview").count(), 0, "and the banner");

  // --- 4. Publishing, confirmed in the panel --------------------------------
  await panel.getByRole("button", { name: "Publish…" }).click();
  const confirm = panel.locator(".draft-confirm");
  await confirm.getByRole("heading", { name: "Publish this draft?" }).waitFor();
  const confirmText = await confirm.textContent();
  checks.ok(confirmText.includes("live for every user"), "the confirmation says it goes live for everyone", confirmText);
  checks.ok(confirmText.includes("migrations/002-add-note.sql"), "and repeats the migration", confirmText);
  checks.ok(confirmText.includes("note: added"), "and the schema change", confirmText);
  await screenshot(page, "draft-confirm", confirm);
  await confirm.getByRole("button", { name: "Cancel" }).click();
  checks.equal(await confirm.getByRole("button").count(), 0, "Cancel closes the confirmation");
  checks.ok(await panel.getByRole("button", { name: "Publish…" }).isEnabled(), "and nothing changed");

  // --- 4a. The draft changes after the review: Publish is refused -----------
  await panel.getByRole("button", { name: "Publish…" }).click();
  await confirm.getByRole("button", { name: "Yes, publish" }).waitFor();
  // Another session changes the draft while the person reads the question.
  const edited = await handshake({ step: "reviewed" });
  checks.ok(edited && typeof edited.lateLine === "string", "the Rust side changed the draft", JSON.stringify(edited));
  await confirm.getByRole("button", { name: "Yes, publish" }).click();
  const alert = panel.locator(".draft-alert");
  await alert.getByText(/The draft changed since you reviewed it/).waitFor({ timeout: 30_000 });
  checks.ok((await alert.textContent()).includes("APP_CONFLICT"), "the refusal is a conflict, named", await alert.textContent());
  checks.equal(await panel.locator(".draft-done").count(), 0, "nothing was published");
  // The page shows the draft as it is now, with the change nobody reviewed.
  const lateScript = files.locator('.draft-file[data-path="app.js"]');
  const lateDiff = lateScript.getByLabel("Changes to app.js");
  if (!(await lateDiff.isVisible())) {
    await lateScript.locator("summary").click();
  }
  await lateDiff.getByText(edited.lateLine, { exact: false }).waitFor({ timeout: 20_000 });
  checks.ok(true, "the review is drawn again with the late change to read");
  await screenshot(page, "draft-changed", alert);
  await handshake({ step: "refused" });

  // Reviewed again, the draft as it is now is published.
  await panel.getByRole("button", { name: "Publish…" }).click();
  await confirm.getByRole("button", { name: "Yes, publish" }).click();
  const done = panel.locator(".draft-done");
  await done.waitFor({ timeout: 30_000 });
  const doneText = await done.textContent();
  const match = /^Published revision ([0-9a-f]{12})\.$/.exec(doneText);
  checks.ok(match, "the page names the published revision", doneText);
  checks.ok(match[1] !== BASE.slice(0, 12), "a new revision", doneText);
  console.log(`published ${match[1]}`);
  checks.ok((await panel.locator(".draft-body").textContent()).includes("migrations/002-add-note.sql"), "the applied migration is listed");
  await screenshot(page, "draft-published", panel);
  await fitsNarrow(page, checks, "the published page");

  // --- 5. The live app is the draft, without the preview's row --------------
  await panel.getByRole("button", { name: "Open the app" }).click();
  await page.getByText(`${NAME} is open.`).waitFor({ timeout: 20_000 });
  checks.ok(page.url().endsWith(`#/apps/${ID}`), "Open the app leaves the Draft page");
  const live = innerFrame(page, NAME);
  await live.getByText("Now with notes").waitFor({ timeout: 20_000 });
  await live.getByText("No items yet. Add the first one above.").waitFor();
  checks.equal(await live.getByText(PREVIEW_ROW).count(), 0, "the preview's row is not in the live app");
  await screenshot(page, "draft-live");

  // --- 6. The draft is gone: "No draft" and the way to start one -------------
  await page.getByRole("button", { name: "Draft", exact: true }).click();
  await panel.getByRole("heading", { name: "No draft" }).waitFor();
  checks.ok(await panel.getByRole("button", { name: "Start a draft" }).isVisible(), "after publishing there is no draft; one can be started");
  checks.ok((await panel.textContent()).includes("draft: true"), "the page says how a draft is edited");
  await screenshot(page, "draft-none", panel);

  // --- 7. Start a draft, then discard it (confirmed in the panel) -----------
  await panel.getByRole("button", { name: "Start a draft" }).click();
  await panel.getByText("The draft validates.").waitFor({ timeout: 20_000 });
  await panel.getByText("No file differs from the live app yet.").waitFor();
  checks.ok(await panel.getByRole("button", { name: "Publish…" }).isDisabled(), "a draft that does not differ from the live app cannot be published");
  await panel.getByText("Nothing to publish yet: the draft does not differ from the live app.").waitFor();
  checks.ok(true, "and the page says why");
  await panel.getByRole("button", { name: "Discard draft…" }).click();
  await confirm.getByRole("heading", { name: "Discard this draft?" }).waitFor();
  await screenshot(page, "draft-discard", confirm);
  await confirm.getByRole("button", { name: "Cancel" }).click();
  checks.equal(await confirm.getByRole("button").count(), 0, "Cancel keeps the draft");
  // Escape closes the question too, the focus back on the button that asked it.
  const discard = panel.getByRole("button", { name: "Discard draft…" });
  await discard.click();
  await confirm.getByRole("button", { name: "Yes, discard" }).waitFor();
  await page.keyboard.press("Escape");
  checks.equal(await confirm.getByRole("button").count(), 0, "Escape keeps the draft");
  checks.ok(await discard.evaluate((button) => button === document.activeElement), "and gives the focus back to Discard draft…");
  await discard.click();
  await confirm.getByRole("button", { name: "Yes, discard" }).click();
  await panel.getByRole("heading", { name: "No draft" }).waitFor({ timeout: 20_000 });
  await panel.getByText("The draft is discarded; the live app is unchanged.").waitFor();
  checks.ok(true, "discarding leaves no draft");
}
