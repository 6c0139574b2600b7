// Studio's assistant pane end to end in real Chromium: the real `sasha up`
// with a scripted model (tests/browser_assistant.rs), driven by role and label.
//
//  1. the header's Assistant button opens the pane beside the app pane (a
//     right column at 1440 px; over the main area with Close at 375 px, no
//     horizontal overflow); Shift+Enter is a new line, Enter sends;
//  2. "Build me an expense log": the createApp call comes as a confirmation
//     card (title, app, tool, its arguments); Approve disables both buttons
//     and says "Approved"; the call then succeeds; the read-only
//     listAppFiles gets no card; the answer streams in; the sidebar lists
//     the new app;
//  3. "Add a note field": the writeAppFile card shows the file's diff
//     ("+# Notes") and "Open the draft"; Deny says "Declined" and the call
//     is marked declined;
//  4. "Log a coffee": the row card shows the values in a table; Approve; the
//     model reads the row back ("Logged.");
//  5. after a reload the conversation is listed and its transcript kept;
//  6. the created app opens from the sidebar and shows the row.
//
// Prints `confirmation <id>` for each decision posted (the Rust side checks
// that no id ever reached the model) and the screenshots at 1440 and 375 px.
//
// Environment (set by tests/browser_assistant.rs): CHROMIUM, STUDIO_URL,
// ADMIN_USER, ADMIN_PASSWORD, ARTIFACTS.

import fs from "node:fs";

import { Checks, env, launchChromium, runAndClose } from "./harness.mjs";
import { NARROW, WIDE, appLink, innerFrame, newStudioPage, screenshots, signIn } from "./studio-page.mjs";

const started = Date.now();
const STUDIO = env("STUDIO_URL");
const ADMIN = { username: env("ADMIN_USER"), password: env("ADMIN_PASSWORD") };
const ARTIFACTS = env("ARTIFACTS");
fs.mkdirSync(ARTIFACTS, { recursive: true });

const NAME = "Expense log";
const ROW_TOOL = "app__expense_log__items__create";

const checks = new Checks();
const taken = [];

const browser = await launchChromium();
await runAndClose(browser, run, taken);
console.log(`${checks.passed} checks passed in ${((Date.now() - started) / 1000).toFixed(1)} s; screenshots in ${ARTIFACTS}`);

function screenshot(page, name, subject = null) {
  return screenshots(page, ARTIFACTS, name, taken, subject);
}

