// The Studio's MCP Apps bridge in real Chromium against the real stack
// (security catalogue C1, C2, C4, C7, C8, C9, C11, C12 and an adapted B13):
// `sasha up` (started by tests/chromium/bridge.rs) serves Studio on
// http://localhost:<port> and the sandbox on http://127.0.0.1:<port>; this
// script signs in as the dev admin through the Studio form, opens the fixture
// app `bridge-probe` (tests/browser/apps/bridge-probe/) from the sidebar and
// clicks its suite buttons inside the app's sandboxed frame. Each suite makes
// its attempts from the app's own document and writes what it saw into #out;
// this script checks what the Studio page did about them: its /mcp requests
// (Playwright request events), dialogs, popups, frame heights, globals, and a
// loopback sink server that must count nothing. C2 uses a page on a third
// loopback origin (this script's attacker server).
//
// Environment (set by tests/chromium/bridge.rs): CHROMIUM, STUDIO_URL,
// SANDBOX_ORIGIN, ADMIN_USER, ADMIN_PASSWORD, ARTIFACTS.

import fs from "node:fs";
import http from "node:http";
import path from "node:path";

import { Checks, env, launchChromium, startSink, waitFor } from "./harness.mjs";
import { signIn } from "./studio-page.mjs";

const started = Date.now();
const STUDIO = env("STUDIO_URL");
const SANDBOX = env("SANDBOX_ORIGIN");
const artifacts = env("ARTIFACTS");
fs.mkdirSync(artifacts, { recursive: true });

const APP = "bridge-probe";
const CREATE = "app__bridge_probe__notes__create";
const MIN_HEIGHT = 240;
// The app pane shows a view at its full height (MAX_FULL_FRAME_HEIGHT); the
// spec's 1200 px clamp is an inline view's.
const MAX_HEIGHT = 16000;
const sleep = (ms) => new Promise((resolve) => setTimeout(resolve, ms));

/** The attacker: a page on a third loopback origin that opens and frames Studio. */
const ATTACKER_PAGE = `<!doctype html>
<html><head><meta charset="utf-8"><title>attacker</title></head>
<body>
<button id="go" type="button">open Studio</button>
<iframe id="framed" title="framed Studio" width="600" height="300"></iframe>
<script>
const studio = new URLSearchParams(location.search).get("studio");
document.getElementById("framed").src = studio + "/";
window.sent = 0;
window.done = false;
window.errors = [];
const create = { jsonrpc: "2.0", id: "p-c2-call", method: "tools/call",
  params: { name: "${CREATE}", arguments: { values: { body: "c2-foreign" } } } };
const messages = [
  { jsonrpc: "2.0", method: "ui/notifications/sandbox-proxy-ready", params: {} },
  { jsonrpc: "2.0", id: "p-c2-init", method: "ui/initialize", params: { appCapabilities: {}, protocolVersion: "2026-01-26" } },
  { jsonrpc: "2.0", method: "ui/notifications/initialized", params: {} },
  create,
  { jsonrpc: "2.0", method: "ui/notifications/size-changed", params: { height: 1111 } },
];
const hijack = { jsonrpc: "2.0", method: "ui/notifications/sandbox-resource-ready", params: { html: "<p>hijacked</p>" } };
function send(target, message) {
  try { target.postMessage(message, "*"); window.sent += 1; } catch (error) { window.errors.push(String(error).slice(0, 100)); }
}
document.getElementById("go").addEventListener("click", () => {
  const w = window.open(studio + "/#/apps/${APP}", "_blank");
  window.opened = w !== null;
  let rounds = 0;
  const timer = setInterval(() => {
    rounds += 1;
    for (const message of messages) send(w, message);
    try {
      for (let index = 0; index < w.frames.length; index += 1) {
        send(w.frames[index], hijack);
        send(w.frames[index], create);
        for (let inner = 0; inner < w.frames[index].frames.length; inner += 1) {
          send(w.frames[index].frames[inner], create);
        }
      }
    } catch (error) {
      window.errors.push(String(error).slice(0, 100));
    }
    if (rounds >= 50) {
      clearInterval(timer);
      window.done = true;
    }
  }, 100);
});
</script>
</body></html>`;

