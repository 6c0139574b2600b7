// The Document Summariser example (examples/document-summariser) end to end in
// real Chromium under the real `sasha up`, with chat pointing at a local fake
// OpenAI-compatible provider that streams its answer word by word:
//
//  1. sign in, open the app, upload a .docx and a .pdf through its form
//     (Sasha.files.upload → sasha__files_upload → studio-core's converter);
//  2. ask for a summary and watch it stream: the answer grows in several
//     steps (full text each time, as plain text) and ends with the final text,
//     which names both documents the provider received;
//  3. a renamed binary and an encrypted PDF are refused per file, with their
//     reasons shown, and nothing is added;
//  4. the facade's limits (11 files, 26 MiB) and one operation at a time:
//     a second chat while one streams is APP_BUSY from the facade and from the
//     host (a raw tools/call past the facade), while a data-free call such as
//     ping still answers;
//  5. screenshots of the streamed answer and the refusal at 1440 and 375 px.
//
// Environment (set by tests/chromium/summariser.rs): CHROMIUM, STUDIO_URL,
// ADMIN_USER, ADMIN_PASSWORD, DOCUMENTS (a folder with brief.docx, report.pdf,
// notes.txt (an ELF binary), locked.pdf), ARTIFACTS.

import fs from "node:fs";
import path from "node:path";

import { Checks, env, launchChromium, runAndClose, waitFor } from "./harness.mjs";
import { innerFrame, openApp, screenshots, signIn, WIDE } from "./studio-page.mjs";

const started = Date.now();
const STUDIO = env("STUDIO_URL");
const ADMIN = { username: env("ADMIN_USER"), password: env("ADMIN_PASSWORD") };
const DOCUMENTS = env("DOCUMENTS");
const ARTIFACTS = env("ARTIFACTS");
fs.mkdirSync(ARTIFACTS, { recursive: true });

const APP = "Document Summariser";
const INSTRUCTION = "Summarise these documents in five short bullet points.";

const checks = new Checks();
const taken = [];
const browser = await launchChromium();
await runAndClose(browser, run, taken);
console.log(`${checks.passed} checks passed in ${((Date.now() - started) / 1000).toFixed(1)} s`);

function screenshot(page, name, subject) {
  return screenshots(page, ARTIFACTS, name, taken, subject);
}

/** The app's own document (the proxy's inner data: frame) as a Frame. */
async function appFrame(page) {
  return waitFor("the app frame", () =>
    page.frames().find((frame) => frame.url().startsWith("data:") && frame.parentFrame() && frame.parentFrame().url().includes("/app-sandbox")));
}

