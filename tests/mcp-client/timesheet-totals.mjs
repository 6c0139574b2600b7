// Time Sheet Entry's model-visible action through the official MCP TypeScript
// SDK client, as an assistant would call it: a bearer token, no app binding.
// Lists the tools (the aggregate is offered, the app-only log-hours action is
// not), calls app__time_sheet_entry__weekly_project_totals for WEEK_START, and
// prints `TOTALS {json}` with its groups for the Rust test to compare with the
// totals the app's own UI showed.

import assert from 'node:assert/strict';

import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';

import { check, done, input } from './harness.mjs';

const MCP_URL = new URL(input('MCP_URL'));
const TOKEN = input('TOKEN');
const WEEK_START = input('WEEK_START');
const TOTALS = 'app__time_sheet_entry__weekly_project_totals';

const client = new Client({ name: 'sasha-timesheet-totals', version: '1.0.0' }, { capabilities: {} });
await client.connect(
  new StreamableHTTPClientTransport(MCP_URL, { requestInit: { headers: { Authorization: `Bearer ${TOKEN}` } } }),
);

await check('the model sees weekly-project-totals and not the app-only log-hours action', async () => {
  const { tools } = await client.listTools();
  const names = tools.map((tool) => tool.name);
  assert.ok(names.includes(TOTALS), JSON.stringify(names));
  assert.ok(!names.includes('app__time_sheet_entry__log_hours'), JSON.stringify(names));
  const tool = tools.find((candidate) => candidate.name === TOTALS);
  assert.equal(tool.annotations?.readOnlyHint, true, 'the aggregate is read-only');
});

let groups = null;
await check(`${TOTALS} answers the week of ${WEEK_START}`, async () => {
  const result = await client.callTool({ name: TOTALS, arguments: { weekStart: WEEK_START } });
  assert.notEqual(result.isError, true, JSON.stringify(result));
  assert.ok(Array.isArray(result.structuredContent?.groups), JSON.stringify(result));
  groups = result.structuredContent.groups;
});

await check('a malformed week start is refused with the error envelope', async () => {
  const result = await client.callTool({ name: TOTALS, arguments: { weekStart: 'next monday' } });
  assert.equal(result.isError, true, JSON.stringify(result));
  assert.equal(result.structuredContent?.error?.code, 'APP_INPUT_INVALID', JSON.stringify(result));
});

console.log(`TOTALS ${JSON.stringify(groups)}`);
await client.close();
done();
