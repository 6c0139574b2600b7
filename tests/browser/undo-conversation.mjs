// Undoing an assistant conversation end to end in real Chromium, as the
// member whose rows it changed (tests/chromium/activity.rs,
// `a_members_conversation_is_undone_and_the_undo_undone_in_chromium`). One
// phase a run, named by PHASE:
//
//  converse  Mia asks her assistant to tidy her expenses; the scripted model
//            asks for 45 changes (30 creates, 10 updates, 5 deletes), each a
//            card she approves with a click; the turn ends with its answer.
//  undo      (after she edited one of the updated rows by hand) her Activity
//            panel, filtered to the assistant, lists the 45 changes; the
//            preview shows 45 rows with one conflict, the hand-edited row;
//            the undo recreates 5, puts back 9, removes 30 and leaves that
//            one alone, and names its id.
//  redo      the Activity panel, filtered to that undo, previews 44 rows
//            without conflict; undoing them recreates 30, puts back 9 and
//            removes 5: the conversation's writes are back.
//
// Environment (set by the Rust side): CHROMIUM, PHASE, STUDIO_URL,
// MEMBER_USER, MEMBER_PASSWORD, ARTIFACTS.

import fs from "node:fs";

import { Checks, env, launchChromium, runAndClose } from "./harness.mjs";
import { newStudioPage, screenshots, signIn } from "./studio-page.mjs";

const started = Date.now();
const PHASE = env("PHASE");
const STUDIO = env("STUDIO_URL");
const MEMBER = { username: env("MEMBER_USER"), password: env("MEMBER_PASSWORD") };
const ARTIFACTS = env("ARTIFACTS");
fs.mkdirSync(ARTIFACTS, { recursive: true });

const NAME = "Expense log";
const ID = "expense-log";
const CHANGES = 45;
const ANSWER = "Done: 30 added, 10 changed, 5 removed.";
const UNDO_LINE = /^Undone: 5 recreated, 9 put back, 30 removed, 1 left alone\. To take it back, undo undo-[0-9a-f]{16}\.$/;

const checks = new Checks();
const taken = [];

const browser = await launchChromium();
await runAndClose(browser, run, taken);
console.log(`${checks.passed} checks passed in ${((Date.now() - started) / 1000).toFixed(1)} s; screenshots in ${ARTIFACTS}`);

async function run() {
  const { page } = await newStudioPage(browser, "member");
  await page.goto(`${STUDIO}/#/apps/${ID}`);
  await signIn(page, MEMBER);
  await page.getByText(`${NAME} is open.`).waitFor({ timeout: 20_000 });
  if (PHASE === "converse") {
    await converse(page);
  } else if (PHASE === "undo") {
    await undo(page);
  } else if (PHASE === "redo") {
    await redo(page);
  } else {
    throw new Error(`unknown PHASE ${PHASE}`);
  }
}

async function converse(page) {
  await page.getByRole("button", { name: "Assistant", exact: true }).click();
  const pane = page.getByRole("complementary", { name: "Assistant" });
  await pane.waitFor();
  const prompt = pane.getByLabel("Message");
  await prompt.fill("Tidy my expenses");
  await prompt.press("Enter");
  // The model's calls run one after another, each waiting for its card.
  const open = pane.locator(".assistant-card button:not([disabled])", { hasText: "Approve" });
  const decided = pane.locator(".assistant-card button[disabled]", { hasText: "Approve" });
  for (let n = 0; n < CHANGES; n += 1) {
    await open.first().waitFor({ timeout: 30_000 });
    if (n === 0) {
      await screenshots(page, ARTIFACTS, "undo-conversation-card", taken, pane.locator(".assistant-card").first());
    }
    await open.first().click();
    await decided.nth(n).waitFor({ timeout: 30_000 });
  }
  await pane.getByText(ANSWER).waitFor({ timeout: 60_000 });
  checks.equal(await pane.locator('.assistant-call[data-state="ok"]').count(), CHANGES, "every approved change ran");
  checks.equal(await pane.locator(".assistant-card").count(), CHANGES, "each change was a card of its own");
}

/** Opens the Activity panel and shows the changes started through `initiator` (and `id`). */
async function activity(page, initiator, id, shown) {
  await page.getByRole("button", { name: "Activity", exact: true }).click();
  const panel = page.locator(".activity-panel");
  await panel.getByRole("heading", { name: `Activity of ${NAME}` }).waitFor();
  await panel.getByLabel("Started by").selectOption(initiator);
  if (id) {
    await panel.getByLabel("Id").fill(id);
  }
  await panel.getByRole("button", { name: "Show" }).click();
  await panel.getByText(`${shown} changes shown, newest first.`).waitFor();
  return panel;
}

/** Applies the previewed plan and gives back the done line. */
async function apply(panel, rows) {
  await panel.getByRole("button", { name: `Undo ${rows} rows` }).click();
  const done = panel.locator(".activity-done");
  const refused = panel.locator(".alert");
  await Promise.race([done.waitFor({ timeout: 60_000 }), refused.waitFor({ timeout: 60_000 })]);
  checks.ok(await refused.isHidden(), "the undo is not refused", await refused.textContent());
  return done.textContent();
}

async function undo(page) {
  const panel = await activity(page, "assistant", null, CHANGES);
  const through = await panel.locator(".activity-initiator").allTextContents();
  checks.ok(through.every((text) => /^assistant \S+$/.test(text)), "each change names the conversation", through);
  checks.equal(new Set(through).size, 1, "one conversation made them all", [...new Set(through)]);
  await panel.getByRole("button", { name: "Preview undo" }).click();
  await panel.getByRole("heading", { name: `Undo ${CHANGES} changes: ${CHANGES} rows, 1 conflicts` }).waitFor({ timeout: 30_000 });
  const conflicts = await panel.locator(".activity-preview tr.activity-conflict td:first-child").allTextContents();
  checks.equal(conflicts.join(","), "expenses 1", "the hand-edited row is the conflict", conflicts);
  const actions = await panel.locator(".activity-preview tbody tr td:nth-child(2)").allTextContents();
  const tally = (action) => actions.filter((text) => text === action).length;
  checks.equal([tally("recreate"), tally("update"), tally("delete")].join(","), "5,10,30", "deletes recreated, updates put back, creates removed", actions);
  await screenshots(page, ARTIFACTS, "undo-conversation-preview", taken, panel);
  const line = await apply(panel, CHANGES);
  checks.ok(UNDO_LINE.test(line), "the conflict is left alone and the undo names its id", line);
  await screenshots(page, ARTIFACTS, "undo-conversation-undone", taken, panel);
}

async function redo(page) {
  // The undo's id, from the newest undo entry the panel lists.
  const panel = await activity(page, "undo", null, 44);
  const ids = new Set((await panel.locator(".activity-initiator").allTextContents()).map((text) => text.replace(/^undo /, "")));
  checks.equal(ids.size, 1, "one undo so far", [...ids]);
  const [undoId] = ids;
  await panel.getByLabel("Id").fill(undoId);
  await panel.getByRole("button", { name: "Show" }).click();
  await panel.getByText("44 changes shown, newest first.").waitFor();
  await panel.getByRole("button", { name: "Preview undo" }).click();
  await panel.getByRole("heading", { name: "Undo 44 changes: 44 rows, 0 conflicts" }).waitFor({ timeout: 30_000 });
  const line = await apply(panel, 44);
  checks.ok(/^Undone: 30 recreated, 9 put back, 5 removed, 0 left alone\. To take it back, undo undo-[0-9a-f]{16}\.$/.test(line), "undoing the undo brings the conversation's writes back", line);
}
