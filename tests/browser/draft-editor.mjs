// A catalogue app edited on its Draft page in real Chromium, with no
// assistant: the real `sasha up` (tests/chromium/drafts.rs,
// `a_catalogue_app_is_edited_on_its_draft_page`), the dev admin, an app
// created over HTTP.
//
//  1. the Draft page with no draft: Publish is not offered; "Start a draft"
//     opens App Studio's editor on the draft's files;
//  2. app.js gains a module import: Check saves it into the draft and lists
//     the diagnostic with its line; choosing it selects that line in app.js;
//     Publish is disabled while the draft does not validate;
//  3. the import is replaced by a visible line: Check validates; Preview
//     shows the line under the preview banner; Close preview;
//  4. Publish… and "Yes, publish": published; the live app shows the line.
//
// Screenshots at 1440 and 375 px. Environment (set by the Rust side):
// CHROMIUM, STUDIO_URL, ADMIN_USER, ADMIN_PASSWORD, ARTIFACTS.

import fs from "node:fs";

import { Checks, env, launchChromium, runAndClose } from "./harness.mjs";
import { fitsNarrow, innerFrame, newStudioPage, screenshots, signIn } from "./studio-page.mjs";

const started = Date.now();
const STUDIO = env("STUDIO_URL");
const ADMIN = { username: env("ADMIN_USER"), password: env("ADMIN_PASSWORD") };
const ARTIFACTS = env("ARTIFACTS");
fs.mkdirSync(ARTIFACTS, { recursive: true });

const NAME = "Site diary";
const ID = "site-diary";
const IMPORT = 'import x from "y";';
const LINE = 'document.querySelector("main").append(Object.assign(document.createElement("p"), { textContent: "Edited on the Draft page" }));';

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
  await page.goto(`${STUDIO}/#/apps/${ID}/draft`);
  await signIn(page, ADMIN);
  const panel = page.locator(".draft-panel");
  await panel.getByRole("heading", { name: `Draft of ${NAME}` }).waitFor({ timeout: 20_000 });

  // --- 1. Start a draft: the editor opens on its files ----------------------
  await panel.getByRole("heading", { name: "No draft" }).waitFor();
  checks.equal(await panel.getByRole("button", { name: "Publish…" }).count(), 0, "no draft, nothing to publish");
  await panel.getByRole("button", { name: "Start a draft" }).click();
  await panel.getByRole("heading", { name: "Edit the draft's files" }).waitFor({ timeout: 20_000 });
  const script = panel.getByLabel("Contents of app.js");
  await script.waitFor();
  checks.ok(await panel.getByLabel("Contents of index.html").isVisible(), "the editor lists the draft's files");
  checks.ok(await panel.getByRole("button", { name: "Publish…" }).isDisabled(), "Publish is disabled while the draft equals the live app");
  await panel.getByText("Nothing to publish yet: the draft does not differ from the live app.").waitFor();
  await screenshot(page, "draft-editor-open", panel.getByRole("heading", { name: "Edit the draft's files" }));
  await fitsNarrow(page, checks, "the Draft page's editor");

  // --- 2. A broken app.js: the diagnostic at its line -----------------------
  const original = await script.inputValue();
  const lines = original.replace(/\n$/, "").split("\n").length;
  await script.fill(`${original.replace(/\n$/, "")}\n${IMPORT}\n`);
  await panel.getByRole("button", { name: "Check", exact: true }).click();
  const problem = panel.getByRole("list", { name: "Problems found" }).getByRole("button").first();
  await problem.waitFor({ timeout: 20_000 });
  const problemText = await problem.textContent();
  checks.ok(problemText.startsWith(`app.js:${lines + 1} `) && problemText.includes("JS_MODULE_SYNTAX"), "Check lists the diagnostic at its line", problemText);
  checks.ok(await panel.getByRole("button", { name: "Publish…" }).isDisabled(), "Publish is disabled while the draft does not validate");
  await problem.click();
  const selected = await script.evaluate((area) => ({ focused: document.activeElement === area, text: area.value.slice(area.selectionStart, area.selectionEnd) }));
  checks.ok(selected.focused, "choosing the diagnostic focuses app.js");
  checks.equal(selected.text, IMPORT, "with its line selected");
  await screenshot(page, "draft-editor-diagnostic", problem);

  // --- 3. Fixed: validates; Preview shows the change -----------------------
  await script.fill(`${original.replace(/\n$/, "")}\n${LINE}\n`);
  await panel.getByRole("button", { name: "Check", exact: true }).click();
  await panel.getByText("Checked: the draft validates. Preview it, then publish.").waitFor({ timeout: 20_000 });
  checks.ok(await panel.getByRole("button", { name: "Publish…" }).isEnabled(), "a changed draft that validates can be published");
  const changed = panel.getByRole("list", { name: "Changed files" });
  checks.ok((await changed.textContent()).includes("app.js"), "the review lists app.js as changed", await changed.textContent());
  await panel.getByRole("button", { name: "Preview", exact: true }).click();
  await panel.getByText("The preview is open.").waitFor({ timeout: 20_000 });
  await innerFrame(page, NAME).getByText("Edited on the Draft page").waitFor({ timeout: 20_000 });
  checks.ok(true, "the preview shows the edited draft");
  await screenshot(page, "draft-editor-preview", panel.locator(".draft-preview"));
  await panel.getByRole("button", { name: "Close preview" }).click();
  await panel.getByText("The preview is closed.").waitFor();

  // --- 4. Published ----------------------------------------------------------
  await panel.getByRole("button", { name: "Publish…" }).click();
  await panel.locator(".draft-confirm").getByRole("button", { name: "Yes, publish" }).click();
  const done = panel.locator(".draft-done");
  await done.waitFor({ timeout: 30_000 });
  checks.ok(/^Published revision [0-9a-f]{12}\.$/.test(await done.textContent()), "published", await done.textContent());
  await panel.getByRole("button", { name: "Open the app" }).click();
  await innerFrame(page, NAME).getByText("Edited on the Draft page").waitFor({ timeout: 20_000 });
  checks.ok(true, "the live app shows the edit");
  await screenshot(page, "draft-editor-live");
}
