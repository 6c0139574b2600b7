// The browser-test harness: the servers a scenario needs, the handshake with
// the Rust test that owns the Sasha processes, Chromium through playwright-core,
// and small assertion helpers.
//
// The Rust test starts this script, reads one `HARNESS {json}` line with the
// ports the test's servers bound, starts the real Sasha processes configured
// with them, and answers with one JSON line (their addresses) on stdin.

import dgram from "node:dgram";
import fs from "node:fs";
import http from "node:http";
import path from "node:path";
import readline from "node:readline";
import { fileURLToPath } from "node:url";

import { chromium } from "playwright-core";

const HERE = path.dirname(fileURLToPath(import.meta.url));

/** A required environment variable. */
export function env(name) {
  const value = process.env[name];
  if (!value) {
    throw new Error(`${name} is not set (the Rust test sets it)`);
  }
  return value;
}

function listen(server) {
  return new Promise((resolve, reject) => {
    server.once("error", reject);
    server.listen(0, "127.0.0.1", () => resolve(server.address().port));
  });
}

/**
 * The test Studio: static pages from `host/`, served on loopback and reached
 * by the browser as `http://localhost:<port>` (the configured Studio origin).
 */
export async function startStudio() {
  const pages = new Map([
    ["/studio.html", fs.readFileSync(path.join(HERE, "host/studio.html"))],
    ["/spoofer.html", fs.readFileSync(path.join(HERE, "host/spoofer.html"))],
  ]);
  const server = http.createServer((request, response) => {
    const page = pages.get(new URL(request.url, "http://x").pathname);
    if (!page) {
      response.writeHead(404).end();
      return;
    }
    response.writeHead(200, { "content-type": "text/html; charset=utf-8", "cache-control": "no-store" });
    response.end(page);
  });
  const port = await listen(server);
  return { server, port };
}

/**
 * The sink: a loopback server that records every connection, every byte it
 * receives and every request (and WebSocket upgrade). An isolated app must
 * never reach it.
 */
export async function startSink() {
  const hits = [];
  let connections = 0;
  let bytes = 0;
  const server = http.createServer((request, response) => {
    hits.push(`${request.method} ${request.url}`);
    response.writeHead(204, { "access-control-allow-origin": "*" }).end();
  });
  server.on("connection", (socket) => {
    connections += 1;
    socket.on("data", (chunk) => {
      bytes += chunk.length;
    });
  });
  server.on("upgrade", (request, socket) => {
    hits.push(`UPGRADE ${request.url}`);
    socket.destroy();
  });
  const port = await listen(server);
  return {
    server,
    url: `http://127.0.0.1:${port}`,
    hits,
    connections: () => connections,
    bytes: () => bytes,
  };
}

/**
 * The sink on TCP and UDP at once, on one port: the HTTP sink above plus a UDP
 * socket bound to the same port number, recording every datagram (a STUN or
 * TURN packet carries whatever the app put in a hostname or username).
 */
export async function startDualSink() {
  for (let attempt = 0; ; attempt++) {
    const tcp = await startSink();
    const port = tcp.server.address().port;
    const udp = dgram.createSocket("udp4");
    const datagrams = [];
    udp.on("message", (message, from) => datagrams.push({ bytes: message.length, from: `${from.address}:${from.port}` }));
    const bound = await new Promise((resolve) => {
      udp.once("error", () => resolve(false));
      udp.bind(port, "127.0.0.1", () => resolve(true));
    });
    if (bound) {
      return {
        ...tcp,
        port,
        datagrams,
        close() {
          tcp.server.close();
          tcp.server.closeAllConnections?.();
          udp.close();
        },
        /** Everything recorded so far, to compare before and after a phase. */
        tally: () => ({ connections: tcp.connections(), bytes: tcp.bytes(), requests: tcp.hits.length, datagrams: datagrams.length }),
      };
    }
    tcp.server.close();
    udp.close();
    if (attempt >= 20) {
      throw new Error("no port was free for both TCP and UDP");
    }
  }
}

/** Tells the Rust test what was bound and waits for its one-line answer. */
export async function handshake(info) {
  process.stdout.write(`HARNESS ${JSON.stringify(info)}\n`);
  const lines = readline.createInterface({ input: process.stdin });
  for await (const line of lines) {
    lines.close();
    return JSON.parse(line);
  }
  throw new Error("stdin closed before the Rust test answered the handshake");
}

/**
 * Debian's Chromium (never a downloaded browser), headless. Chromium's own
 * OS-level sandbox cannot start as root, so only then it runs with
 * `--no-sandbox`; the web platform's isolation under test (origins, iframe
 * sandbox flags, CSP) is enforced the same either way. `args` are more
 * command-line switches.
 */
export async function launchChromium(args = []) {
  const asRoot = typeof process.getuid === "function" && process.getuid() === 0;
  return chromium.launch({
    executablePath: env("CHROMIUM"),
    headless: true,
    chromiumSandbox: !asRoot,
    timeout: 30_000,
    args,
  });
}

/**
 * Runs a browser test's `run`, closes `browser` whatever happens, then prints
 * the screenshots taken (the Rust side reads these lines).
 */
export async function runAndClose(browser, run, screenshots) {
  try {
    await run();
  } finally {
    await browser.close();
  }
  for (const file of screenshots) {
    console.log(`screenshot ${file}`);
  }
}

/** Polls `probe` until it returns a truthy value; fails naming `what`. */
export async function waitFor(what, probe, timeoutMs = 10_000) {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const value = await probe();
    if (value) {
      return value;
    }
    if (Date.now() > deadline) {
      throw new Error(`timed out after ${timeoutMs} ms waiting for ${what}`);
    }
    await new Promise((resolve) => setTimeout(resolve, 25));
  }
}

/** Named assertions, counted for the final line the Rust test looks for. */
export class Checks {
  constructor() {
    this.passed = 0;
  }

  ok(condition, message, detail) {
    if (!condition) {
      const extra = detail === undefined ? "" : `\n${typeof detail === "string" ? detail : JSON.stringify(detail, null, 2)}`;
      throw new Error(`check failed: ${message}${extra}`);
    }
    this.passed += 1;
    console.log(`ok - ${message}`);
  }

  equal(actual, expected, message) {
    const same = JSON.stringify(actual) === JSON.stringify(expected);
    this.ok(same, message, same ? undefined : { actual, expected });
  }
}
