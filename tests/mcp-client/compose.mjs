// The compose stack through the official MCP TypeScript SDK client
// (deploy/test-compose.sh): a token minted with `sasha admin token mint`
// lists and calls tools through the nginx proxy; its writes, with the
// operator's consent to write the app as a script, need no confirmation
// although the SDK names each tool only in the body; then 8 clients make keyed
// writes while one of three gateway containers is SIGKILLed. Every write is
// acknowledged exactly once (its idempotency key retried after a transport
// error or a retryable envelope, never after a refusal), and the list tool
// returns each acknowledged row once. Last, the data-worker that owns the app
// is killed: the other takes the app over from the replica, and serves every
// acknowledged row and the next write.
//
// Inputs (environment): MCP_URL (https://studio.localhost:PORT/mcp), PROXY_CA
// (the proxy's certificate), TOKEN (apps:invoke, consented to write
// time-sheet-entry), KILL_COMMAND (run once a third of the writes are
// acknowledged).

import assert from 'node:assert/strict';
import { execSync } from 'node:child_process';
import fs from 'node:fs';
import https from 'node:https';
import { Readable } from 'node:stream';

import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import { ElicitRequestSchema } from '@modelcontextprotocol/sdk/types.js';

import { check, done, input } from './harness.mjs';

const MCP_URL = new URL(input('MCP_URL'));
const CA = fs.readFileSync(input('PROXY_CA'));
const TOKEN = input('TOKEN');
const KILL_COMMAND = input('KILL_COMMAND');
const FAILOVER_COMMAND = input('FAILOVER_COMMAND');
/** A lease (10 s), a renewal and the restore, with room for a loaded machine. */
const FAILOVER_WITHIN_MS = 120_000;
const PREFIX = 'app__time_sheet_entry__';
const WRITERS = 8;
const WRITES = 240;
/** Attempts of one write before the test gives up on it. */
const ATTEMPTS = 40;

/**
 * The SDK's fetch, over node:https: the proxy listens on loopback under a
 * hostname this machine's resolver does not know, so every name resolves to
 * 127.0.0.1; TLS is verified against the test's own certificate, with the
 * hostname as SNI. Responses stream (the SDK reads event streams).
 */
function loopbackFetch(url, init = {}) {
  return new Promise((resolve, reject) => {
    const target = new URL(url);
    const request = https.request(
      {
        host: target.hostname,
        port: target.port,
        path: `${target.pathname}${target.search}`,
        method: init.method ?? 'GET',
        headers: Object.fromEntries(new Headers(init.headers)),
        ca: CA,
        servername: target.hostname,
        lookup: (_host, options, callback) =>
          options.all ? callback(null, [{ address: '127.0.0.1', family: 4 }]) : callback(null, '127.0.0.1', 4),
        signal: init.signal,
      },
      (response) => {
        const headers = new Headers();
        for (const [name, value] of Object.entries(response.headers)) {
          for (const one of Array.isArray(value) ? value : [value]) {
            headers.append(name, one);
          }
        }
        const empty = [204, 304].includes(response.statusCode) || request.method === 'HEAD';
        resolve(
          new Response(empty ? null : Readable.toWeb(response), {
            status: response.statusCode,
            statusText: response.statusMessage,
            headers,
          }),
        );
      },
    );
    request.on('error', reject);
    request.end(init.body ?? undefined);
  });
}

/** Confirmations the server asked for: a script's token is asked none. */
let asked = 0;

/**
 * An SDK client with the token. It declares elicitation, and counts (and
 * accepts) any confirmation it is asked for, which a consented script's
 * writes must not need.
 */
async function connect() {
  const client = new Client({ name: 'sasha-compose-test', version: '1.0.0' }, { capabilities: { elicitation: {} } });
  client.setRequestHandler(ElicitRequestSchema, async () => {
    asked += 1;
    return { action: 'accept', content: { confirm: true } };
  });
  const transport = new StreamableHTTPClientTransport(MCP_URL, {
    fetch: loopbackFetch,
    requestInit: { headers: { Authorization: `Bearer ${TOKEN}` } },
  });
  await client.connect(transport);
  return client;
}

let client;
await check('the SDK client connects through the proxy with the minted token', async () => {
  client = await connect();
});

await check('tools/list offers the bundled apps\' tools', async () => {
  const { tools } = await client.listTools();
  const names = tools.map((tool) => tool.name);
  assert.ok(names.includes(`${PREFIX}projects__create`), `no projects__create in ${names.join(', ')}`);
});

await check('a tool call reads the app\'s rows', async () => {
  // A retryable answer is asked again, as the envelope tells a client to:
  // a gateway just scaled up opens its first connection to the app's
  // data-worker here, and under podman on a loaded host that connection has
  // stalled past the 10 s call deadline (APP_TIMEOUT, retryable).
  // A newly scaled gateway has answered retryably for more than 30 s in a
  // row here, so it is asked for up to about two minutes, 5 s apart.
  let result;
  const started = Date.now();
  for (let attempt = 1; attempt <= 12; attempt += 1) {
    result = await client.callTool({ name: `${PREFIX}projects__list`, arguments: {} });
    if (result.isError !== true || result.structuredContent?.error?.retryable !== true) {
      break;
    }
    console.log(`first read answered retryably (attempt ${attempt}): ${result.structuredContent.error.code}`);
    await new Promise((resolve) => setTimeout(resolve, 5_000));
  }
  console.log(`timing first-read ${((Date.now() - started) / 1000).toFixed(1)} s`);
  assert.notEqual(result.isError, true, JSON.stringify(result));
  assert.ok(Array.isArray(result.structuredContent?.rows), JSON.stringify(result));
});

