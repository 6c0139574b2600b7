// Table policies through the official MCP TypeScript SDK client (issue 26):
// Time Sheet Entry's `projects` is written by the app's managers only and its
// `entries` are read in full by managers. A member does not see the project
// tools that write, and calling one is refused; the member's aggregate over
// `entries` holds their own hours; the manager's holds everyone's.

import assert from 'node:assert/strict';

import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';

import { check, done, input } from './harness.mjs';

const MCP_URL = new URL(input('MCP_URL'));
const PROJECT_ID = Number(input('PROJECT_ID'));
const MEMBER_HOURS = Number(input('MEMBER_HOURS'));
const TEAM_HOURS = Number(input('TEAM_HOURS'));
const PREFIX = 'app__time_sheet_entry__';
const WRITES = ['projects__create', 'projects__update', 'projects__delete'].map((tool) => PREFIX + tool);

async function connect(token) {
  const client = new Client({ name: 'sasha-policies', version: '1.0.0' }, { capabilities: {} });
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

await member.close();
await manager.close();
done();
