// Interop with the real `@modelcontextprotocol/ext-apps` SDK in Chromium, for
// one SDK version (the npm alias in SDK: `ext-apps-1` = 1.7.5, `ext-apps-2` =
// the latest 2.x; both pinned by tests/browser/package-lock.json).
//
//  1. Our facade under the SDK's host: a test host page (http://127.0.0.1)
//     uses the SDK's `AppBridge` + `PostMessageTransport` to frame an
//     assembled Sasha resource (cross-origin, http://localhost). The bridge's
//     `oninitialized` fires, the host context reaches `Sasha.hostContext`, and
//     a facade call (`Sasha.data.list`) arrives at `oncalltool` and returns.
//  2. The SDK's `App` under our host: the test Studio page
//     (http://localhost:<port>) imports studio-core/web/host.js (and the vocabulary.js it imports) and runs
//     `createHost` against a fake `/mcp`, through the real edge-sandbox proxy;
//     the view is the SDK's `App` bundled by esbuild. `app.connect()` resolves,
//     `getHostContext()` carries our theme/platform, and `callServerTool`
//     reaches the fake /mcp and returns (and a model-only tool is refused).
//
// Pages are bundled at test time into a temporary folder, never the repo.
//
// Environment (set by tests/chromium/interop.rs): CHROMIUM, SDK, HELLO_HTML,
// EXPENSE_HTML (assembled resources), SANDBOX_ORIGIN. Handshake: prints
// `HARNESS {"studioPort": n}` and waits for one stdin line once edge-sandbox
// runs with that Studio origin.

import fs from "node:fs";
import http from "node:http";
import os from "node:os";
import path from "node:path";
import { fileURLToPath } from "node:url";

import * as esbuild from "esbuild";

import { Checks, env, handshake, launchChromium, waitFor } from "./harness.mjs";

const HERE = path.dirname(fileURLToPath(import.meta.url));
const ROOT = path.resolve(HERE, "../..");
const SDK = env("SDK");
const SANDBOX = env("SANDBOX_ORIGIN");
const started = Date.now();
const checks = new Checks();

const sdkVersion = JSON.parse(fs.readFileSync(path.join(HERE, "node_modules", SDK, "package.json"), "utf8")).version;
console.log(`SDK ${SDK} = @modelcontextprotocol/ext-apps@${sdkVersion}`);

// ---------------------------------------------------------------------------
// Bundles (esbuild, IIFE) into a temporary folder.

const tmp = fs.mkdtempSync(path.join(os.tmpdir(), "sasha-interop-"));

async function bundle(name, contents) {
  const outfile = path.join(tmp, `${name}.js`);
  await esbuild.build({
    stdin: { contents, resolveDir: HERE, loader: "js" },
    bundle: true,
    format: "iife",
    platform: "browser",
    target: "es2020",
    outfile,
    logLevel: "error",
  });
  return fs.readFileSync(outfile, "utf8");
}

const hostBundle = await bundle(
  "sdk-host",
  `import { AppBridge, PostMessageTransport } from "${SDK}/app-bridge";
   window.SDK = { AppBridge, PostMessageTransport };`,
);
const viewBundle = await bundle(
  "sdk-view",
  `import { App } from "${SDK}";
   const probe = (window.interop = { connected: false, error: null, app: null });
   const app = new App({ name: "sdk-view", version: "1.0.0" }, {});
   probe.app = app;
   app.connect().then(
     () => { probe.connected = true; },
     (error) => { probe.error = String(error && error.stack || error); },
   );`,
);
const viewHtml = `<!doctype html><html><head><meta charset="utf-8"><title>SDK view</title></head>
<body><p>SDK App view</p><script>${viewBundle.replace(/<\/script/gi, "<\\/script")}</script></body></html>`;

// ---------------------------------------------------------------------------
// Servers: the test pages (one server, reached as 127.0.0.1 and as localhost).

const APP_ID = "sdk-view";
const APP_TOOL = "app__sdk_view__greet";
const MODEL_TOOL = "app__sdk_view__secret";
const mcpRequests = [];

