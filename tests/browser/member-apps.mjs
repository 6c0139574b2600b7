// App Studio and member apps end to end in real Chromium: the real `sasha up`
// over an empty apps folder, three members (alice, bob, carol) and an admin,
// driven by role and label.
//
//  1. the admin makes sure "Let members make their own apps" is on;
//  1b. bob asks the assistant (a scripted provider) "Build me a habit log"
//     (the pane's first list of conversations held back until that turn
//     runs, so the list predates his conversation and must not undo it):
//     it lists his apps and checks the package (read-only, no card), then
//     deployMyApp shows a card naming the new member app with each file's
//     diff; he approves, the app appears in his sidebar, he adds a row in it,
//     and asks the assistant to share it with alice (a second card, approved);
//     then "Make the heading say Bob's habits": it reads the source and saves
//     a draft (a card); Edit in App Studio opens that draft, Preview shows the
//     new heading in the sandbox, and "deploy it" shows a card with only the
//     changed file's diff; approved, the live app has the heading and his row;
//  2. alice opens App Studio from the sidebar, starts a New app (the template
//     follows the name), pastes a small "Habit Tracker" data app (read-write
//     data, an owner-scoped `habits` table, migrations/001-initial.sql and
//     schema.sql) file by file, and Check says it is valid;
//  3. she breaks app.js and Check names the file and line; choosing the
//     diagnostic puts the focus on that line of app.js; she fixes it;
//  4. Deploy creates it ("Deployed … as member-…": the platform names it,
//     whatever id APP.md gave), the editor reopens on the app, it
//     is in her sidebar, and Preview shows it in the sandbox under the preview
//     banner; Close preview removes it;
//  5. she opens it and adds a row through its own UI;
//  6. she shares it with bob by typing "bob"; bob opens it, sees none of
//     alice's rows and adds his own; alice stops sharing it while it is
//     open, and bob's next action closes it with "Your access to Habit
//     Tracker was removed." and drops it from his sidebar, no internal name
//     shown; alice opens bob's Habit Log and sees
//     none of his rows; carol has neither app;
//  7. the admin sees it under "Member apps (moderation)" and turns the switch
//     off; alice's App Studio drops the editor, New app and Edit and says why;
//     her app still opens and lists her row; she deletes it (confirmed in the
//     page) and it leaves her sidebar;
//  8. no horizontal overflow at 375 px; screenshots at 1440 and 375 px.
//
// Environment (set by tests/chromium/member_apps.rs): CHROMIUM, STUDIO_URL,
// ADMIN_USER, ADMIN_PASSWORD, ALICE_USER, ALICE_PASSWORD, BOB_USER,
// BOB_PASSWORD, CAROL_USER, CAROL_PASSWORD, ARTIFACTS. BROWSER_CONSOLE=1
// echoes the pages' console. It prints `member-app <id>` once deployed.

import fs from "node:fs";

import { Checks, env, launchChromium, runAndClose, waitFor } from "./harness.mjs";
import { appLink, fitsNarrow, innerFrame, newStudioPage, openApp, outerFrame, screenshots, sidebar, signIn } from "./studio-page.mjs";

const started = Date.now();
const STUDIO = env("STUDIO_URL");
const ADMIN = { username: env("ADMIN_USER"), password: env("ADMIN_PASSWORD") };
const ALICE = { username: env("ALICE_USER"), password: env("ALICE_PASSWORD") };
const BOB = { username: env("BOB_USER"), password: env("BOB_PASSWORD") };
const CAROL = { username: env("CAROL_USER"), password: env("CAROL_PASSWORD") };
const ARTIFACTS = env("ARTIFACTS");
fs.mkdirSync(ARTIFACTS, { recursive: true });

