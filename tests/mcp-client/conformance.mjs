// Conformance of the Sasha MCP gateway with the official MCP TypeScript SDK
// client (@modelcontextprotocol/sdk, pinned in package.json) over streamable
// HTTP: initialization and sessions, per-caller tool lists, governed data tools
// confirmed through elicitation, actions, refusals and resources.
//
// Run by tests/process/mcp_sdk.rs against real processes. Inputs (environment):
//   MCP_URL          the gateway's /mcp endpoint
//   STAFF_TOKEN      staff (manage on every app), chat:use + apps:invoke
//   STAFF_USER_ID    the staff user's id (rows they create are stamped with it)
//   MEMBER_TOKEN     a member without any grant, chat:use + apps:invoke
//   USER_TOKEN       a member with `use` on expense-log, chat:use + apps:invoke
//   NO_INVOKE_TOKEN  staff, but only chat:use
//
// Prints one `ok - …` line per passed check; exits 1 at the first failure.

import assert from 'node:assert/strict';

import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import {
  StreamableHTTPClientTransport,
  StreamableHTTPError,
} from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import { UriTemplate } from '@modelcontextprotocol/sdk/shared/uriTemplate.js';
import { validateToolName } from '@modelcontextprotocol/sdk/shared/toolNameValidation.js';
import {
  ElicitRequestSchema,
  ErrorCode,
  LATEST_PROTOCOL_VERSION,
  McpError,
} from '@modelcontextprotocol/sdk/types.js';

import { check, done, input } from './harness.mjs';

// ---------------------------------------------------------------------------
// Inputs

const MCP_URL = new URL(input('MCP_URL'));
const STAFF_TOKEN = input('STAFF_TOKEN');
const STAFF_USER_ID = input('STAFF_USER_ID');
const MEMBER_TOKEN = input('MEMBER_TOKEN');
const USER_TOKEN = input('USER_TOKEN');
const NO_INVOKE_TOKEN = input('NO_INVOKE_TOKEN');


/** The open clients, closed at the end. */
const clients = [];

/**
 * Connects an SDK client with a bearer token. With `confirmation`, the client
 * declares the elicitation capability and answers each `elicitation/create`
 * with `confirmation.answer` ('accept' or 'decline'), recording the request.
 */
async function connect(token, { confirmation } = {}) {
  const client = new Client(
    { name: 'sasha-conformance', version: '1.0.0' },
    { capabilities: confirmation ? { elicitation: {} } : {} },
  );
  if (confirmation) {
    client.setRequestHandler(ElicitRequestSchema, async (request) => {
      confirmation.asked.push(request.params);
      return confirmation.answer === 'accept'
        ? { action: 'accept', content: { confirm: true } }
        : { action: 'decline' };
    });
  }
  const headers = token ? { Authorization: `Bearer ${token}` } : {};
  const transport = new StreamableHTTPClientTransport(MCP_URL, { requestInit: { headers } });
  await client.connect(transport);
  clients.push(client);
  return { client, transport };
}

/** A mutable elicitation answer with the requests received so far. */
function confirmer(answer = 'accept') {
  return { answer, asked: [] };
}

async function toolNames(client) {
  const { tools } = await client.listTools();
  return tools.map((tool) => tool.name).sort();
}

/** Calls a tool expecting success; returns its structuredContent. */
async function succeed(client, name, args = {}) {
  const result = await client.callTool({ name, arguments: args });
  assert.notEqual(result.isError, true, `${name} failed: ${JSON.stringify(result)}`);
  assert.ok(result.structuredContent, `${name} returned no structuredContent`);
  assert.ok(result.content.length > 0, `${name} returned no content`);
  return result.structuredContent;
}

/** Asserts a tool error result with the spec's envelope; returns the envelope. */
function envelopeOf(name, result) {
  assert.equal(result.isError, true, `${name} should fail: ${JSON.stringify(result)}`);
  const envelope = result.structuredContent?.error;
  assert.ok(envelope, `${name}: no structuredContent.error in ${JSON.stringify(result)}`);
  for (const key of ['code', 'message', 'retryable', 'diagnosticId']) {
    assert.ok(key in envelope, `${name}: envelope without ${key}: ${JSON.stringify(envelope)}`);
  }
  return envelope;
}

