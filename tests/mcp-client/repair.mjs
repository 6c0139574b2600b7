// The authoring loop with the official MCP TypeScript SDK client: a staff
// member's connection (apps:invoke + apps:write) repairs an app whose app.js
// was broken after it had validated: list (status not ok, diagnostics) → read →
// edit → check (ok) → the opener is back in tools/list.
//
// Run by tests/process/mcp_sdk.rs against real processes. Inputs (environment):
//   MCP_URL        the gateway's /mcp endpoint
//   WRITER_TOKEN   staff, chat:use + apps:invoke + apps:write
//   APP            the broken app's id
//   BROKEN         the exact broken text in app.js
//   REPAIRED       the text that repairs it
//
// Prints one `ok - …` line per passed check; exits 1 at the first failure.

import assert from 'node:assert/strict';

import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';

import { check, done, input } from './harness.mjs';

const MCP_URL = new URL(input('MCP_URL'));
const WRITER_TOKEN = input('WRITER_TOKEN');
const APP = input('APP');
const BROKEN = input('BROKEN');
const REPAIRED = input('REPAIRED');
const OPENER = `open_app__${APP.replaceAll('-', '_')}`;

const client = new Client({ name: 'sasha-repair', version: '1.0.0' });
await client.connect(
  new StreamableHTTPClientTransport(MCP_URL, {
    requestInit: { headers: { Authorization: `Bearer ${WRITER_TOKEN}` } },
  }),
);

/** Calls a source tool that must succeed; returns its structuredContent and text. */
async function call(name, args) {
  const result = await client.callTool({ name, arguments: args });
  assert.notEqual(result.isError, true, `${name}: ${JSON.stringify(result)}`);
  return { value: result.structuredContent, text: result.content[0].text };
}

async function toolNames() {
  return (await client.listTools()).tools.map((tool) => tool.name);
}

let version;

await check('the six source tools and getDocs are listed for a writer', async () => {
  const names = await toolNames();
  for (const name of ['listAppFiles', 'readAppFile', 'writeAppFile', 'editAppFile', 'deleteAppFile', 'checkApp', 'getDocs']) {
    assert.ok(names.includes(name), `${name} missing`);
  }
});

await check('listAppFiles reports the broken package with a diagnostic for app.js', async () => {
  const { value, text } = await call('listAppFiles', { app: APP });
  assert.equal(value.app, APP);
  assert.equal(value.status.ok, false);
  assert.ok(value.status.diagnostics.some((d) => d.file === 'app.js'), JSON.stringify(value.status));
  const appJs = value.files.find((file) => file.path === 'app.js');
  assert.match(appJs.version, /^[0-9a-f]{64}$/);
  assert.equal(appJs.editable, true);
  assert.match(text, /does not validate/);
});

await check('the broken app has no opener', async () => {
  assert.ok(!(await toolNames()).includes(OPENER));
});

await check('readAppFile returns the broken text and its version', async () => {
  const { value } = await call('readAppFile', { app: APP, path: 'app.js' });
  assert.ok(value.content.includes(BROKEN));
  version = value.version;
});

await check('editAppFile repairs it and the status is ok', async () => {
  const { value, text } = await call('editAppFile', {
    app: APP,
    path: 'app.js',
    oldString: BROKEN,
    newString: REPAIRED,
    expectedVersion: version,
  });
  assert.equal(value.status.ok, true, JSON.stringify(value.status));
  assert.notEqual(value.version, version);
  assert.match(text, /The app validates/);
});

await check('checkApp confirms the live revision', async () => {
  const { value } = await call('checkApp', { app: APP });
  assert.equal(value.status.ok, true);
  assert.match(value.status.revision, /^[0-9a-f]{64}$/);
});

await check('the opener is back in tools/list', async () => {
  assert.ok((await toolNames()).includes(OPENER));
});

await check('a stale version is a conflict that says to read again', async () => {
  const result = await client.callTool({
    name: 'writeAppFile',
    arguments: { app: APP, path: 'app.js', content: '// stale', expectedVersion: version },
  });
  assert.equal(result.isError, true);
  assert.equal(result.structuredContent.error.code, 'APP_CONFLICT');
});

await client.close();
done();
