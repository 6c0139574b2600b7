// The assistant's approvals are held by the server, in real Chromium: the
// real `sasha up` with a scripted model (tests/chromium/assistant.rs,
// `approvals_survive_a_reload_and_show_in_every_tab`), the dev admin in two
// tabs of one browser (A and B).
//
//  1. "Build me a notes app": the createApp card leads with a sentence of
//     what will happen, its JSON is behind "Show details"; tab B, opened
//     now, shows the same card; tab A reloads and shows it again (the call
//     waits, it is not "Running…"); Approve in the reloaded tab runs the call
//     once (a second post of the same decision is refused) and the
//     model's answer arrives in both tabs;
//  2. "Add a notes file": a draft file card in A; B, reloaded, shows it and
//     declines it; A's card and call say "Declined";
//  3. "Add another file": a card in A, and A is closed (the turn is
//     abandoned there); B, reloaded, shows the card and cancels the turn:
//     the call reads "Cancelled", no card is left, and after a reload it
//     still reads "Cancelled", never "Running…".
//
// Prints `confirmation <id>` for each decision posted and the screenshots at
// 1440 and 390 px.
//
// Environment (set by tests/chromium/assistant.rs): CHROMIUM, STUDIO_URL,
// ADMIN_USER, ADMIN_PASSWORD, ARTIFACTS.

import fs from "node:fs";

import { Checks, env, launchChromium, runAndClose } from "./harness.mjs";
import { fitsNarrow, newStudioPage, screenshots, signIn } from "./studio-page.mjs";

const started = Date.now();
const STUDIO = env("STUDIO_URL");
const ADMIN = { username: env("ADMIN_USER"), password: env("ADMIN_PASSWORD") };
const ARTIFACTS = env("ARTIFACTS");
fs.mkdirSync(ARTIFACTS, { recursive: true });

const CREATED = "I created Notes.";
const LEFT = "Understood, I left it.";

const checks = new Checks();
const taken = [];

const browser = await launchChromium();
await runAndClose(browser, run, taken);
console.log(`${checks.passed} checks passed in ${((Date.now() - started) / 1000).toFixed(1)} s; screenshots in ${ARTIFACTS}`);

function screenshot(page, name, subject = null) {
  return screenshots(page, ARTIFACTS, name, taken, subject);
}

function logDecisions(page) {
  page.on("request", (request) => {
    const match = /\/api\/assistant\/confirmations\/([^/?]+)$/.exec(new URL(request.url()).pathname);
    if (match && request.method() === "POST") {
      console.log(`confirmation ${match[1]}`);
    }
  });
}

/** The open assistant pane of `page` (opened when it is not). */
async function openPane(page) {
  const pane = page.getByRole("complementary", { name: "Assistant" });
  if (!(await pane.isVisible())) {
    await page.getByRole("button", { name: "Assistant", exact: true }).click();
  }
  await pane.waitFor();
  return pane;
}

async function ask(pane, text) {
  const prompt = pane.getByLabel("Message");
  await prompt.fill(text);
  await prompt.press("Enter");
}

/** Waits until no turn runs in the pane (Send enabled, no Cancel). */
async function turnEnded(pane, what) {
  await pane.getByRole("button", { name: "Cancel", exact: true }).waitFor({ state: "hidden", timeout: 30_000 });
  checks.ok(await pane.getByRole("button", { name: "Send", exact: true }).isEnabled(), `${what}: the turn ended and Send is enabled`);
}

/** Reloads `page` and opens its pane again. */
async function reload(page) {
  await page.reload();
  await page.getByRole("navigation", { name: "Apps" }).waitFor();
  return openPane(page);
}

async function run() {
  const { page } = await newStudioPage(browser, "admin A");
  const pages = { a: page, b: null };
  try {
    await scenario(pages);
  } catch (error) {
    for (const [name, open] of Object.entries(pages)) {
      if (open && !open.isClosed()) {
        const said = await open.locator("#assistant").textContent().catch(() => "(no pane)");
        console.error(`tab ${name}'s assistant pane said:\n${said}`);
      }
    }
    throw error;
  }
}

