// Table policies through the official MCP TypeScript SDK client (issue 26):
// Time Sheet Entry's `projects` is written by the app's managers only and its
// `entries` are read in full by managers. A member does not see the project
// tools that write, and calling one is refused; the member's aggregate over
// `entries` holds their own hours; the manager's holds everyone's. Then the
// declared rules: a date that is not a calendar day and negative hours are
// refused naming the field, a duplicate project name says it must be unique,
// and deleting a project that entries refer to says exactly that. A CSV of
// 10,000 entries imports in one call, one with a bad row imports nothing and
// names the row and field, and the export reads what a list would. Both
// clients confirm their writes (elicitation), so each refusal is the data
// service's own.

import assert from 'node:assert/strict';

import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import { ElicitRequestSchema } from '@modelcontextprotocol/sdk/types.js';

import { check, done, input } from './harness.mjs';

const MCP_URL = new URL(input('MCP_URL'));
const PROJECT_ID = Number(input('PROJECT_ID'));
const MEMBER_HOURS = Number(input('MEMBER_HOURS'));
const TEAM_HOURS = Number(input('TEAM_HOURS'));
const PREFIX = 'app__time_sheet_entry__';
const WRITES = ['projects__create', 'projects__update', 'projects__delete'].map((tool) => PREFIX + tool);

async function connect(token) {
  const client = new Client({ name: 'sasha-policies', version: '1.0.0' }, { capabilities: { elicitation: {} } });
  client.setRequestHandler(ElicitRequestSchema, async () => ({ action: 'accept', content: { confirm: true } }));
  await client.connect(
    new StreamableHTTPClientTransport(MCP_URL, { requestInit: { headers: { Authorization: `Bearer ${token}` } } }),
  );
  return client;
}

async function totalHours(client) {
  const result = await client.callTool({
    name: `${PREFIX}entries__aggregate`,
    arguments: { metrics: [{ as: 'hours', sum: 'hours' }] },
  });
  assert.notEqual(result.isError, true, JSON.stringify(result));
  return result.structuredContent.groups[0].hours;
}

const member = await connect(input('MEMBER_TOKEN'));
const manager = await connect(input('MANAGER_TOKEN'));

await check('a member lists the projects but none of the tools that write them', async () => {
  const names = (await member.listTools()).tools.map((tool) => tool.name);
  assert.ok(names.includes(`${PREFIX}projects__list`), JSON.stringify(names));
  assert.ok(names.includes(`${PREFIX}entries__create`), JSON.stringify(names));
  for (const write of WRITES) {
    assert.ok(!names.includes(write), `${write} listed to a member: ${JSON.stringify(names)}`);
  }
});

await check("a member's rename of a project is refused", async () => {
  let refused;
  try {
    const result = await member.callTool({
      name: `${PREFIX}projects__update`,
      arguments: { id: PROJECT_ID, changes: { name: 'Renamed' }, expectedVersion: 1, idempotencyKey: 'rename-1' },
    });
    refused = result.isError === true ? JSON.stringify(result) : null;
  } catch (error) {
    refused = String(error);
  }
  assert.ok(refused, 'the rename was accepted');
  assert.match(refused, /projects__update|not found|unknown/i, refused);
});

await check("a member's aggregate over entries holds only their own hours", async () => {
  assert.equal(await totalHours(member), MEMBER_HOURS);
});

await check("the manager's aggregate over entries holds every member's hours", async () => {
  assert.equal(await totalHours(manager), TEAM_HOURS);
});

await check('the manager is listed the project tools that write', async () => {
  const names = (await manager.listTools()).tools.map((tool) => tool.name);
  for (const write of WRITES) {
    assert.ok(names.includes(write), `${write} missing for the manager: ${JSON.stringify(names)}`);
  }
});