/** Calls a tool expecting a tool error with `code`; returns the envelope. */
async function failWith(client, code, name, args = {}) {
  const envelope = envelopeOf(name, await client.callTool({ name, arguments: args }));
  assert.equal(envelope.code, code, `${name}: ${JSON.stringify(envelope)}`);
  return envelope;
}

/** Reads a JSON data resource; returns its parsed text. */
async function readJson(client, uri) {
  const { contents } = await client.readResource({ uri });
  assert.equal(contents.length, 1, `${uri}: ${JSON.stringify(contents)}`);
  assert.equal(contents[0].uri, uri);
  assert.equal(contents[0].mimeType, 'application/json');
  return JSON.parse(contents[0].text);
}

/**
 * Expands an RFC 6570 template by hand: `{name}` (simple string expansion) and
 * `{?name}` (form-style query), the two forms the gateway's templates use.
 */
function expand(template, values) {
  return template.replace(/\{(\??)([A-Za-z]+)\}/g, (_, query, name) => {
    const value = values[name];
    assert.ok(value !== undefined, `no value for {${query}${name}} in ${template}`);
    return query ? `?${name}=${encodeURIComponent(value)}` : encodeURIComponent(value);
  });
}

const APP = 'expense-log';
const PREFIX = 'app__expense_log__';
const TABLE_TOOLS = ['expenses', 'categories'].flatMap((table) =>
  ['list', 'get', 'aggregate', 'history', 'export', 'create', 'update', 'delete', 'import'].map((op) => `${PREFIX}${table}__${op}`),
);
// Every caller gets getDocs; a caller with apps:invoke also suggestImprovement.
// (The source tools need apps:write, which none of these tokens holds.)
const PLATFORM_TOOLS = ['getDocs', 'suggestImprovement'];
const EXPENSE_LOG_TOOLS = [
  ...PLATFORM_TOOLS,
  'open_app__expense_log',
  ...TABLE_TOOLS,
  `${PREFIX}category_totals`,
  `${PREFIX}week_totals`,
].sort();
// A caller who manages an app also gets the undo tools.
const UNDO_TOOLS = ['listAppActivity', 'previewAppUndo', 'undoAppChanges'];
const STAFF_TOOLS = ['open_app__hello', ...EXPENSE_LOG_TOOLS, ...UNDO_TOOLS].sort();
const APP_ONLY_ACTION = `${PREFIX}add_expense`;

// ---------------------------------------------------------------------------
// Initialization and authentication

const staffConfirm = confirmer();
let staff;
let staffTransport;

await check('initialize negotiates the SDK protocol and opens a session', async () => {
  ({ client: staff, transport: staffTransport } = await connect(STAFF_TOKEN, { confirmation: staffConfirm }));
  assert.equal(staffTransport.protocolVersion, LATEST_PROTOCOL_VERSION);
  assert.ok(staffTransport.sessionId, 'the server returned no Mcp-Session-Id');
  assert.equal(staff.getServerVersion()?.name, 'sasha-apps');
  const capabilities = staff.getServerCapabilities();
  assert.ok(capabilities?.tools, `no tools capability: ${JSON.stringify(capabilities)}`);
  assert.ok(capabilities?.resources, `no resources capability: ${JSON.stringify(capabilities)}`);
  assert.match(staff.getInstructions() ?? '', /Sasha Apps/);
  await staff.ping();
});

await check('a client without a token is refused with 401', async () => {
  await assert.rejects(connect(undefined), (error) => {
    assert.ok(error instanceof StreamableHTTPError, `not a StreamableHTTPError: ${error}`);
    assert.equal(error.code, 401);
    return true;
  });
  await assert.rejects(connect('sasha_at_forged'), (error) => error instanceof StreamableHTTPError && error.code === 401);
});

// ---------------------------------------------------------------------------
// tools/list per caller

let staffTools;