const NAME = "Habit Tracker";
const OFF = "Your administrator has turned off member apps: you can still open and delete the apps you have.";
const BANNER = "Preview — a scratch copy of the data with the draft's migrations; nothing here changes live records.";
const EMPTY = "No habits yet. Add the first one above.";
const ALICE_ROW = "Drink a glass of water";
const BOB_ROW = "Stretch for five minutes";
const LOG = "Habit Log";
const BOB_LOG_ROW = "Read ten pages";
const ALICE_LOG_ROW = "Walk to work";

// The Habit Tracker is the fixture tests/browser/apps/habit-log/ (the package
// the assistant deploys as bob's Habit Log) under its own id and name: what
// alice pastes file by file.
const FIXTURE = new URL("./apps/habit-log/", import.meta.url);
const PATHS = ["APP.md", "index.html", "styles.css", "app.js", "schema.sql", "migrations/001-initial.sql"];
const FILES = Object.fromEntries(
  PATHS.map((path) => {
    const text = fs.readFileSync(new URL(path, FIXTURE), "utf8");
    return [path, path === "APP.md" || path === "index.html" ? text.replace("id: habit-log", "id: habit-tracker").replaceAll("Habit Log", NAME) : text];
  }),
);
/** app.js with module syntax on its line 2: the validator refuses it there. */
const BROKEN_SCRIPT = FILES["app.js"].replace('"use strict";\n', '"use strict";\nimport { streak } from "./streak.js";\n');

const checks = new Checks();
const taken = [];

const browser = await launchChromium();
await runAndClose(browser, run, taken);
console.log(`${checks.passed} checks passed in ${((Date.now() - started) / 1000).toFixed(1)} s; screenshots in ${ARTIFACTS}`);

function screenshot(page, name, subject = null) {
  return screenshots(page, ARTIFACTS, name, taken, subject);
}

/** The App Studio panel on screen (not one a navigation is replacing). */
function studioPanel(page) {
  return page.locator(".studio-panel:not([data-replaced])");
}

/** Waits until the panel's live status line says `text` (a string or RegExp). */
function said(page, text) {
  return studioPanel(page).getByRole("status").filter({ hasText: text }).waitFor({ timeout: 20_000 });
}

/** Runs `navigate` (which draws App Studio afresh) and waits until the new panel has loaded. */
async function freshStudio(page, navigate) {
  await page.evaluate(() => document.querySelector(".studio-panel")?.setAttribute("data-replaced", ""));
  await navigate();
  await studioPanel(page).getByRole("heading", { name: "App Studio", level: 1 }).waitFor();
  await waitFor("App Studio to load", async () => !(await studioPanel(page).getByRole("status").textContent()).startsWith("Loading"));
}

/** Opens App Studio from the sidebar and waits until it has loaded. */
function openStudio(page) {
  return freshStudio(page, () => sidebar(page).getByRole("button", { name: "App Studio" }).click());
}

/** The Your apps entry of `name`. */
function mine(page, name) {
  return studioPanel(page).getByRole("list", { name: "Your apps" }).getByRole("listitem").filter({ has: page.getByRole("heading", { name, exact: true }) });
}

/**
 * Sends `text` once the assistant's previous turn has ended: Send is
 * disabled while a turn runs (its last words can show a moment before it
 * ends), and a person would wait for it too.
 */
async function ask(page, pane, text) {
  const send = pane.getByRole("button", { name: "Send", exact: true });
  const deadline = Date.now() + 30_000;
  while (await send.isDisabled()) {
    if (Date.now() > deadline) {
      throw new Error(`the assistant's turn never ended before "${text}"`);
    }
    // The turn ends in the server; the page has no event to await.
    await page.waitForTimeout(100);
  }
  await pane.getByLabel("Message").fill(text);
  await pane.getByLabel("Message").press("Enter");
}