const pages = {
  "/sdk-host.js": ["text/javascript", hostBundle],
  "/bridge-host.html": ["text/html", `<!doctype html><meta charset="utf-8"><title>SDK host</title><script src="/sdk-host.js"></script><body></body>`],
  "/apps/hello.html": ["text/html", fs.readFileSync(env("HELLO_HTML"))],
  "/apps/expense-log.html": ["text/html", fs.readFileSync(env("EXPENSE_HTML"))],
  "/host.js": ["text/javascript", fs.readFileSync(path.join(ROOT, "studio-core/web/host.js"))],
  "/vocabulary.js": ["text/javascript", fs.readFileSync(path.join(ROOT, "studio-core/web/vocabulary.js"))],
  "/studio.html": ["text/html", `<!doctype html><meta charset="utf-8"><title>Studio</title><body><div id="apps"></div></body>`],
};

function answerMcp(request, response) {
  let body = "";
  request.on("data", (chunk) => {
    body += chunk;
  });
  request.on("end", () => {
    const message = JSON.parse(body);
    mcpRequests.push({ method: message.method, app: request.headers["sasha-app"], name: request.headers["mcp-name"], params: message.params });
    let result;
    if (message.method === "tools/list") {
      result = {
        tools: [
          { name: APP_TOOL, inputSchema: { type: "object" }, _meta: { ui: { visibility: ["app"] } } },
          { name: MODEL_TOOL, inputSchema: { type: "object" }, _meta: { ui: { visibility: ["model"] } } },
        ],
      };
    } else if (message.method === "tools/call" && message.params.name === APP_TOOL) {
      result = {
        content: [{ type: "text", text: `hello ${message.params.arguments.who}` }],
        structuredContent: { greeting: `hello ${message.params.arguments.who}` },
      };
    } else {
      response.writeHead(200, { "content-type": "application/json" });
      response.end(JSON.stringify({ jsonrpc: "2.0", id: message.id, error: { code: -32601, message: "unknown" } }));
      return;
    }
    response.writeHead(200, { "content-type": "application/json" });
    response.end(JSON.stringify({ jsonrpc: "2.0", id: message.id, result }));
  });
}

const server = http.createServer((request, response) => {
  const url = new URL(request.url, "http://x");
  if (url.pathname === "/mcp" && request.method === "POST") {
    answerMcp(request, response);
    return;
  }
  const page = pages[url.pathname];
  if (!page) {
    response.writeHead(404).end();
    return;
  }
  response.writeHead(200, { "content-type": `${page[0]}; charset=utf-8`, "cache-control": "no-store" });
  response.end(page[1]);
});
const port = await new Promise((resolve, reject) => {
  server.once("error", reject);
  server.listen(0, "127.0.0.1", () => resolve(server.address().port));
});

await handshake({ studioPort: port });

const browser = await launchChromium();
try {
  await facadeUnderSdkBridge("hello", false);
  await facadeUnderSdkBridge("expense-log", true);
  await sdkAppUnderOurHost();
} finally {
  await browser.close();
  server.close();
  fs.rmSync(tmp, { recursive: true, force: true });
}
console.log(`${SDK} (${sdkVersion}): ${checks.passed} checks passed in ${((Date.now() - started) / 1000).toFixed(1)} s`);

// ---------------------------------------------------------------------------

async function newPage(label) {
  const context = await browser.newContext({ colorScheme: "dark" });
  const page = await context.newPage();
  page.setDefaultTimeout(10_000);
  page.on("console", (message) => {
    if (process.env.BROWSER_CONSOLE) {
      console.log(`  [${label} console ${message.type()}] ${message.text()}`);
    }
  });
  page.on("pageerror", (error) => console.log(`  [${label} page error] ${error.message}`));
  return page;
}