await check('tools/list: staff sees every model tool, not the app-only action', async () => {
  const { tools } = await staff.listTools();
  staffTools = new Map(tools.map((tool) => [tool.name, tool]));
  assert.deepEqual([...staffTools.keys()].sort(), STAFF_TOOLS);
  for (const tool of tools) {
    const validation = validateToolName(tool.name);
    assert.ok(validation.isValid && validation.warnings.length === 0, `${tool.name}: ${validation.warnings}`);
    assert.equal(tool.inputSchema.type, 'object', tool.name);
  }
  assert.equal(staffTools.get(`${PREFIX}expenses__list`).annotations?.readOnlyHint, true);
  assert.equal(staffTools.get(`${PREFIX}expenses__create`).annotations?.readOnlyHint, false);
  assert.equal(staffTools.get(`${PREFIX}expenses__delete`).annotations?.destructiveHint, true);
  assert.ok(staffTools.get(`${PREFIX}week_totals`).outputSchema, 'actions declare an outputSchema');
});

await check('tools/list: a member without a grant sees no app tools', async () => {
  const { client } = await connect(MEMBER_TOKEN);
  assert.deepEqual(await toolNames(client), PLATFORM_TOOLS);
});

let user;

await check('tools/list: a member with `use` on expense-log sees exactly its tools', async () => {
  ({ client: user } = await connect(USER_TOKEN));
  assert.deepEqual(await toolNames(user), EXPENSE_LOG_TOOLS);
});

await check('tools/list: a token without apps:invoke sees only getDocs', async () => {
  const { client } = await connect(NO_INVOKE_TOKEN);
  assert.deepEqual(await toolNames(client), ['getDocs']);
  assert.deepEqual((await client.listResources()).resources, []);
  assert.deepEqual((await client.listResourceTemplates()).resourceTemplates, []);
});

// ---------------------------------------------------------------------------
// Confirmed writes through elicitation

let travel;

await check('create (accepted elicitation) writes the row', async () => {
  staffConfirm.answer = 'accept';
  staffConfirm.asked.length = 0;
  const row = await succeed(staff, `${PREFIX}categories__create`, { values: { name: 'Travel' } });
  assert.equal(row.name, 'Travel');
  assert.equal(typeof row.id, 'number');
  assert.equal(row._sasha_version, 1);
  travel = row.id;
  assert.equal(staffConfirm.asked.length, 1, 'exactly one elicitation per write');
  const [asked] = staffConfirm.asked;
  assert.equal(asked.mode ?? 'form', 'form');
  assert.match(asked.message, /categories/);
  assert.equal(asked.requestedSchema.type, 'object');
  assert.equal(asked.requestedSchema.properties.confirm.type, 'boolean');
  assert.deepEqual(asked.requestedSchema.required, ['confirm']);
});

await check('create (declined elicitation) is APP_CONFIRMATION_REQUIRED and writes nothing', async () => {
  staffConfirm.answer = 'decline';
  staffConfirm.asked.length = 0;
  await failWith(staff, 'APP_CONFIRMATION_REQUIRED', `${PREFIX}categories__create`, { values: { name: 'Food' } });
  assert.equal(staffConfirm.asked.length, 1);
  staffConfirm.answer = 'accept';
  const { rows } = await succeed(staff, `${PREFIX}categories__list`);
  assert.deepEqual(rows.map((row) => row.name), ['Travel']);
});

await check('create without the elicitation capability is APP_CONFIRMATION_REQUIRED', async () => {
  const { client: blind } = await connect(STAFF_TOKEN);
  await failWith(blind, 'APP_CONFIRMATION_REQUIRED', `${PREFIX}categories__create`, { values: { name: 'Food' } });
  const { rows } = await succeed(blind, `${PREFIX}categories__list`);
  assert.equal(rows.length, 1, 'nothing was written');
});

// ---------------------------------------------------------------------------
// Data tools

let trip; // 2026-09-08, 12.5
let lunch; // 2026-09-20, 7.5