/** At 375 px the page scrolls vertically only. */
async function fitsNarrow(page, what) {
  await page.setViewportSize(NARROW);
  await page.waitForTimeout(250);
  const widths = await page.evaluate(() => ({ scroll: document.documentElement.scrollWidth, client: document.documentElement.clientWidth }));
  checks.ok(widths.scroll <= widths.client, `${what}: no horizontal overflow at 375 px`, widths);
  await page.setViewportSize(WIDE);
  await page.waitForTimeout(100);
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
  checks.ok(await pane.isVisible(), "at 375 px the pane is shown");
  checks.ok(!(await main.isVisible()), "over the main area");
  checks.ok(await pane.getByRole("button", { name: "Close the assistant" }).isVisible(), "with a close button");
  await page.setViewportSize(WIDE);
  await fitsNarrow(page, "the empty pane");

  // --- 2. createApp, approved -------------------------------------------------
  await ask(pane, "Build me an expense log");
  await pane.locator(".assistant-user").filter({ hasText: "Build me an expense log" }).waitFor();
  checks.equal(await prompt.inputValue(), "", "Enter sends and clears the prompt");
  checks.ok(await pane.getByRole("button", { name: "Cancel", exact: true }).isVisible(), "Cancel is offered while the turn runs");
  const createCard = pane.locator('.assistant-card[data-tool="createApp"]');
  await createCard.waitFor({ timeout: 30_000 });
  const createText = await createCard.textContent();
  checks.ok(createText.includes("App expense-log") && createText.includes("tool createApp"), "the card names the app and the tool", createText);
  checks.ok(createText.includes('"name": "Expense log"') && createText.includes('"withTable": true'), "and shows the arguments as JSON", createText);
  const createCall = pane.locator('.assistant-call[data-tool="createApp"]');
  checks.equal(await createCall.getAttribute("data-state"), "waiting", "the call waits for the decision");
  await screenshot(page, "assistant-card-create", createCard);
  await fitsNarrow(page, "a confirmation card");
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

  // --- 4. A row through the app's table tool, approved ------------------------
  await ask(pane, "Log a coffee");
  const rowCard = pane.locator(`.assistant-card[data-tool="${ROW_TOOL}"]`);
  await rowCard.waitFor({ timeout: 30_000 });
  const table = rowCard.getByRole("table", { name: "New row" });
  const cells = await table.locator("tbody tr").first().locator("th, td").allTextContents();
  checks.equal(cells, ["title", "—", "Coffee"], "the card shows the new row's values");
  checks.equal(await rowCard.getByRole("link", { name: "Open the draft" }).count(), 0, "a live row has no draft link");
  await screenshot(page, "assistant-card-row", rowCard);
  await fitsNarrow(page, "a row card");
  await rowCard.getByRole("button", { name: "Approve" }).click();
  await rowCard.getByText("Approved", { exact: true }).waitFor();
  await pane.locator(`.assistant-call[data-tool="${ROW_TOOL}"][data-state="ok"]`).waitFor({ timeout: 30_000 });
  await pane.getByText("Logged.", { exact: true }).waitFor({ timeout: 30_000 });
  checks.ok(true, "the row was created and read back");
  await turnEnded(pane);
  await screenshot(page, "assistant-conversation", pane.getByText("Logged.", { exact: true }));
  await fitsNarrow(page, "the conversation");

  // --- 5. The transcript is kept ---------------------------------------------
  await page.reload();
  await page.getByRole("navigation", { name: "Apps" }).waitFor();
  await page.getByRole("button", { name: "Assistant", exact: true }).click();
  await pane.getByText("Logged.", { exact: true }).waitFor({ timeout: 10_000 });
  const kept = await pane.locator(".assistant-transcript").textContent();
  for (const part of ["Build me an expense log", "Add a note field", "Log a coffee", "I created Expense log.", "Understood, I left it."]) {
    checks.ok(kept.includes(part), `after a reload the transcript keeps "${part}"`, kept);
  }
  checks.equal(await pane.locator('.assistant-call[data-tool="writeAppFile"]').getAttribute("data-state"), "declined", "and the declined call");
  checks.equal(await pane.locator('.assistant-call[data-tool="createApp"]').getAttribute("data-state"), "ok", "and the approved one");
  checks.ok((await pane.getByLabel("Conversation").locator("option").first().textContent()).startsWith("Build me an expense log"), "the conversation is titled by its first prompt");

  // --- 6. The created app, opened from the sidebar -----------------------------
  await pane.getByRole("button", { name: "Close the assistant" }).click();
  checks.ok(!(await pane.isVisible()), "Close hides the pane");
  checks.equal(await page.getByRole("button", { name: "Assistant", exact: true }).getAttribute("aria-expanded"), "false", "and the button says so");
  await appLink(page, NAME).click();
  await page.getByText(`${NAME} is open.`).waitFor({ timeout: 20_000 });
  const view = innerFrame(page, NAME);
  await view.getByText("Coffee").waitFor({ timeout: 20_000 });
  checks.ok(true, "the created app shows the row the assistant logged");
  await screenshot(page, "assistant-app");
  await page.getByRole("button", { name: "Assistant", exact: true }).click();
  await pane.getByText("Logged.", { exact: true }).waitFor();
  await screenshot(page, "assistant-beside-app", pane.getByText("Logged.", { exact: true }));
  await fitsNarrow(page, "the pane over an open app");
}