async function startAttacker() {
  const server = http.createServer((request, response) => {
    response.writeHead(200, { "content-type": "text/html; charset=utf-8", "cache-control": "no-store" });
    response.end(ATTACKER_PAGE);
  });
  const port = await new Promise((resolve, reject) => {
    server.once("error", reject);
    server.listen(0, "127.0.0.1", () => resolve(server.address().port));
  });
  return { server, origin: `http://127.0.0.1:${port}` };
}

const sink = await startSink();
const attacker = await startAttacker();
const checks = new Checks();
const browser = await launchChromium();
try {
  await run();
} finally {
  await browser.close();
  sink.server.close();
  attacker.server.close();
}
console.log(`${checks.passed} checks passed in ${((Date.now() - started) / 1000).toFixed(1)} s; screenshots in ${artifacts}`);

/** The error code an answer of the host carries ("ok" for a plain result). */
function codeOf(answer) {
  if (answer === "no answer" || answer === undefined) {
    return "no answer";
  }
  if (answer.error) {
    return answer.error.data?.code ?? `rpc ${answer.error.code}`;
  }
  if (answer.result?.isError) {
    return answer.result.structuredContent?.error?.code ?? "isError";
  }
  return "ok";
}

async function run() {
  const context = await browser.newContext({ viewport: { width: 1100, height: 900 } });
  const page = await context.newPage();

  // Every /mcp request any page of the context sends, with the page it came from.
  const mcp = [];
  context.on("request", (request) => {
    const url = new URL(request.url());
    if (url.origin !== STUDIO || !url.pathname.startsWith("/mcp")) {
      return;
    }
    let from = "other";
    try {
      from = request.frame().page() === page ? "studio" : "other";
    } catch {
      // a request without a frame
    }
    const body = request.postData() || "";
    let parsed = {};
    try {
      parsed = JSON.parse(body);
    } catch {
      // not JSON
    }
    mcp.push({ from, method: parsed.method, name: parsed.params?.name, app: request.headers()["sasha-app"], body });
  });
  const dialogs = [];
  page.on("dialog", (dialog) => {
    dialogs.push(dialog.message());
    dialog.dismiss().catch(() => {});
  });
  const pages = [];
  context.on("page", (opened) => pages.push(opened));
  const consoleTexts = [];
  page.on("console", (message) => {
    consoleTexts.push(message.text());
    if (process.env.BROWSER_CONSOLE) {
      console.log(`  [console ${message.type()}] ${message.text().slice(0, 300)}`);
    }
  });
  const pageErrors = [];
  page.on("pageerror", (error) => pageErrors.push(String(error)));

  // Sign in through the form and open the app from the sidebar.
  await page.goto(`${STUDIO}/`);
  await signIn(page, { username: env("ADMIN_USER"), password: env("ADMIN_PASSWORD") });
  await page.waitForSelector("a.app-link", { timeout: 15_000 });
  const links = await page.$$eval("a.app-link", (anchors) => anchors.map((anchor) => anchor.textContent.trim()));
  checks.ok(links.some((link) => link.startsWith("Bridge probe")) && links.some((link) => link.startsWith("Hello")), "signed in as the dev admin; the sidebar lists the fixture apps", links);
  await page.click("a.app-link:has-text('Bridge probe')");

  const appProxy = await waitFor("the app's proxy frame with its inner frame", () =>
    page.frames().find((frame) => frame.url().startsWith(`${SANDBOX}/app-sandbox`) && frame.childFrames().length === 1), 15_000);
  const inner = appProxy.childFrames()[0];
  await inner.waitForSelector("body[data-connected=true]", { timeout: 15_000 });
  checks.ok(inner.url().startsWith("data:text/html"), "the app runs in the proxy's inner data: frame");
  await inner.fill("#config", JSON.stringify({ sink: sink.url, studio: STUDIO, sandbox: SANDBOX }));
  // Every height the Studio page gives the app frame, from now on.
  await page.evaluate(() => {
    const frame = document.querySelector("iframe.app-frame");
    window.__heights = [frame.style.height];
    new MutationObserver(() => window.__heights.push(frame.style.height)).observe(frame, { attributes: true, attributeFilter: ["style"] });
  });

  async function suite(name) {
    const before = mcp.length;
    const dialogsBefore = dialogs.length;
    await inner.click(`button[data-suite="${name}"]`);
    await inner.waitForSelector(`#out[data-state="done"][data-suite="${name}"]`, { timeout: 30_000 });
    const report = JSON.parse(await inner.textContent("#out"));
    if (!report.ok) {
      throw new Error(`suite ${name} failed inside the app: ${report.error}`);
    }
    // Let a late request show up before counting.
    await sleep(150);
    if (process.env.BROWSER_CONSOLE) {
      console.log(`  [${name}] ${JSON.stringify(report.value).slice(0, 3000)}`);
    }
    return { value: report.value, requests: mcp.slice(before), dialogs: dialogs.slice(dialogsBefore) };
  }
  const calls = (requests, needle) => requests.filter((request) => request.method === "tools/call" && request.body.includes(needle));

  // Baseline: the legitimate path writes, and the observer sees its request.
  {
    const { value, requests } = await suite("baseline");
    checks.equal(value.created, "baseline", "baseline: the app's own create through the runtime works");
    const create = requests.find((request) => request.name === CREATE);
    checks.ok(create && create.from === "studio" && create.app === APP, "baseline: the observer sees the Studio page's /mcp tools/call with Sasha-App", requests);
  }

  // C1: posting straight to Studio (top, parent.parent) skips the proxy.
  {
    const { value, requests } = await suite("c1");
    checks.ok(value.sameWindow, "C1: top and parent.parent are the Studio window");
    checks.ok(Object.values(value.attempts).every((attempt) => attempt === "posted"), "C1: every direct post to Studio was delivered by the browser", value.attempts);
    checks.equal(requests.length, 0, "C1: nothing reached /mcp from top.postMessage / parent.parent.postMessage");
    checks.equal(value.answers, [], "C1: Studio answered none of the direct requests");
  }

  // C4 / C7: the control plane and JSON-RPC confusion through the proxy.
  {
    const { value, requests } = await suite("c4c7");
    checks.ok(Object.values(value.attempts).every((attempt) => attempt === "posted"), "C4/C7: every spoof was posted", value.attempts);
    checks.equal(value.counts.resourceReadyRequest, 0, "C4: sandbox-resource-ready from the app is dropped (no answer)");
    checks.ok(!value.spoofedDocument && appProxy.childFrames().length === 1 && appProxy.childFrames()[0] === inner && !inner.isDetached(),
      "C4: the spoofed resource-ready replaced nothing: the proxy still holds the one original app frame");
    checks.equal(await page.locator("iframe").count(), 1, "C4: Studio holds exactly one app frame");
    checks.equal(value.counts.batchPing + value.counts.batchCall, 0, "C7: a batch array is dropped");
    checks.equal(calls(requests, "c7-batch").length, 0, "C7: the batch's tools/call never reached /mcp");
    checks.equal(value.counts.longStringId, 0, "C7: a 10,010-character id is dropped");
    checks.equal(value.counts.v1, 0, "C7: a jsonrpc 1.0 message is dropped");
    checks.equal(value.counts.reused, 1, "C7: a request id reused while in flight is served once");
    checks.equal(calls(requests, "c7-dup").length, 1, "C7: the reused id sent exactly one /mcp tools/call");
    checks.equal(value.bodies.filter((body) => body === "c7-dup").length, 1, "C7: the reused id wrote one row");
    checks.equal(codeOf(value.ping), "ok", "C4/C7: after the spoofs (responses to ids never issued, object, array, 1e300, 1.5, null ids) the host still answers ping");
  }

  // C8: identity and other apps' tools named by the view.
  {
    const { value, requests } = await suite("c8");
    checks.equal(codeOf(value.paramsIdentity), "ok", "C8: appId/userId/_meta identity keys in params are ignored (the call runs as this app and user)");
    const paramsCall = calls(requests, "c8-params");
    checks.ok(paramsCall.length === 1 && paramsCall[0].app === APP && !paramsCall[0].body.includes("intruder") && !paramsCall[0].body.includes("hello"),
      "C8: the forwarded /mcp request carries Sasha-App bridge-probe and none of the view's identity keys", paramsCall);
    checks.equal(codeOf(value.argumentsIdentity), "APP_INPUT_INVALID", "C8: appId/userId inside the tool arguments are refused by the gateway schema");
    checks.ok(["APP_INPUT_INVALID", "APP_FIELD_UNDECLARED"].includes(codeOf(value.undeclaredColumn)), "C8: an undeclared owner column in values is refused", value.undeclaredColumn);
    for (const key of ["otherOpener", "otherAppTable", "prefixTrick", "unlistedOwnName", "sourceTool"]) {
      const answer = value[key];
      checks.ok(answer.error?.code === -32000 && answer.error?.data?.code === "APP_CAPABILITY_DENIED", `C8: ${key} is refused by the host with -32000 APP_CAPABILITY_DENIED`, answer);
    }
    const forbidden = ["open_app__hello", "app__hello__notes__create", "app__bridge_probe_x__notes__list", "app__bridge_probe__other__list", "writeAppFile"];
    checks.equal(requests.filter((request) => forbidden.includes(request.name)), [], "C8: none of the refused tools reached /mcp");
  }

  // C9: prototype pollution.
  {
    const { value, requests } = await suite("c9");
    checks.ok(value.ownProtoKeyKept, "C9: the app's payload carries an own __proto__ key");
    checks.ok(calls(requests, "c9-values").some((request) => request.body.includes('"__proto__":{"isAdmin":true}')), "C9: the own __proto__ key reaches the gateway as plain JSON", calls(requests, "c9-values"));
    checks.equal(codeOf(value.values), "APP_INPUT_INVALID", "C9: __proto__ in values is refused by the gateway schema");
    checks.equal(codeOf(value.arguments), "APP_INPUT_INVALID", "C9: __proto__ in the arguments is refused by the gateway schema");
    checks.equal(codeOf(value.constructor), "APP_INPUT_INVALID", "C9: constructor.prototype in values is refused by the gateway schema");
    checks.equal(codeOf(value.query), "APP_INPUT_INVALID", "C9: __proto__ in a list query and its where clause is refused");
    checks.equal(codeOf(value.params), "ok", "C9: __proto__/constructor in the request params are ignored by the host");
    checks.ok(!calls(requests, "").some((request) => request.name !== CREATE && request.body.includes("isAdmin") && !request.body.includes('"where"')),
      "C9: the host forwards nothing of the params' own __proto__/constructor keys");
    checks.equal(value.appIsAdmin, "undefined", "C9: ({}).isAdmin is undefined in the app afterwards");
    checks.equal(await page.evaluate(() => [String({}.isAdmin), String(Object.prototype.isAdmin), String({}.x)]), ["undefined", "undefined", "undefined"],
      "C9: ({}).isAdmin is undefined in the Studio page afterwards");
  }

  // C11: markup in logs, tool names, methods and links.
  {
    const { value, requests, dialogs: seen } = await suite("c11");
    checks.equal(codeOf(value.toolName), "APP_CAPABILITY_DENIED", "C11: markup as a tool name is refused as text");
    checks.equal(value.method.error?.code, -32601, "C11: markup as a method is answered Method not found");
    checks.equal(value.uiMessage.error?.code, -32601, "C11: ui/message is not offered");
    checks.equal(codeOf(value.openLink), "APP_INPUT_INVALID", "C11: markup as a link is refused");
    checks.equal(requests, [], "C11: nothing reached /mcp");
    checks.equal(seen, [], "C11: no dialog");
    await sleep(300);
    const studio = await page.evaluate(() => ({
      pwned: String(window.__pwned),
      images: document.querySelectorAll("img").length,
      markup: document.body.innerHTML.includes("c11-img"),
    }));
    checks.equal(studio, { pwned: "undefined", images: 0, markup: false }, "C11: nothing executed or was inserted in the Studio page");
    checks.ok(consoleTexts.some((text) => text.includes("[app bridge-probe]") && text.includes("c11-img")), "C11: the log went to the console as text", consoleTexts.slice(-5));
    checks.equal(sink.hits, [], "C11: the sink saw no request");
  }

  // C12: links and sizes.
  {
    const pagesBefore = pages.length;
    const { value, requests, dialogs: seen } = await suite("c12");
    for (const [url, answer] of Object.entries(value.refused)) {
      checks.ok(answer.error?.code === -32000 && answer.error?.data?.code === "APP_INPUT_INVALID", `C12: open-link ${url.slice(0, 60)} is refused`, answer);
    }
    checks.equal(seen.length, 1, "C12: exactly one confirm dialog (for the https link), none for refused links");
    checks.ok(seen[0].includes("https://example.com/c12?%3Cb%3Ebold%3C/b%3E"), "C12: the confirm names the normalized https URL", seen);
    checks.equal(value.confirmed, { result: { isError: true } }, "C12: a dismissed confirm answers isError and opens nothing");
    await sleep(300);
    checks.equal(pages.length, pagesBefore, "C12: no window was opened");
    checks.equal(requests, [], "C12: nothing reached /mcp");
    const heights = (await page.evaluate(() => window.__heights)).map((height) => Number.parseFloat(height));
    checks.ok(heights.every((height) => height >= MIN_HEIGHT && height <= MAX_HEIGHT), "C12: every frame height stayed within 240-16000 px", heights);
    const huge = heights.indexOf(MAX_HEIGHT);
    checks.ok(huge !== -1 && heights.indexOf(MIN_HEIGHT, huge) !== -1, "C12: 1e9 was clamped to 16000 and -1 to 240 (NaN, Infinity, strings, objects ignored)", heights);
    checks.ok(!heights.includes(1111), "C1: the size-changed posted straight to Studio was ignored", heights);
  }

  // B13 (adapted: Studio shows one app at a time): a sibling proxy frame stands
  // in for another app; the app posts to it and tries to navigate frames.
  {
    await page.evaluate((url) => {
      const sibling = document.createElement("iframe");
      sibling.id = "b13-sibling";
      sibling.src = url;
      document.body.append(sibling);
    }, `${SANDBOX}/app-sandbox`);
    const sibling = await waitFor("the sibling proxy frame", () =>
      page.frames().find((frame) => frame !== appProxy && frame.url().startsWith(`${SANDBOX}/app-sandbox`)));
    await sibling.waitForLoadState("load");
    await sleep(200);
    const { value, requests } = await suite("b13");
    checks.equal(value.frames.length, 2, "B13: the app sees two frames in the Studio page");
    const other = value.frames.find((frame) => !frame.own);
    checks.ok(other.resourceReady === "posted" && other.call === "posted", "B13: the posts to the sibling proxy were delivered", other);
    await sleep(300);
    checks.equal(await sibling.evaluate(() => document.querySelectorAll("iframe").length), 0, "B13: the sibling proxy ignored the app's resource-ready (no frame created)");
    checks.equal(value.answers, [], "B13: nothing answered the app's posts to other frames");
    checks.equal(requests, [], "B13: nothing reached /mcp");
    checks.ok(["TypeError", "SecurityError"].includes(value.missing), "B13: posting to a frame index beyond the page's frames throws", value.missing);
    checks.ok(!appProxy.isDetached() && appProxy.url() === `${SANDBOX}/app-sandbox` && !sibling.isDetached() && sibling.url() === `${SANDBOX}/app-sandbox`,
      "B13: navigating the own proxy and the sibling frame was blocked", value.frames);
    checks.ok(!inner.isDetached() && appProxy.childFrames()[0] === inner, "B13: the app frame is still in place");
    checks.equal(sink.hits, [], "B13: the sink saw no request");
    await page.evaluate(() => document.getElementById("b13-sibling").remove());
  }

  // C2: a page on another origin opens Studio, posts to it and its frames, and
  // tries to frame it.
  {
    const attackerPage = await context.newPage();
    await attackerPage.goto(`${attacker.origin}/?studio=${encodeURIComponent(STUDIO)}`);
    const [popup] = await Promise.all([attackerPage.waitForEvent("popup"), attackerPage.click("#go")]);
    const popupProxy = await waitFor("the popup's app frame", () =>
      popup.frames().find((frame) => frame.url().startsWith(`${SANDBOX}/app-sandbox`) && frame.childFrames().length === 1), 15_000);
    await popupProxy.childFrames()[0].waitForSelector("body[data-connected=true]", { timeout: 15_000 });
    await attackerPage.waitForFunction(() => window.done, undefined, { timeout: 15_000 });
    const attempt = await attackerPage.evaluate(() => ({ opened: window.opened, sent: window.sent, errors: window.errors.slice(0, 3) }));
    checks.ok(attempt.opened && attempt.sent > 100, "C2: the foreign page opened Studio and posted to it and its frames", attempt);
    const popupRequests = mcp.filter((request) => request.from === "other");
    checks.ok(popupRequests.some((request) => request.method === "tools/list"), "C2: the observer sees the opened Studio's own tools/list", popupRequests);
    checks.ok(popupRequests.every((request) => request.method === "tools/list"), "C2: the opened Studio sent nothing else to /mcp (no foreign tools/call)", popupRequests);
    const popupState = await popup.evaluate(() => ({
      frames: document.querySelectorAll("iframe").length,
      height: document.querySelector("iframe.app-frame").style.height,
    }));
    checks.ok(popupState.frames === 1 && popupState.height !== "1111px", "C2: the opened Studio kept one app frame and ignored the foreign size-changed", popupState);
    checks.equal(popupProxy.childFrames().length, 1, "C2: the popup's proxy kept its one app frame");
    checks.equal(await popupProxy.childFrames()[0].evaluate(() => document.body.innerText.includes("hijacked")), false, "C2: the foreign resource-ready reached no app frame");
    const framed = attackerPage.frames().find((frame) => frame.parentFrame() === attackerPage.mainFrame());
    const framedApp = await framed.evaluate(() => document.querySelector("#app") !== null).catch(() => false);
    checks.ok(!framedApp && !framed.url().startsWith(STUDIO), "C2: framing Studio is refused (frame-ancestors 'none'; the frame shows Chromium's error page)", framed.url());
    if (process.env.BROWSER_CONSOLE) {
      console.log(`  [c2] ${JSON.stringify({ attempt, framed: framed.url(), popupRequests: popupRequests.length })}`);
    }
    await attackerPage.screenshot({ path: path.join(artifacts, "bridge-attacker.png") });
    await popup.close();
    await attackerPage.close();
  }

  // Afterwards: only the legitimate writes exist, and the app still works.
  {
    const { value } = await suite("state");
    checks.equal(value.bodies.slice().sort(), ["baseline", "c7-dup", "c8-params"], "the notes table holds only the legitimate writes (no C1, C2, C7 batch, C8, C9 or B13 row)");
    checks.ok(value.connected && value.appIsAdmin === "undefined", "the app is still connected and working after every attempt");
    checks.equal(dialogs.length, 1, "one dialog in the whole run (the C12 https confirm)");
    checks.equal(sink.hits, [], "the sink saw no request in the whole run");
    checks.equal(sink.connections(), 0, "the sink saw no connection in the whole run");
    checks.equal(pageErrors, [], "the Studio page threw no uncaught error");
  }
  await page.screenshot({ path: path.join(artifacts, "bridge-studio.png"), fullPage: true });
}