/** The error envelope of a refused call, checked to be one. */
async function refusal(client, tool, args) {
  const result = await client.callTool({ name: PREFIX + tool, arguments: args });
  assert.equal(result.isError, true, JSON.stringify(result));
  const error = result.structuredContent.error;
  for (const key of ['code', 'message', 'retryable', 'diagnosticId']) {
    assert.ok(key in error, `${key} missing: ${JSON.stringify(error)}`);
  }
  assert.doesNotMatch(error.message, /SQLITE|constraint failed|CHECK \(|SELECT|INSERT/, error.message);
  return error;
}

await check('"next tuesday" is refused as a date, naming the field', async () => {
  const error = await refusal(member, 'entries__create', {
    values: { date: 'next tuesday', project: PROJECT_ID, hours: 1 },
    idempotencyKey: 'vague-date',
  });
  assert.equal(error.code, 'APP_INPUT_INVALID');
  assert.equal(error.details?.field, 'date', JSON.stringify(error));
  assert.match(error.message, /date/);
});

await check('-5 hours is refused by the rule the schema words', async () => {
  const error = await refusal(member, 'entries__create', {
    values: { date: '2026-12-01', project: PROJECT_ID, hours: -5 },
    idempotencyKey: 'negative-hours',
  });
  assert.equal(error.code, 'APP_INPUT_INVALID');
  assert.equal(error.details?.field, 'hours', JSON.stringify(error));
  assert.equal(error.message, 'hours must be between 0 and 24');
});

await check('a duplicate project name says the name must be unique', async () => {
  const error = await refusal(manager, 'projects__create', {
    values: { name: input('PROJECT_NAME') },
    idempotencyKey: 'duplicate-name',
  });
  assert.equal(error.code, 'APP_CONFLICT');
  assert.deepEqual(error.details.fields, ['name']);
  assert.match(error.message, /name must be unique/);
});

await check('deleting a project that entries refer to says so', async () => {
  const error = await refusal(manager, 'projects__delete', {
    id: PROJECT_ID,
    expectedVersion: 1,
    idempotencyKey: 'referenced-delete',
  });
  assert.equal(error.code, 'APP_CONFLICT');
  assert.deepEqual(error.details.referencedBy, ['entries']);
  assert.match(error.message, /entries rows refer to/);
});

await check("the tools' schemas show the rules", async () => {
  const tools = (await member.listTools()).tools;
  const create = tools.find((tool) => tool.name === `${PREFIX}entries__create`);
  const values = create.inputSchema.properties.values.properties;
  assert.equal(values.date.format, 'date');
  assert.match(values.hours.description, /hours must be between 0 and 24/);
  assert.match(values.project.description, /existing projects row/);
});

await check('10,000 entries import from one CSV in one call; a file with one bad row imports nothing and names it', async () => {
  const rows = Array.from(
    { length: 10000 },
    (_, i) => `2025-${String((i % 12) + 1).padStart(2, '0')}-${String((i % 28) + 1).padStart(2, '0')},${PROJECT_ID},${(i % 8) + 0.5}`,
  );
  const file = (lines) => `date,project,hours\n${lines.join('\n')}\n`;
  const badRows = [...rows];
  badRows[4999] = `2025-05-05,${PROJECT_ID},25`;
  const error = await refusal(manager, 'entries__import', { csv: file(badRows), idempotencyKey: 'bad-import' });
  assert.equal(error.details?.row, 5000, JSON.stringify(error));
  assert.equal(error.details?.field, 'hours', JSON.stringify(error));
  const before = await totalHours(manager);
  assert.equal(before, TEAM_HOURS, 'the refused file imported nothing');
  const result = await manager.callTool({ name: `${PREFIX}entries__import`, arguments: { csv: file(rows), idempotencyKey: 'big-import' } });
  assert.notEqual(result.isError, true, JSON.stringify(result).slice(0, 500));
  assert.equal(result.structuredContent.imported, 10000);
  // The manager reads every member's rows: 10,003, so the export goes on.
  const first = await manager.callTool({ name: `${PREFIX}entries__export`, arguments: {} });
  assert.equal(first.structuredContent.rows, 10000);
  const rest = await manager.callTool({ name: `${PREFIX}entries__export`, arguments: { cursor: first.structuredContent.nextCursor } });
  assert.equal(rest.structuredContent.rows, 3);
  assert.equal(rest.structuredContent.nextCursor, null);
  assert.match(first.structuredContent.csv, /^id,date,project,hours,note,created_by\n/);
  // A member's export is their own row only.
  const own = await member.callTool({ name: `${PREFIX}entries__export`, arguments: {} });
  assert.equal(own.structuredContent.rows, 1);
});

await member.close();
await manager.close();
done();