await check('expenses create stamps the owner and a version', async () => {
  trip = await succeed(staff, `${PREFIX}expenses__create`, {
    values: { spent_on: '2026-09-08', amount: 12.5, category_id: travel, note: 'Train' },
    idempotencyKey: 'sdk-expense-1',
  });
  assert.equal(trip.created_by, STAFF_USER_ID);
  assert.equal(trip._sasha_version, 1);
  lunch = await succeed(staff, `${PREFIX}expenses__create`, {
    values: { spent_on: '2026-09-20', amount: 7.5, category_id: travel, note: null },
  });
  assert.notEqual(lunch.id, trip.id);
});

await check('expenses create replayed with its idempotency key returns the original row', async () => {
  const again = await succeed(staff, `${PREFIX}expenses__create`, {
    values: { spent_on: '2026-09-08', amount: 12.5, category_id: travel, note: 'Train' },
    idempotencyKey: 'sdk-expense-1',
  });
  assert.equal(again.id, trip.id);
  const { rows } = await succeed(staff, `${PREFIX}expenses__list`);
  assert.equal(rows.length, 2);
});

await check('expenses list with where, orderBy and limit pages', async () => {
  const query = {
    where: [{ field: 'spent_on', operator: 'gte', value: '2026-09-01' }],
    orderBy: [{ field: 'spent_on', direction: 'desc' }],
    limit: 1,
  };
  const first = await succeed(staff, `${PREFIX}expenses__list`, query);
  assert.deepEqual(first.rows.map((row) => row.id), [lunch.id]);
  assert.equal(typeof first.nextCursor, 'string', `no nextCursor: ${JSON.stringify(first)}`);
  const second = await succeed(staff, `${PREFIX}expenses__list`, { ...query, cursor: first.nextCursor });
  assert.deepEqual(second.rows.map((row) => row.id), [trip.id]);
  const filtered = await succeed(staff, `${PREFIX}expenses__list`, {
    where: [{ field: 'amount', operator: 'gt', value: 10 }],
  });
  assert.deepEqual(filtered.rows.map((row) => row.id), [trip.id]);
});

await check('expenses get returns the row', async () => {
  const row = await succeed(staff, `${PREFIX}expenses__get`, { id: trip.id });
  assert.equal(row.amount, 12.5);
  assert.equal(row.note, 'Train');
  assert.equal(row.spent_on, '2026-09-08');
});

await check('expenses aggregate groups and sums', async () => {
  const { groups } = await succeed(staff, `${PREFIX}expenses__aggregate`, {
    groupBy: ['category_id'],
    metrics: [
      { as: 'total', sum: 'amount' },
      { as: 'n', count: 'id' },
    ],
  });
  assert.deepEqual(groups, [{ category_id: travel, total: 20, n: 2 }]);
});

await check('expenses update with expectedVersion (accepted) bumps the version', async () => {
  staffConfirm.asked.length = 0;
  const row = await succeed(staff, `${PREFIX}expenses__update`, {
    id: trip.id,
    changes: { amount: 20 },
    expectedVersion: 1,
  });
  assert.equal(row.id, trip.id);
  assert.equal(row.amount, 20);
  assert.equal(row._sasha_version, 2);
  assert.equal(staffConfirm.asked.length, 1);
  assert.match(staffConfirm.asked[0].message, /update/);
});

await check('expenses update with a stale expectedVersion is APP_CONFLICT', async () => {
  await failWith(staff, 'APP_CONFLICT', `${PREFIX}expenses__update`, {
    id: trip.id,
    changes: { amount: 30 },
    expectedVersion: 1,
  });
});

// ---------------------------------------------------------------------------
// Actions

await check('action week_totals covers [weekStart, weekStart + 7 days)', async () => {
  const inside = await succeed(staff, `${PREFIX}week_totals`, { weekStart: '2026-09-02' });
  assert.deepEqual(inside, { groups: [{ category_id: travel, total: 20 }] });
  const after = await succeed(staff, `${PREFIX}week_totals`, { weekStart: '2026-09-09' });
  assert.deepEqual(after, { groups: [] });
});

