// What the realm lockdown costs an app in Chromium, for benches/runtime.rs
// (never run by the test command): the same assembled resource with and
// without the lockdown, loaded as a top-level page from a loopback server in
// alternating runs, and the time one HTML sink assignment takes in each (the
// lockdown's Trusted Types policy checks every string).
//
// It also times the lockdown script alone, run in a blank page, which is what
// it adds to every app's start without the noise of a whole page load.
//
// Environment (set by the bench): CHROMIUM, LOCKED_HTML, UNLOCKED_HTML,
// LOCKDOWN_JS, RUNS.
// Prints one `RESULT {json}` line.

import fs from "node:fs";
import http from "node:http";

import { env, launchChromium } from "./harness.mjs";

const pages = {
  "/locked": fs.readFileSync(env("LOCKED_HTML")),
  "/unlocked": fs.readFileSync(env("UNLOCKED_HTML")),
};
const lockdown = fs.readFileSync(env("LOCKDOWN_JS"), "utf8");
const RUNS = Number(process.env.RUNS || 30);
const SINK_ROWS = 2_000;

const server = http.createServer((request, response) => {
  const page = pages[request.url];
  response.writeHead(page ? 200 : 404, { "content-type": "text/html; charset=utf-8", "cache-control": "no-store" });
  response.end(page || "");
});
await new Promise((resolve) => server.listen(0, "127.0.0.1", resolve));
const origin = `http://127.0.0.1:${server.address().port}`;

const median = (values) => {
  const sorted = [...values].sort((a, b) => a - b);
  return sorted[Math.floor(sorted.length / 2)];
};

const browser = await launchChromium();
const lockdownRuns = [];
const samples = { locked: { dcl: [], sink: [] }, unlocked: { dcl: [], sink: [] } };
try {
  const context = await browser.newContext();
  for (let run = 0; run < RUNS; run++) {
    for (const variant of run % 2 ? ["unlocked", "locked"] : ["locked", "unlocked"]) {
      const page = await context.newPage();
      await page.goto(`${origin}/${variant}`, { waitUntil: "load" });
      const timing = await page.evaluate((rows) => {
        const navigation = performance.getEntriesByType("navigation")[0];
        const table = document.createElement("tbody");
        const started = performance.now();
        for (let i = 0; i < rows; i++) {
          table.innerHTML = `<tr><td>2026-12-0${i % 7 + 1}</td><td>Apollo</td><td>${i}.25</td></tr>`;
        }
        return {
          dcl: navigation.domContentLoadedEventEnd - navigation.responseEnd,
          sink: ((performance.now() - started) * 1000) / rows,
        };
      }, SINK_ROWS);
      if (variant === "locked") {
        const blank = await context.newPage();
        lockdownRuns.push(await blank.evaluate((source) => {
          const started = performance.now();
          (0, eval)(source);
          return performance.now() - started;
        }, lockdown));
        await blank.close();
      }
      samples[variant].dcl.push(timing.dcl);
      samples[variant].sink.push(timing.sink);
      await page.close();
    }
  }
} finally {
  await browser.close();
  server.close();
}
const result = {};
for (const [variant, values] of Object.entries(samples)) {
  result[variant] = { parseToDomContentLoadedMs: median(values.dcl), innerHTMLMicroseconds: median(values.sink) };
}
console.log(`RESULT ${JSON.stringify({ runs: RUNS, lockdownRunMs: median(lockdownRuns), ...result })}`);