/** Scenario 1: the assembled Sasha resource under the SDK's AppBridge. */
async function facadeUnderSdkBridge(appName, callData) {
  const label = `${SDK} bridge/${appName}`;
  const page = await newPage(label);
  await page.goto(`http://127.0.0.1:${port}/bridge-host.html`);
  const appUrl = `http://localhost:${port}/apps/${appName}.html`;
  await page.evaluate(async (src) => {
    const log = (window.interop = { initialized: false, calls: [], errors: [] });
    const iframe = document.createElement("iframe");
    iframe.setAttribute("sandbox", "allow-scripts allow-same-origin allow-forms");
    iframe.style.width = "600px";
    iframe.style.height = "400px";
    document.body.append(iframe);
    const bridge = new window.SDK.AppBridge(
      null,
      { name: "interop-sdk-host", version: "1.0.0" },
      { openLinks: {}, serverTools: {}, logging: {} },
      {
        hostContext: {
          theme: "dark",
          platform: "desktop",
          locale: "fr-FR",
          displayMode: "inline",
          styles: { variables: { "--color-background-primary": "#123456" } },
        },
      },
    );
    bridge.oninitialized = () => {
      log.initialized = true;
    };
    bridge.oncalltool = async (params) => {
      log.calls.push(params);
      return {
        content: [{ type: "text", text: "1 row" }],
        structuredContent: { rows: [{ id: 7, note: "from the SDK bridge" }], nextCursor: null },
      };
    };
    bridge.onerror = (error) => log.errors.push(String(error));
    window.bridge = bridge;
    await bridge.connect(new window.SDK.PostMessageTransport(iframe.contentWindow, iframe.contentWindow));
    iframe.src = src;
  }, appUrl);

  await waitFor(`${label}: AppBridge.oninitialized`, () => page.evaluate(() => window.interop.initialized));
  checks.ok(true, `${label}: our facade's ui/initialize + initialized completes with the SDK AppBridge (oninitialized fired)`);
  const appVersion = await page.evaluate(() => window.bridge.getAppVersion());
  checks.equal(appVersion && appVersion.name, appName, `${label}: the bridge sees our appInfo`);

  const frame = await waitFor(`${label}: the app frame`, async () => page.frames().find((f) => f.url() === appUrl));
  await waitFor(`${label}: Sasha.connected`, () => frame.evaluate(() => window.Sasha && window.Sasha.connected));
  const context = await frame.evaluate(() => window.Sasha.hostContext);
  checks.equal(
    { theme: context.theme, platform: context.platform, locale: context.locale, bg: context.styles && context.styles.variables["--color-background-primary"] },
    { theme: "dark", platform: "desktop", locale: "fr-FR", bg: "#123456" },
    `${label}: the SDK host context reaches Sasha.hostContext`,
  );
  const capabilities = await frame.evaluate(() => window.Sasha.capabilities);
  checks.ok(capabilities && capabilities.serverTools !== undefined, `${label}: the SDK host capabilities reach Sasha.capabilities`, capabilities);

  if (callData) {
    const result = await frame.evaluate(() =>
      window.Sasha.data.list("expenses", { limit: 5 }).then(
        (value) => ({ value }),
        (error) => ({ error: { message: error.message, code: error.code } }),
      ),
    );
    // The app's own UI calls its tools too (category totals on load); ours is
    // the one list call with our arguments.
    const calls = (await page.evaluate(() => window.interop.calls)).filter((call) => call.name.endsWith("__list"));
    checks.equal(calls.map((call) => call.name), ["app__expense_log__expenses__list"], `${label}: Sasha.data.list arrives at the SDK bridge's oncalltool with the table tool's name`);
    checks.equal(calls[0].arguments, { limit: 5 }, `${label}: with its arguments`);
    checks.equal(result, { value: { rows: [{ id: 7, note: "from the SDK bridge" }], nextCursor: null } }, `${label}: the bridge's result comes back to the facade's promise`);
  }
  const errors = await page.evaluate(() => window.interop.errors);
  checks.equal(errors, [], `${label}: the SDK bridge reported no protocol errors`);
  await page.context().close();
}