await check('action category_totals sums a date range', async () => {
  const totals = await succeed(staff, `${PREFIX}category_totals`, { from: '2026-09-01', to: '2026-09-30' });
  assert.deepEqual(totals, { groups: [{ category_id: travel, total: 27.5, entries: 2 }] });
});

// The SDK checks structuredContent against a tool's outputSchema even for
// isError results; an action's outputSchema admits the error envelope, so the
// plain callTool reads the failure.
await check('an action with invalid input is a tool error APP_INPUT_INVALID', async () => {
  await failWith(staff, 'APP_INPUT_INVALID', `${PREFIX}week_totals`, { weekStart: '2026-02-30' });
});

await check('the app-only action is APP_ACTION_UNAVAILABLE to an external client', async () => {
  await failWith(staff, 'APP_ACTION_UNAVAILABLE', APP_ONLY_ACTION, {
    spent_on: '2026-09-08',
    amount: 1,
    category_id: travel,
  });
});

await check('an unknown tool rejects with JSON-RPC -32602', async () => {
  await assert.rejects(staff.callTool({ name: 'delete_everything', arguments: {} }), (error) => {
    assert.ok(error instanceof McpError, `not an McpError: ${error}`);
    assert.equal(error.code, ErrorCode.InvalidParams);
    return true;
  });
});

await check('expenses delete with expectedVersion (accepted) removes the row', async () => {
  const deleted = await succeed(staff, `${PREFIX}expenses__delete`, { id: lunch.id, expectedVersion: 1 });
  assert.deepEqual(deleted, { id: lunch.id, deleted: true });
  await failWith(staff, 'APP_RECORD_NOT_FOUND', `${PREFIX}expenses__get`, { id: lunch.id });
});

await check('a member with `use` shares categories but not the staff member’s expenses', async () => {
  const categories = await succeed(user, `${PREFIX}categories__list`);
  assert.deepEqual(categories.rows.map((row) => row.name), ['Travel']);
  const expenses = await succeed(user, `${PREFIX}expenses__list`);
  assert.deepEqual(expenses.rows, []);
});

// ---------------------------------------------------------------------------
// Resources

let uiUri;

await check('resources/list: UI resources and data resources', async () => {
  const { resources } = await staff.listResources();
  const byName = new Map(resources.map((resource) => [resource.name, resource]));
  for (const app of ['hello', APP]) {
    const ui = byName.get(app);
    assert.ok(ui, `no UI resource for ${app}: ${JSON.stringify(resources)}`);
    assert.match(ui.uri, new RegExp(`^ui://sasha/apps/${app}/revisions/[0-9a-f]{64}$`));
    assert.equal(ui.mimeType, 'text/html;profile=mcp-app');
  }
  uiUri = byName.get(APP).uri;
  const uris = resources.map((resource) => resource.uri);
  assert.ok(uris.includes(`sasha://apps/${APP}/tables`), JSON.stringify(uris));
  assert.ok(uris.includes(`sasha://apps/${APP}/actions`), JSON.stringify(uris));
  assert.ok(uris.includes('sasha://apps/hello/actions'), JSON.stringify(uris));
});

await check('the opener tool and its _meta name the listed UI resource', async () => {
  const tool = staffTools.get('open_app__expense_log');
  assert.equal(tool._meta?.ui?.resourceUri, uiUri);
  const opened = await succeed(staff, 'open_app__expense_log');
  assert.equal(opened.resourceUri, uiUri);
  assert.equal(opened.appId, APP);
});

await check('resources/read of the UI resource: MCP Apps HTML with _meta.ui.csp', async () => {
  const { contents } = await staff.readResource({ uri: uiUri });
  assert.equal(contents.length, 1);
  const [content] = contents;
  assert.equal(content.uri, uiUri);
  assert.equal(content.mimeType, 'text/html;profile=mcp-app');
  assert.match(content.text, /^<!doctype html>/i);
  assert.equal(typeof content._meta?.ui?.csp, 'object', JSON.stringify(content._meta));
});

let templates;

