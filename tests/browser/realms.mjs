// The realm lockdown in real Chromium (security catalogue B9): the `realms`
// fixture app, assembled by the real validator, tries every route it knows to
// a WebRTC peer connection or a speculative connection against a sink that
// listens on TCP and UDP on one port. With the lockdown, every route is
// refused and the sink records nothing: no datagram, no connection, no
// request. Then the same app runs once more with the lockdown script cut out
// of the document (APP_HTML_UNLOCKED, made by tests/chromium/sandbox.rs), and
// the sink must record the datagrams: proof that this test can fail.
//
// Environment (set by tests/chromium/sandbox.rs): CHROMIUM, SANDBOX_ORIGIN,
// APP_HTML, APP_HTML_UNLOCKED, ARTIFACTS.

import fs from "node:fs";
import path from "node:path";

import { Checks, env, handshake, launchChromium, startDualSink, startStudio, waitFor } from "./harness.mjs";

const READY = "ui/notifications/sandbox-proxy-ready";
const RESOURCE_READY = "ui/notifications/sandbox-resource-ready";
// STUN and TURN retransmit, preconnects are issued in the background: how
// long the sink keeps listening after the routes ran.
const SETTLE_MS = 2_000;

const started = Date.now();
const SANDBOX = env("SANDBOX_ORIGIN");
const locked = fs.readFileSync(env("APP_HTML"), "utf8");
const unlocked = fs.readFileSync(env("APP_HTML_UNLOCKED"), "utf8");
const artifacts = env("ARTIFACTS");
fs.mkdirSync(artifacts, { recursive: true });

const studio = await startStudio();
const sink = await startDualSink();
await handshake({ studioPort: studio.port });
const STUDIO = `http://localhost:${studio.port}`;
const checks = new Checks();
const measured = {};

const browser = await launchChromium();
try {
  await run();
} finally {
  await browser.close();
  studio.server.close();
  sink.close();
}
console.log(`measured ${JSON.stringify(measured)}`);
console.log(`${checks.passed} checks passed in ${((Date.now() - started) / 1000).toFixed(1)} s`);

/** Opens a fresh sandbox, loads `html`, runs the routes and returns their results. */
async function runRoutes(page, html, label) {
  await page.goto(`${STUDIO}/studio.html`);
  await page.evaluate((url) => window.openSandbox(url), `${SANDBOX}/app-sandbox`);
  const fromProxy = async () => (await page.evaluate(() => window.records)).filter((record) => record.fromProxy && record.origin === SANDBOX);
  await waitFor("sandbox-proxy-ready", async () => (await fromProxy()).some((record) => record.data?.method === READY));
  const send = (message) => page.evaluate(([message, origin]) => window.sendToProxy(message, origin, false), [message, SANDBOX]);
  await send({ jsonrpc: "2.0", method: RESOURCE_READY, params: { html } });
  await waitFor(`the ${label} app's sasha-test/loaded`, async () => (await fromProxy()).some((record) => record.data?.method === "sasha-test/loaded"));
  const id = `routes-${label}`;
  await send({ jsonrpc: "2.0", id, method: "sasha-test/run", params: { port: sink.port } });
  const answer = await waitFor(`the ${label} app's route results`, async () =>
    (await fromProxy()).find((record) => record.data?.id === id && "result" in record.data), 30_000)
    .catch(async (error) => {
      await page.screenshot({ path: path.join(artifacts, `realms-${label}-stuck.png`), fullPage: true });
      const seen = (await fromProxy()).map((record) => record.data?.method ?? record.data?.id);
      throw new Error(`${error.message}; the proxy relayed ${JSON.stringify(seen)}`);
    });
  await page.screenshot({ path: path.join(artifacts, `realms-${label}.png`), fullPage: true });
  return answer.data.result;
}

async function run() {
  const context = await browser.newContext({ viewport: { width: 1000, height: 1400 } });
  const page = await context.newPage();
  page.on("console", (message) => {
    if (process.env.BROWSER_CONSOLE) {
      console.log(`  [console ${message.type()}] ${message.text()}`);
    }
  });
  const requests = [];
  context.on("request", (request) => {
    if (request.url().startsWith(sink.url)) {
      requests.push(`${request.method()} ${request.url()}`);
    }
  });

  // --- With the lockdown: every route refused, the sink hears nothing -------
  const before = sink.tally();
  const { results, childWindows } = await runRoutes(page, locked, "locked");
  await page.waitForTimeout(SETTLE_MS);
  const after = sink.tally();
  for (const result of results) {
    console.log(`  ${result.outcome}: ${result.name} (${result.detail})`);
  }
  measured.routes = results.length;
  measured.refused = results.filter((result) => result.outcome === "refused").length;
  measured.absent = results.filter((result) => result.outcome === "absent").map((result) => result.name);
  checks.ok(results.length >= 15, `at least 15 distinct routes were tried (${results.length})`);
  for (const result of results) {
    checks.ok(result.outcome === "refused" || result.outcome === "absent",
      `locked: ${result.name} is refused (${result.detail})`, result);
    checks.equal(result.realms, [], `locked: ${result.name} made no second realm`);
  }
  const rtc = results.find((result) => result.name === "own window: new RTCPeerConnection");
  checks.ok(/^TypeError: /.test(rtc.detail), `new RTCPeerConnection() is a clear TypeError (${rtc.detail})`);
  checks.equal(childWindows, 0, "locked: the app's window has no child window at all");
  checks.equal(after.datagrams - before.datagrams, 0, "locked: no UDP datagram reached the sink");
  checks.equal(after.connections - before.connections, 0, "locked: no TCP connection reached the sink, not even a bare one");
  checks.equal(after.bytes - before.bytes, 0, "locked: no byte reached the sink");
  checks.equal(after.requests - before.requests, 0, "locked: no HTTP request reached the sink");
  checks.equal(requests, [], "locked: the browser issued no request to the sink");
  measured.locked = { datagrams: after.datagrams - before.datagrams, connections: after.connections - before.connections };

  // --- Without it: the same app reaches the sink -----------------------------
  const control = await runRoutes(page, unlocked, "unlocked");
  await page.waitForTimeout(SETTLE_MS);
  const end = sink.tally();
  const escaped = control.results.filter((result) => result.outcome === "escaped").map((result) => result.name);
  console.log(`  without the lockdown ${escaped.length} route(s) escaped: ${escaped.join("; ")}`);
  measured.unlocked = {
    escaped: escaped.length,
    datagrams: end.datagrams - after.datagrams,
    connections: end.connections - after.connections,
    requests: end.requests - after.requests,
  };
  checks.ok(escaped.includes("own window: new RTCPeerConnection"), "unlocked: the app's own RTCPeerConnection works", control.results);
  checks.ok(escaped.some((name) => name !== "own window: new RTCPeerConnection" && !name.startsWith("own window")),
    "unlocked: a second realm brings its own RTCPeerConnection", escaped);
  checks.ok(end.datagrams - after.datagrams > 0, `unlocked: the sink recorded ${end.datagrams - after.datagrams} UDP datagram(s), so the locked run's zero is meaningful`);
  await context.close();
}