/** Scenario 2: the SDK's App as the view of our host, through the real proxy. */
async function sdkAppUnderOurHost() {
  const label = `${SDK} App/studio-host`;
  const page = await newPage(label);
  await page.goto(`http://localhost:${port}/studio.html`);
  await page.evaluate(
    async ({ sandboxOrigin, html, appId }) => {
      const { createHost } = await import("/host.js");
      const log = (window.interop = { states: [], errors: [] });
      const host = createHost({
        iframeParent: document.getElementById("apps"),
        sandboxOrigin,
        app: { id: appId, revision: "1", name: "SDK view" },
        resource: { mimeType: "text/html;profile=mcp-app", text: html },
        onStateChange: (state) => log.states.push(state),
        onError: (envelope) => log.errors.push(envelope),
      });
      window.host = host;
      host.ready.then(
        () => {
          log.ready = true;
        },
        (error) => {
          log.readyError = String(error && error.message);
        },
      );
    },
    { sandboxOrigin: SANDBOX, html: viewHtml, appId: APP_ID },
  );

  await waitFor(`${label}: host ready`, () => page.evaluate(() => window.interop.ready || window.interop.readyError), 20_000);
  const hostLog = await page.evaluate(() => window.interop);
  checks.ok(hostLog.ready === true, `${label}: our host's ready resolves (the SDK App sent initialized)`, hostLog);

  const view = await waitFor(`${label}: the SDK view frame`, async () => {
    for (const frame of page.frames()) {
      if (frame.url().startsWith("data:") && (await frame.evaluate(() => Boolean(window.interop)).catch(() => false))) {
        return frame;
      }
    }
    return null;
  });
  await waitFor(`${label}: app.connect() settles`, () => view.evaluate(() => window.interop.connected || window.interop.error));
  const probe = await view.evaluate(() => ({ connected: window.interop.connected, error: window.interop.error }));
  checks.equal(probe, { connected: true, error: null }, `${label}: app.connect() resolves`);

  const context = await view.evaluate(() => window.interop.app.getHostContext());
  checks.equal(
    { theme: context.theme, platform: context.platform, displayMode: context.displayMode, maxHeight: context.containerDimensions && context.containerDimensions.maxHeight },
    { theme: "dark", platform: "web", displayMode: "inline", maxHeight: 1200 },
    `${label}: app.getHostContext() carries our theme and platform`,
  );
  const hostInfo = await view.evaluate(() => ({ host: window.interop.app.getHostVersion(), caps: window.interop.app.getHostCapabilities() }));
  checks.ok(hostInfo.host && hostInfo.host.name === "Sasha Studio" && hostInfo.caps && hostInfo.caps.serverTools, `${label}: the SDK App sees our hostInfo and serverTools capability`, hostInfo);

  const result = await view.evaluate(
    (name) =>
      window.interop.app.callServerTool({ name, arguments: { who: "sdk" } }).then(
        (value) => ({ value }),
        (error) => ({ error: String(error && error.message) }),
      ),
    APP_TOOL,
  );
  checks.equal(result.value && result.value.structuredContent, { greeting: "hello sdk" }, `${label}: app.callServerTool returns the fake /mcp result`);
  const calls = mcpRequests.filter((request) => request.method === "tools/call");
  checks.equal(calls.map((call) => [call.name, call.app, call.params.name, call.params.arguments]), [[APP_TOOL, APP_ID, APP_TOOL, { who: "sdk" }]], `${label}: the call reached /mcp once, for this app`);

  const refused = await view.evaluate(
    (name) =>
      window.interop.app.callServerTool({ name, arguments: {} }).then(
        (value) => ({ value }),
        (error) => ({ error: String(error && error.message) }),
      ),
    MODEL_TOOL,
  );
  checks.ok(refused.error !== undefined || (refused.value && refused.value.isError === true), `${label}: a model-only tool is refused to the SDK App`, refused);
  checks.equal(mcpRequests.filter((request) => request.method === "tools/call").length, 1, `${label}: the refused call never reached /mcp`);
  await page.context().close();
}