await check('resources/templates/list: the six sasha:// templates', async () => {
  const { resourceTemplates } = await staff.listResourceTemplates();
  templates = new Map(resourceTemplates.map((template) => [template.name, template.uriTemplate]));
  assert.deepEqual([...templates.values()].sort(), [
    'sasha://apps/{appId}/actions',
    'sasha://apps/{appId}/tables',
    'sasha://apps/{appId}/tables/{table}/aggregate{?q}',
    'sasha://apps/{appId}/tables/{table}/rows/{id}',
    'sasha://apps/{appId}/tables/{table}/rows/{id}/history',
    'sasha://apps/{appId}/tables/{table}/rows{?q}',
  ]);
  for (const template of resourceTemplates) {
    assert.equal(template.mimeType, 'application/json');
  }
});

/** Expands a template by hand, checks the SDK's RFC 6570 reading agrees, reads it. */
async function readTemplate(name, values) {
  const template = templates.get(name);
  assert.ok(template, `no template ${name}`);
  const uri = expand(template, values);
  assert.equal(new UriTemplate(template).expand(values), uri, `the SDK expands ${template} differently`);
  return readJson(staff, uri);
}

await check('resources/read: the tables template', async () => {
  const { tables } = await readTemplate('tables', { appId: APP });
  assert.deepEqual(Object.keys(tables).sort(), ['categories', 'expenses']);
  const columns = tables.expenses.columns.map((column) => column.name);
  for (const column of ['id', 'spent_on', 'amount', 'category_id', 'note']) {
    assert.ok(columns.includes(column), `expenses has no ${column}: ${columns}`);
  }
});

await check('resources/read: the actions template', async () => {
  const { actions } = await readTemplate('actions', { appId: APP });
  const tools = Object.fromEntries(actions.map((action) => [action.id, action.tool]));
  assert.deepEqual(tools, {
    'add-expense': APP_ONLY_ACTION,
    'category-totals': `${PREFIX}category_totals`,
    'week-totals': `${PREFIX}week_totals`,
  });
});

await check('resources/read: the rows template with a query', async () => {
  const categories = await readTemplate('rows', { appId: APP, table: 'categories', q: JSON.stringify({ limit: 5 }) });
  assert.deepEqual(categories.rows.map((row) => row.id), [travel]);
  const query = { where: [{ field: 'category_id', operator: 'eq', value: travel }], limit: 5 };
  const expenses = await readTemplate('rows', { appId: APP, table: 'expenses', q: JSON.stringify(query) });
  assert.deepEqual(expenses.rows.map((row) => row.id), [trip.id]);
});

await check('resources/read: the row template', async () => {
  const row = await readTemplate('row', { appId: APP, table: 'expenses', id: String(trip.id) });
  assert.equal(row.amount, 20);
  assert.equal(row._sasha_version, 2);
  const category = await readTemplate('row', { appId: APP, table: 'categories', id: String(travel) });
  assert.equal(category.name, 'Travel');
});

await check('resources/read: the aggregate template', async () => {
  const metrics = { metrics: [{ as: 'n', count: 'id' }] };
  assert.deepEqual(await readTemplate('aggregate', { appId: APP, table: 'categories', q: JSON.stringify(metrics) }), {
    groups: [{ n: 1 }],
  });
  const sums = { groupBy: ['category_id'], metrics: [{ as: 'total', sum: 'amount' }] };
  assert.deepEqual(await readTemplate('aggregate', { appId: APP, table: 'expenses', q: JSON.stringify(sums) }), {
    groups: [{ category_id: travel, total: 20 }],
  });
});

await check('resources/read of an unknown resource rejects with an McpError', async () => {
  await assert.rejects(staff.readResource({ uri: `sasha://apps/${APP}/tables/secrets/rows` }), McpError);
  await assert.rejects(staff.readResource({ uri: 'file:///etc/passwd' }), McpError);
});

// ---------------------------------------------------------------------------
// Session end

await check('terminating the session (DELETE) succeeds', async () => {
  await staffTransport.terminateSession();
  assert.equal(staffTransport.sessionId, undefined);
});

for (const client of clients) {
  await client.close();
}
done();
process.exit(0);