async function scenario(pages) {
  const a = pages.a;
  logDecisions(a);
  await a.goto(`${STUDIO}/#/`);
  await signIn(a, ADMIN);
  let paneA = await openPane(a);
  await paneA.getByText("Model fake").waitFor();

  // --- 1. createApp: the card, a second tab, a reload, Approve ---------------
  await ask(paneA, "Build me a notes app");
  let card = paneA.locator('.assistant-card[data-tool="createApp"]');
  await card.waitFor({ timeout: 30_000 });
  const sentence = card.locator(".assistant-card-sentence");
  checks.ok((await sentence.textContent()).startsWith("Creates a new app “Notes” (notes) with a starter table"), "the card leads with what will happen", await sentence.textContent());
  checks.equal(await card.locator(".assistant-card-title").textContent(), "Create the app notes", "its title is the change, not a tool description");
  const json = card.getByLabel("Arguments");
  checks.ok(!(await json.isVisible()), "the JSON is not shown first");
  await card.getByText("Show details", { exact: true }).click();
  checks.ok((await json.textContent()).includes('"withTable": true'), "Show details shows the arguments", await json.textContent());
  await screenshot(a, "approvals-card-create", card);
  await fitsNarrow(a, checks, "a confirmation card");

  // A second tab of the same person sees the same card.
  const b = await a.context().newPage();
  pages.b = b;
  logDecisions(b);
  await b.goto(`${STUDIO}/#/`);
  await b.getByRole("navigation", { name: "Apps" }).waitFor();
  let paneB = await openPane(b);
  const cardB = paneB.locator('.assistant-card[data-tool="createApp"]');
  await cardB.waitFor({ timeout: 10_000 });
  checks.equal(await cardB.locator(".assistant-card-sentence").textContent(), await sentence.textContent(), "a second tab shows the same card");
  checks.equal(await paneB.locator('.assistant-call[data-tool="createApp"]').getAttribute("data-state"), "waiting", "and the call waiting, not running");
  await screenshot(b, "approvals-second-tab", cardB);

  // Tab A reloads: the closed pane's button says a change waits, and opened,
  // the card is back.
  await a.reload();
  const waitingNote = a.locator(".assistant-waiting");
  await waitingNote.waitFor({ timeout: 10_000 });
  checks.equal(await waitingNote.textContent(), "1 change waits for your approval", "after a reload the header says a change waits");
  paneA = await openPane(a);
  checks.ok(!(await waitingNote.isVisible()), "and opening the pane clears it");
  card = paneA.locator('.assistant-card[data-tool="createApp"]');
  await card.waitFor({ timeout: 10_000 });
  checks.equal(await paneA.locator('.assistant-call[data-tool="createApp"]').getAttribute("data-state"), "waiting", "after a reload the call waits for a decision");
  checks.ok(await paneA.getByRole("button", { name: "Cancel", exact: true }).isVisible(), "the reloaded tab can cancel the running turn");
  checks.ok(await paneA.getByRole("button", { name: "Send", exact: true }).isDisabled(), "and cannot send while it runs");
  await screenshot(a, "approvals-after-reload", card);
  const decision = a.waitForResponse((response) => /\/api\/assistant\/confirmations\/[0-9a-f]{32}$/.test(new URL(response.url()).pathname) && response.request().method() === "POST");
  await card.getByRole("button", { name: "Approve" }).click();
  const approved = await decision;
  checks.equal(approved.status(), 200, "the reloaded tab's approval is taken");
  await paneA.getByText(CREATED, { exact: true }).waitFor({ timeout: 30_000 });
  checks.equal(await paneA.locator('.assistant-call[data-tool="createApp"]').getAttribute("data-state"), "ok", "the approved call ran");
  await turnEnded(paneA, "tab A");
  // The same decision again is refused: the approval was single-use.
  const replay = await a.evaluate(
    async ({ url, body }) => (await fetch(url, { method: "POST", headers: { "Content-Type": "application/json" }, body: JSON.stringify(body) })).status,
    { url: new URL(approved.url()).pathname, body: approved.request().postDataJSON() },
  );
  checks.equal(replay, 404, "a second post of the same decision is refused");
  // Tab B follows the turn it did not start to its end.
  await paneB.getByText(CREATED, { exact: true }).waitFor({ timeout: 30_000 });
  checks.equal(await paneB.locator('.assistant-card[data-tool="createApp"]').count(), 0, "tab B's card is gone once decided");
  checks.equal(await paneB.locator('.assistant-call[data-tool="createApp"]').getAttribute("data-state"), "ok", "and tab B shows the call done");
  await turnEnded(paneB, "tab B");

  // --- 2. A draft file, declined from the second tab -------------------------
  await ask(paneA, "Add a notes file");
  const fileCard = paneA.locator('.assistant-card[data-tool="writeAppFile"]');
  await fileCard.waitFor({ timeout: 30_000 });
  checks.ok((await fileCard.locator(".assistant-card-sentence").textContent()).startsWith("Adds notes.md in your draft of notes"), "a draft file card says it stays in the draft", await fileCard.textContent());
  paneB = await reload(b);
  const fileCardB = paneB.locator('.assistant-card[data-tool="writeAppFile"]');
  await fileCardB.waitFor({ timeout: 10_000 });
  const denial = b.waitForResponse((response) => /\/api\/assistant\/confirmations\/[0-9a-f]{32}$/.test(new URL(response.url()).pathname) && response.request().method() === "POST");
  await fileCardB.getByRole("button", { name: "Deny" }).click();
  checks.equal((await denial).status(), 200, "the second tab's denial is taken");
  await fileCard.getByText("Declined", { exact: true }).waitFor({ timeout: 10_000 });
  checks.ok(true, "declining in tab B shows in tab A's card");
  await paneA.locator('.assistant-call[data-tool="writeAppFile"][data-state="declined"]').waitFor({ timeout: 30_000 });
  await paneA.getByText(LEFT, { exact: true }).waitFor({ timeout: 30_000 });
  await turnEnded(paneA, "tab A after the decline");
  await paneB.getByText(LEFT, { exact: true }).waitFor({ timeout: 30_000 });
  await turnEnded(paneB, "tab B after the decline");
  await screenshot(b, "approvals-declined-in-second-tab", paneB.getByText(LEFT, { exact: true }));

  // --- 3. An abandoned turn, cancelled: never "Running…" ---------------------
  await ask(paneA, "Add another file");
  const lastCard = paneA.locator('.assistant-card[data-tool="writeAppFile"]').nth(1);
  await lastCard.waitFor({ timeout: 30_000 });
  await a.close();
  pages.a = null;
  paneB = await reload(b);
  const waiting = paneB.locator('.assistant-card[data-tool="writeAppFile"]');
  await waiting.waitFor({ timeout: 10_000 });
  checks.equal(await waiting.count(), 1, "the closed tab's card waits in the other tab");
  await paneB.getByRole("button", { name: "Cancel", exact: true }).click();
  const abandoned = paneB.locator('.assistant-call[data-tool="writeAppFile"]').nth(1);
  await paneB.locator('.assistant-call[data-tool="writeAppFile"][data-state="cancelled"]').waitFor({ timeout: 30_000 });
  checks.equal(await abandoned.getAttribute("data-state"), "cancelled", "the cancelled call reads Cancelled");
  checks.equal(await paneB.locator(".assistant-card").count(), 0, "and no card is left");
  await turnEnded(paneB, "tab B after the cancel");
  paneB = await reload(b);
  await paneB.getByText(LEFT, { exact: true }).waitFor({ timeout: 10_000 });
  const stored = paneB.locator('.assistant-call[data-tool="writeAppFile"]').nth(1);
  checks.equal(await stored.getAttribute("data-state"), "cancelled", "after a reload the call still reads Cancelled");
  checks.equal(await stored.locator(".assistant-call-status").textContent(), "Cancelled", "in words");
  checks.equal(await paneB.getByText("Running…").count(), 0, "nothing reads Running…");
  await screenshot(b, "approvals-cancelled", stored);
  await fitsNarrow(b, checks, "a cancelled call");
}