async function run() {
  const context = await browser.newContext({ viewport: WIDE, locale: "en-GB" });
  const page = await context.newPage();
  page.setDefaultTimeout(15_000);
  page.on("pageerror", (error) => console.log(`  [page error] ${error.message}`));
  await page.goto(`${STUDIO}/`);
  await signIn(page, ADMIN);
  await openApp(page, APP);
  const app = innerFrame(page, APP);
  await app.getByRole("heading", { name: APP }).waitFor();
  const frame = await appFrame(page);

  // --- 1. Upload a .docx and a .pdf ----------------------------------------
  await app.getByLabel("Documents to upload").setInputFiles([
    path.join(DOCUMENTS, "brief.docx"),
    path.join(DOCUMENTS, "report.pdf"),
  ]);
  await frame.evaluate(() => {
    window.__notices = [];
    const notice = document.getElementById("notice");
    new MutationObserver(() => window.__notices.push(notice.textContent)).observe(notice, { childList: true, characterData: true, subtree: true });
  });
  await app.getByRole("button", { name: "Upload", exact: true }).click();
  await app.getByRole("status").filter({ hasText: "Uploaded brief.docx, report.pdf." }).waitFor();
  const notices = await frame.evaluate(() => window.__notices);
  checks.ok(
    notices.some((text) => text.startsWith("Reading documents…")) && notices.includes("Sending documents…") && notices.includes("Converting documents to Markdown…"),
    "the upload reports its progress: reading, sending, converting",
    notices,
  );
  const listed = await app.locator("#document-list li").allTextContents();
  checks.equal(listed, ["brief.docx@brief.md", "report.pdf@report.md"], "both documents are converted and listed by their Markdown names");

  // --- 2. Ask, and watch the answer stream ---------------------------------
  await frame.evaluate(() => {
    window.__seen = [];
    const answer = document.getElementById("answer");
    new MutationObserver(() => window.__seen.push(answer.textContent)).observe(answer, { childList: true, characterData: true, subtree: true });
  });
  await app.getByRole("button", { name: "Summarise" }).click();
  await app.getByRole("status").filter({ hasText: "The answer is complete." }).waitFor({ timeout: 30_000 });
  // The fake echoes the prompt with its white space collapsed.
  const expected = `Turn 1: ${INSTRUCTION} Documents: @brief.md @report.md [documents: brief.md, report.md]`;
  checks.equal(await app.locator("#answer").textContent(), expected, "the final answer is the provider's text, and the provider received both documents");
  const seen = (await frame.evaluate(() => window.__seen)).filter((text) => text !== "");
  const partial = seen.filter((text) => text !== expected);
  checks.ok(partial.length >= 3, `the answer streamed in ${partial.length} partial steps before the final text`, seen);
  checks.ok(partial.every((text) => expected.startsWith(text)), "each step is the full text so far (replaced, not appended)", seen);
  checks.ok(await app.locator("#answer *").count() === 0, "the answer is plain text: no element was created from it");
  checks.equal(await app.getByLabel("Start a new conversation").isChecked(), false, "a follow-up continues the conversation");
  await screenshot(page, "summary", app.locator("#answer"));

  // --- 3. Per-file refusals ------------------------------------------------
  await app.getByLabel("Documents to upload").setInputFiles([
    path.join(DOCUMENTS, "notes.txt"),
    path.join(DOCUMENTS, "locked.pdf"),
  ]);
  await app.getByRole("button", { name: "Upload", exact: true }).click();
  const problem = app.getByRole("alert");
  await problem.filter({ hasText: "APP_UPLOAD_FAILED" }).waitFor();
  const text = await problem.textContent();
  checks.ok(/2 of 2 files could not be converted/.test(text), "the refusal says how many files failed", text);
  checks.ok(/notes\.txt: /.test(text) && /locked\.pdf: the PDF is encrypted/.test(text), "each refused file is named with its reason", text);
  checks.equal(await app.locator("#document-list li").count(), 2, "nothing was added");
  await screenshot(page, "refused-upload", problem);

  // --- 4. Facade limits and one operation at a time ------------------------
  const limits = await frame.evaluate(async () => {
    const outcome = async (promise) => promise.then(() => "ok", (error) => error.code);
    const eleven = Array.from({ length: 11 }, (_, i) => new File(["x"], `n${i}.txt`, { type: "text/plain" }));
    const big = new File([new Uint8Array(26 * 1024 * 1024)], "big.txt", { type: "text/plain" });
    return { eleven: await outcome(Sasha.files.upload(eleven)), big: await outcome(Sasha.files.upload([big])) };
  });
  checks.equal(limits, { eleven: "APP_RESOURCE_LIMIT", big: "APP_RESOURCE_LIMIT" }, "11 files and 26 MiB are refused before anything is sent");

  const busy = await frame.evaluate(async () => {
    // The fake echoes the prompt word by word (15 ms each): about 1.5 s.
    const first = Sasha.chat.execute("A long answer, please. ".repeat(25), { newSession: true });
    const viaFacade = await Sasha.chat.execute("another").then(() => "ok", (error) => error.code);
    // Past the facade: a raw tools/call to the host while the turn streams.
    const viaHost = await new Promise((resolve) => {
      const listener = (event) => {
        const message = event.data;
        if (message && message.id === "raw-busy") {
          window.removeEventListener("message", listener);
          resolve(message.error && message.error.data ? message.error.data.code : "ok");
        }
      };
      window.addEventListener("message", listener);
      window.parent.postMessage({ jsonrpc: "2.0", id: "raw-busy", method: "tools/call", params: { name: "sasha__chat_execute", arguments: { prompt: "raw" } } }, "*");
    });
    const uploadDuring = await Sasha.files.upload([new File(["x"], "x.txt")]).then(() => "ok", (error) => error.code);
    const text = await first;
    return { viaFacade, viaHost, uploadDuring, finished: typeof text === "string" && text.length > 0 };
  });
  checks.equal(busy, { viaFacade: "APP_BUSY", viaHost: "APP_BUSY", uploadDuring: "APP_BUSY", finished: true },
    "while a turn streams, a second chat or an upload is APP_BUSY from the facade and from the host; the first turn completes");
}