const errors = { transport: 0, retryable: 0 };
let acknowledged = 0;
let killed = false;

/** One keyed write, retried with its key until acknowledged. */
async function write(state, n) {
  const args = { values: { name: `compose-${n}` }, idempotencyKey: `compose-write-${n}` };
  for (let attempt = 1; attempt <= ATTEMPTS; attempt += 1) {
    let result;
    try {
      state.client ??= await connect();
      result = await state.client.callTool({ name: `${PREFIX}projects__create`, arguments: args });
    } catch (error) {
      // The killed gateway's connection, nginx's 502 for it, or the 404 for
      // a session that died with it (the client must then initialize again,
      // as the MCP transport specifies): a new client, the same key. Any
      // other HTTP status is a failure.
      const status = error?.code;
      assert.ok(
        typeof status !== 'number' || status < 0 || [404, 502, 503, 504].includes(status),
        `write ${n}: ${error?.stack ?? error}`,
      );
      if (status === 404) {
        assert.match(String(error.message), /Session not found/, `write ${n}: ${error.message}`);
      }
      errors.transport += 1;
      state.client = null;
      // A real stack, so a real pause: nginx needs a moment to leave the
      // killed gateway out before the same key is sent again.
      await new Promise((resolve) => setTimeout(resolve, 100));
      continue;
    }
    if (result.isError) {
      const envelope = result.structuredContent?.error;
      assert.equal(envelope?.retryable, true, `write ${n} refused: ${JSON.stringify(result)}`);
      errors.retryable += 1;
      // Retryable means "not yet" (an app moving, a worker restoring): ask
      // again shortly, as a client should.
      await new Promise((resolve) => setTimeout(resolve, 100));
      continue;
    }
    assert.equal(result.structuredContent.name, `compose-${n}`);
    acknowledged += 1;
    if (!killed && acknowledged >= WRITES / 3) {
      killed = true;
      execSync(KILL_COMMAND, { stdio: 'inherit' });
    }
    return result.structuredContent.id;
  }
  throw new Error(`write ${n} was not acknowledged in ${ATTEMPTS} attempts`);
}

const ids = new Map();
await check(`${WRITERS} clients write ${WRITES} keyed rows while a gateway is killed`, async () => {
  await Promise.all(
    Array.from({ length: WRITERS }, async (_, writer) => {
      const state = { client: null };
      for (let n = writer; n < WRITES; n += WRITERS) {
        ids.set(n, await write(state, n));
      }
      await state.client?.close();
    }),
  );
  assert.ok(killed, 'the gateway was killed during the writes');
  assert.equal(ids.size, WRITES);
  assert.equal(new Set(ids.values()).size, WRITES, 'two writes answered with one row');
  assert.equal(asked, 0, 'the script token\'s writes asked for no confirmation');
  console.log(`writes ${WRITES}, transport errors ${errors.transport}, retryable envelopes ${errors.retryable}`);
});

/** Every `compose-` row the list tool returns, by name; retryable refusals are returned as `null`. */
async function listed() {
  const seen = new Map();
  let cursor;
  do {
    const result = await client.callTool({
      name: `${PREFIX}projects__list`,
      arguments: { limit: 100, ...(cursor ? { cursor } : {}) },
    });
    if (result.isError) {
      assert.equal(result.structuredContent?.error?.retryable, true, JSON.stringify(result));
      return null;
    }
    for (const row of result.structuredContent.rows) {
      if (row.name.startsWith('compose-')) {
        assert.ok(!seen.has(row.name), `${row.name} twice`);
        seen.set(row.name, row.id);
      }
    }
    cursor = result.structuredContent.nextCursor;
  } while (cursor);
  return seen;
}

await check('the list tool returns every acknowledged row once, and no other', async () => {
  await client.close();
  client = await connect();
  const seen = await listed();
  assert.ok(seen, 'the list was refused');
  assert.equal(seen.size, WRITES, `${seen.size} rows for ${WRITES} acknowledged writes`);
  for (const [n, id] of ids) {
    assert.equal(seen.get(`compose-${n}`), id, `write ${n}`);
  }
});

await check('after the data-worker holding the app is killed, its new owner serves every acknowledged row', async () => {
  execSync(FAILOVER_COMMAND, { stdio: 'inherit' });
  const killedAt = Date.now();
  const deadline = killedAt + FAILOVER_WITHIN_MS;
  let seen = null;
  let retryable = 0;
  while (seen === null) {
    assert.ok(Date.now() < deadline, `the app was not served again within ${FAILOVER_WITHIN_MS} ms`);
    seen = await listed();
    if (seen === null) {
      retryable += 1;
      // The new owner takes over within a lease and a restore (seconds):
      // polled twice a second until FAILOVER_WITHIN_MS.
      await new Promise((resolve) => setTimeout(resolve, 500));
    }
  }
  assert.equal(seen.size, WRITES, `${seen.size} rows after the failover`);
  for (const [n, id] of ids) {
    assert.equal(seen.get(`compose-${n}`), id, `write ${n} after the failover`);
  }
  const after = await write({ client }, WRITES);
  assert.ok(![...ids.values()].includes(after), 'the new owner writes a new row');
  console.log(`timing failover ${((Date.now() - killedAt) / 1000).toFixed(1)} s (${retryable} retryable answers before the new owner served)`);
});

await client.close();
done();