async function run() {
  // --- 1. The admin makes sure members may make apps ------------------------
  const admin = (await newStudioPage(browser, "admin")).page;
  await admin.goto(`${STUDIO}/`);
  await signIn(admin, ADMIN);
  await openStudio(admin);
  await admin.getByRole("heading", { name: "Member apps (moderation)" }).waitFor();
  const adminSwitch = admin.getByLabel("Let members make their own apps");
  if (!(await adminSwitch.isChecked())) {
    await adminSwitch.click();
    await said(admin, "Member apps are on");
  }
  checks.ok(await admin.getByLabel("Let members make their own apps").isChecked(), "the admin's switch lets members make their own apps");

  // --- 1b. Bob asks the assistant for a habit log -----------------------------
  const bob = (await newStudioPage(browser, "bob")).page;
  await bob.goto(`${STUDIO}/`);
  await signIn(bob, BOB);
  // The pane's first list of conversations comes back only once bob's first
  // turn is under way (a loaded machine's ordering, made certain here): the
  // list, read before he started that conversation, must not take it away,
  // or his next message would go to a new conversation he never chose.
  let releaseList;
  const firstTurnRuns = new Promise((resolve) => {
    releaseList = resolve;
  });
  let listDelivered;
  const listHeld = new Promise((resolve) => {
    listDelivered = resolve;
  });
  const isList = (url) => url.pathname === "/api/assistant/conversations";
  await bob.route(isList, async (route) => {
    if (route.request().method() !== "GET") {
      await route.fallback();
      return;
    }
    const response = await route.fetch();
    await firstTurnRuns;
    await route.fulfill({ response });
    listDelivered();
  });
  await bob.getByRole("button", { name: "Assistant", exact: true }).click();
  const pane = bob.getByRole("complementary", { name: "Assistant" });
  await ask(bob, pane, "Build me a habit log");
  await pane.locator('.assistant-call[data-tool="checkMyApp"][data-state="ok"]').waitFor({ timeout: 30_000 });
  releaseList();
  await listHeld;
  await bob.unroute(isList);
  const picker = pane.getByLabel("Conversation", { exact: true });
  checks.equal(await pane.locator('.assistant-card[data-tool="checkMyApp"]').count(), 0, "checking a member app needs no card");
  const deployCard = pane.locator('.assistant-card[data-tool="deployMyApp"]');
  await deployCard.waitFor({ timeout: 30_000 });
  const deployText = await deployCard.textContent();
  checks.ok(deployText.includes("New member app") && deployText.includes(LOG), "the deploy card names the new member app", deployText);
  const deploySentence = await deployCard.locator(".assistant-card-sentence").textContent();
  checks.ok(deploySentence.startsWith(`Creates your app “${LOG}” with `) && deploySentence.includes("only you see it until you share it"), "and says first what the deploy does and who sees it", deploySentence);
  checks.ok((await deployCard.getByRole("list", { name: "Files" }).textContent()).includes("app.js"), "and names the files added before any diff");
  const deployDiff = await deployCard.getByLabel("Changes to app.js").textContent();
  checks.ok(deployDiff.includes("+const form"), "and shows the code being deployed", deployDiff.slice(0, 400));
  await screenshot(bob, "assistant-deploy-card", deployCard);
  await deployCard.getByRole("button", { name: "Approve" }).click();
  await pane.locator('.assistant-call[data-tool="deployMyApp"][data-state="ok"]').waitFor({ timeout: 30_000 });
  await pane.getByText("Your Habit Log is in your Apps list.", { exact: true }).waitFor({ timeout: 30_000 });
  await appLink(bob, LOG).waitFor({ timeout: 10_000 });
  checks.ok(true, "the approved deploy puts the app in bob's sidebar");
  await openApp(bob, LOG);
  const bobLog = innerFrame(bob, LOG);
  await bobLog.getByText(EMPTY).waitFor({ timeout: 20_000 });
  await bobLog.getByLabel("New habit").fill(BOB_LOG_ROW);
  await bobLog.getByRole("button", { name: "Add" }).click();
  await bobLog.getByRole("listitem").filter({ hasText: BOB_LOG_ROW }).waitFor({ timeout: 20_000 });
  checks.ok(true, "bob uses the app the assistant built");
  const conversation = await picker.inputValue();
  checks.ok(conversation !== "", "the pane still shows the conversation bob started, its list read before it began", await picker.textContent());
  await ask(bob, pane, "Share it with alice");
  const shareCard = pane.locator('.assistant-card[data-tool="shareMyApp"]');
  await shareCard.waitFor({ timeout: 30_000 });
  await shareCard.getByRole("button", { name: "Approve" }).click();
  await pane.getByText("Shared with alice.", { exact: true }).waitFor({ timeout: 30_000 });
  checks.ok(true, "the assistant shares it once bob approves");
  checks.equal(await picker.inputValue(), conversation, "and bob asked it in the conversation that built the app");

  // A change: the assistant reads the source and drafts it; bob previews the
  // draft in App Studio, then has the assistant deploy it.
  await ask(bob, pane, "Make the heading say Bob's habits");
  await pane.locator('.assistant-call[data-tool="readMyApp"][data-state="ok"]').waitFor({ timeout: 30_000 });
  const draftCard = pane.locator('.assistant-card[data-tool="draftMyApp"]');
  await draftCard.waitFor({ timeout: 30_000 });
  const draftSentence = await draftCard.locator(".assistant-card-sentence").textContent();
  checks.ok(/changed \([^)]*index\.html\)/.test(draftSentence) && draftSentence.includes("the live app does not change"), "the draft card says which file changes and that nothing goes live", draftSentence);
  await draftCard.getByText("Show details", { exact: true }).click();
  await draftCard.getByText("A draft (not live) of your member app").waitFor();
  checks.ok((await draftCard.getByLabel("Changes to index.html").textContent()).includes("+    <h1>Bob's habits</h1>"), "the draft card shows the change to be previewed");
  await draftCard.getByRole("button", { name: "Approve" }).click();
  await pane.getByText("The draft is saved: preview it in App Studio, then tell me to deploy it.", { exact: true }).waitFor({ timeout: 30_000 });
  await openStudio(bob);
  await mine(bob, LOG).getByRole("button", { name: `Edit ${LOG}` }).click();
  await said(bob, `Editing the saved draft of ${LOG} (the live app is unchanged): Preview it, then Deploy.`);
  const bobEditor = studioPanel(bob).locator(".studio-editor");
  checks.ok((await bobEditor.getByLabel("Contents of index.html", { exact: true }).inputValue()).includes("<h1>Bob's habits</h1>"), "Edit opens the assistant's draft");
  await bobEditor.getByRole("button", { name: "Preview", exact: true }).click();
  await said(bob, "The preview is open.");
  await innerFrame(bob, LOG).getByRole("heading", { name: "Bob's habits" }).waitFor({ timeout: 20_000 });
  checks.ok(true, "the draft previews in the sandbox with the new heading");
  await screenshot(bob, "studio-draft-preview");
  await bobEditor.getByRole("button", { name: "Close preview" }).click();
  await ask(bob, pane, "Looks good, deploy it");
  // The second deploy card (the first created the app).
  const updateCard = pane.locator('.assistant-card[data-tool="deployMyApp"]').nth(1);
  await updateCard.waitFor({ timeout: 30_000 });
  const updateSentence = await updateCard.locator(".assistant-card-sentence").textContent();
  checks.ok(/live: \d+ files? changed \([^)]*index\.html\)/.test(updateSentence) && updateSentence.includes("People you shared it with get it at once"), "the update card counts and names the changed file and says who gets it", updateSentence);
  const updateFiles = await updateCard.getByRole("list", { name: "Files" }).textContent();
  checks.ok(updateFiles.startsWith("Changed (") && updateFiles.includes("index.html") && !updateFiles.includes("app.js"), "its file list names the changed files before the diff", updateFiles);
  await updateCard.getByText("Show details", { exact: true }).click();
  await updateCard.getByText("New version of your member app").waitFor({ timeout: 30_000 });
  checks.ok((await updateCard.getByLabel("Changes to index.html").textContent()).includes("+    <h1>Bob's habits</h1>"), "the update card shows only the changed file's diff");
  checks.equal(await updateCard.getByLabel("Changes to app.js").count(), 0, "and not the unchanged ones");
  await updateCard.getByRole("button", { name: "Approve" }).click();
  await pane.getByText("Deployed: the new heading is live.", { exact: true }).waitFor({ timeout: 30_000 });
  await openApp(bob, LOG);
  await innerFrame(bob, LOG).getByRole("heading", { name: "Bob's habits" }).waitFor({ timeout: 20_000 });
  await innerFrame(bob, LOG).getByRole("listitem").filter({ hasText: BOB_LOG_ROW }).waitFor({ timeout: 20_000 });
  checks.ok(true, "the deployed change is live and bob's row is kept");

  // --- 2. Alice pastes a Habit Tracker ----------------------------------------
  const alice = (await newStudioPage(browser, "alice")).page;
  await alice.goto(`${STUDIO}/`);
  await signIn(alice, ALICE);
  checks.ok(await sidebar(alice).getByRole("button", { name: "App Studio" }).isVisible(), "a member is offered App Studio in the sidebar");
  await openStudio(alice);
  checks.ok(alice.url().endsWith("#/studio"), "App Studio has its own route", alice.url());
  await studioPanel(alice).getByText("You have no apps yet. Start one with New app.").waitFor();
  checks.equal(await alice.getByRole("heading", { name: "Member apps (moderation)" }).count(), 0, "a member has no moderation section");
  checks.equal(await alice.getByLabel("Let members make their own apps").count(), 0, "nor the admins' switch");
  await screenshot(alice, "studio-empty");

  await studioPanel(alice).getByRole("button", { name: "New app" }).click();
  const editor = studioPanel(alice).locator(".studio-editor");
  await editor.getByRole("heading", { name: "New app" }).waitFor();
  const name = editor.getByLabel("Name", { exact: true });
  checks.ok(await name.evaluate((input) => input === document.activeElement), "the new app starts at its name");
  for (const path of ["APP.md", "index.html", "app.js"]) {
    checks.ok(await editor.getByLabel(`Contents of ${path}`, { exact: true }).isVisible(), `the template has ${path}`);
  }
  await name.fill(NAME);
  const manifest = await editor.getByLabel("Contents of APP.md", { exact: true }).inputValue();
  checks.ok(manifest.startsWith("---\nname: \"Habit Tracker\"\n"), "the template's manifest follows the name and has no id (the platform names the app)", manifest);

  for (const [path, text] of Object.entries(FILES)) {
    let area = editor.getByLabel(`Contents of ${path}`, { exact: true });
    if ((await area.count()) === 0) {
      await editor.getByRole("button", { name: "Add file" }).click();
      const added = editor.locator(".studio-file").last().getByLabel("File name");
      checks.ok(await added.evaluate((input) => input === document.activeElement), `Add file puts the focus on the new file's name (${path})`);
      await added.fill(path);
      area = editor.getByLabel(`Contents of ${path}`, { exact: true });
    }
    await area.fill(text);
  }
  checks.equal(await editor.locator(".studio-file").count(), Object.keys(FILES).length, "one textarea per file");
  await editor.getByRole("button", { name: "Check", exact: true }).click();
  await said(alice, "Checked: no problems found.");
  checks.ok(await editor.getByText("The package is valid: it can be deployed.").isVisible(), "Check says the pasted package is valid");
  await screenshot(alice, "studio-editor", editor.getByRole("button", { name: "Check", exact: true }));
  await fitsNarrow(alice, checks, "the editor");

  // --- 3. A broken file, its diagnostic, the fix ------------------------------
  const script = editor.getByLabel("Contents of app.js", { exact: true });
  await script.fill(BROKEN_SCRIPT);
  await editor.getByRole("button", { name: "Check", exact: true }).click();
  await said(alice, /Checked: \d+ problems? found/);
  const diagnostic = editor.getByRole("list", { name: "Problems found" }).getByRole("button").filter({ hasText: /^app\.js:/ }).first();
  const diagnosticText = await diagnostic.textContent();
  checks.ok(/^app\.js:2 — .+ \(JS_MODULE_SYNTAX\)$/.test(diagnosticText), "the diagnostic names the file and line: file:line — reason (code)", diagnosticText);
  await screenshot(alice, "studio-diagnostic", diagnostic);
  await diagnostic.click();
  const focused = await script.evaluate((area) => ({ focused: area === document.activeElement, start: area.selectionStart }));
  checks.equal(focused, { focused: true, start: '"use strict";\n'.length }, "choosing the diagnostic focuses app.js at line 2");
  await script.fill(FILES["app.js"]);
  await editor.getByRole("button", { name: "Check", exact: true }).click();
  await said(alice, "Checked: no problems found.");
  checks.equal(await editor.getByRole("list", { name: "Problems found" }).count(), 0, "the fixed package has no problem");

  // --- 4. Deploy, the sidebar, the preview ------------------------------------
  await editor.getByRole("button", { name: "Deploy" }).click();
  const outcome = studioPanel(alice).locator(".studio-outcome");
  await outcome.waitFor({ timeout: 30_000 });
  const deployed = /^Deployed Habit Tracker as ([a-z0-9-]+): it is in your Apps list now\.$/.exec(await outcome.textContent());
  checks.ok(deployed, "Deploy says what it did", await outcome.textContent());
  const id = deployed[1];
  checks.ok(id.startsWith("member-"), "the platform named it, not APP.md's id: habit-tracker", id);
  console.log(`member-app ${id}`);
  await waitFor("the editor on the deployed app", () => alice.url().endsWith(`#/studio/${id}`));
  await studioPanel(alice).locator(".studio-editor").getByRole("heading", { name: `Editing ${NAME}` }).waitFor();
  checks.ok(await appLink(alice, NAME).isVisible(), "the deployed app is in her sidebar");
  const entry = mine(alice, NAME);
  checks.ok((await entry.textContent()).includes(`${id} · `), "Your apps lists it with its id", await entry.textContent());
  checks.ok((await entry.textContent()).includes("Not shared with anyone."), "and its shares");
  await screenshot(alice, "studio-deployed");

  const editing = studioPanel(alice).locator(".studio-editor");
  await editing.getByRole("button", { name: "Preview", exact: true }).click();
  await editing.getByText(BANNER).waitFor({ timeout: 20_000 });
  await said(alice, "The preview is open.");
  await innerFrame(alice, NAME).getByText(EMPTY).waitFor({ timeout: 20_000 });
  checks.ok(true, "Preview runs the app in the sandbox frame under the preview banner");
  await screenshot(alice, "studio-preview", editing.locator(".draft-preview"));
  await fitsNarrow(alice, checks, "the preview");
  await editing.getByRole("button", { name: "Close preview" }).click();
  await said(alice, "The preview is closed.");
  checks.equal(await outerFrame(alice, NAME).count(), 0, "Close preview removes its frame");

  // --- 5. Her app stores a row ------------------------------------------------
  await openApp(alice, NAME);
  const aliceView = innerFrame(alice, NAME);
  await aliceView.getByText(EMPTY).waitFor({ timeout: 20_000 });
  await aliceView.getByLabel("New habit").fill(ALICE_ROW);
  await aliceView.getByRole("button", { name: "Add" }).click();
  await aliceView.getByRole("listitem").filter({ hasText: ALICE_ROW }).waitFor({ timeout: 20_000 });
  checks.ok(true, "her app adds a row through its own UI");

  // --- 6. Shared with bob; not with carol -------------------------------------
  await openStudio(alice);
  await mine(alice, NAME).getByRole("button", { name: `Share ${NAME}` }).click();
  await mine(alice, NAME).getByLabel("Share with (user name)").fill(BOB.username);
  await mine(alice, NAME).getByRole("button", { name: "Add", exact: true }).click();
  await said(alice, `${NAME} is shared with ${BOB.username}: if someone uses this name here`);
  checks.ok((await mine(alice, NAME).textContent()).includes(`Shared with ${BOB.username}.`), "the app lists its share");
  checks.ok(await mine(alice, NAME).getByRole("button", { name: `Remove ${BOB.username}` }).isVisible(), "each share can be removed");
  await screenshot(alice, "studio-shared", mine(alice, NAME));

  await bob.reload();
  await openApp(bob, NAME);
  const bobView = innerFrame(bob, NAME);
  await bobView.getByText(EMPTY).waitFor({ timeout: 20_000 });
  checks.equal(await bobView.getByText(ALICE_ROW).count(), 0, "bob sees none of alice's rows");
  await bobView.getByLabel("New habit").fill(BOB_ROW);
  await bobView.getByRole("button", { name: "Add" }).click();
  await bobView.getByRole("listitem").filter({ hasText: BOB_ROW }).waitFor({ timeout: 20_000 });
  checks.equal(await bobView.getByRole("listitem").count(), 1, "bob adds his own row and sees only it");

  // Alice stops sharing while bob has it open: his next action closes it
  // with a plain sentence, and it leaves his sidebar.
  await mine(alice, NAME).getByRole("button", { name: `Remove ${BOB.username}` }).click();
  await said(alice, `${NAME} is no longer shared with ${BOB.username}:`);
  await bobView.getByLabel("New habit").fill("One more");
  await bobView.getByRole("button", { name: "Add" }).click();
  await bob.getByText(`Your access to ${NAME} was removed.`, { exact: true }).waitFor({ timeout: 20_000 });
  checks.equal(await outerFrame(bob, NAME).count(), 0, "the app is closed");
  await waitFor("bob's sidebar to drop the app", async () => (await appLink(bob, NAME).count()) === 0);
  checks.equal(await bob.getByText(/app__/).count(), 0, "no internal tool name reaches him");
  await screenshot(bob, "access-removed");

  await openApp(alice, LOG);
  const aliceLog = innerFrame(alice, LOG);
  await aliceLog.getByText(EMPTY).waitFor({ timeout: 20_000 });
  checks.equal(await aliceLog.getByText(BOB_LOG_ROW).count(), 0, "alice, shared bob's Habit Log, sees none of his rows");
  await aliceLog.getByLabel("New habit").fill(ALICE_LOG_ROW);
  await aliceLog.getByRole("button", { name: "Add" }).click();
  await aliceLog.getByRole("listitem").filter({ hasText: ALICE_LOG_ROW }).waitFor({ timeout: 20_000 });
  checks.equal(await aliceLog.getByRole("listitem").count(), 1, "and sees only her own");

  const carol = (await newStudioPage(browser, "carol")).page;
  await carol.goto(`${STUDIO}/`);
  await signIn(carol, CAROL);
  await carol.getByRole("heading", { name: `Welcome, ${CAROL.username}` }).waitFor();
  checks.equal(await appLink(carol, NAME).count(), 0, "carol has no such app in her sidebar");
  checks.equal(await appLink(carol, LOG).count(), 0, "nor bob's");

  // --- 7. Moderation; the switch off ------------------------------------------
  await openStudio(admin);
  const moderated = studioPanel(admin).getByRole("list", { name: "Every member app" }).getByRole("listitem").filter({ hasText: NAME });
  checks.ok((await moderated.textContent()).includes(`${id} · by ${ALICE.username}`), "the admin sees it with its author", await moderated.textContent());
  checks.ok(await moderated.getByRole("button", { name: `Disable ${NAME}` }).isVisible(), "with Disable");
  checks.ok(await moderated.getByRole("button", { name: `Promote to catalogue: ${NAME}` }).isVisible(), "and Promote to catalogue…");
  await screenshot(admin, "studio-moderation", moderated);
  await fitsNarrow(admin, checks, "the moderation list");
  await admin.getByLabel("Let members make their own apps").click();
  await said(admin, "Member apps are off");
  checks.ok(!(await admin.getByLabel("Let members make their own apps").isChecked()), "the admin turned member apps off");

  await openStudio(alice);
  await studioPanel(alice).getByText(OFF).waitFor();
  checks.equal(await studioPanel(alice).getByRole("button", { name: "New app" }).count(), 0, "with member apps off there is no New app");
  checks.equal(await mine(alice, NAME).getByRole("button", { name: `Edit ${NAME}` }).count(), 0, "nor Edit");
  checks.ok(await mine(alice, NAME).getByRole("button", { name: `Delete ${NAME}` }).isVisible(), "Delete stays");
  await freshStudio(alice, () => alice.goto(`${STUDIO}/#/studio/${id}`));
  await studioPanel(alice).getByText(OFF).waitFor();
  checks.equal(await alice.locator(".studio-editor").count(), 0, "the editor is hidden, even on the app's own editing route");
  await screenshot(alice, "studio-off");
  await fitsNarrow(alice, checks, "App Studio with member apps off");

  await mine(alice, NAME).getByRole("button", { name: `Open ${NAME}` }).click();
  await alice.getByText(`${NAME} is open.`).waitFor({ timeout: 20_000 });
  await innerFrame(alice, NAME).getByRole("listitem").filter({ hasText: ALICE_ROW }).waitFor({ timeout: 20_000 });
  checks.ok(true, "her running app still works and lists her row");

  await openStudio(alice);
  await mine(alice, NAME).getByRole("button", { name: `Delete ${NAME}` }).click();
  await mine(alice, NAME).getByRole("heading", { name: `Delete ${NAME}?` }).waitFor();
  await mine(alice, NAME).getByRole("button", { name: "Cancel" }).click();
  checks.equal(await mine(alice, NAME).getByRole("button", { name: "Yes, delete" }).count(), 0, "Cancel keeps the app");
  // Escape, and a click elsewhere, close the question too.
  await mine(alice, NAME).getByRole("button", { name: `Delete ${NAME}` }).click();
  await mine(alice, NAME).getByRole("button", { name: "Yes, delete" }).waitFor();
  await alice.keyboard.press("Escape");
  checks.equal(await mine(alice, NAME).getByRole("button", { name: "Yes, delete" }).count(), 0, "Escape keeps the app");
  await mine(alice, NAME).getByRole("button", { name: `Delete ${NAME}` }).click();
  await mine(alice, NAME).getByRole("button", { name: "Yes, delete" }).waitFor();
  await studioPanel(alice).getByRole("heading", { name: "App Studio", level: 1 }).click();
  checks.equal(await mine(alice, NAME).getByRole("button", { name: "Yes, delete" }).count(), 0, "a click elsewhere keeps the app");
  await mine(alice, NAME).getByRole("button", { name: `Delete ${NAME}` }).click();
  await mine(alice, NAME).getByRole("button", { name: "Yes, delete" }).click();
  await said(alice, `Deleted ${NAME}.`);
  await studioPanel(alice).getByText("You have no apps.").waitFor();
  await waitFor("the sidebar to drop the deleted app", async () => (await appLink(alice, NAME).count()) === 0);
  checks.ok(true, "she deletes it with member apps off, and it leaves her sidebar");
  await screenshot(alice, "studio-deleted");
}
