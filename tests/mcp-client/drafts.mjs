// Drafts and publication with the official MCP TypeScript SDK client and its
// elicitation handler (issue 23's acceptance), in three phases that
// tests/process/drafts.rs runs around a preview through the Studio page's session
// and a restart of every role:
//
//   PHASE=draft    create an app with a table; write a draft with a new
//                  migration and a new column in the UI; check it (valid,
//                  the migration and the column in its review); the live app
//                  is untouched; a declined publication publishes nothing.
//   PHASE=publish  publish (the person accepts the elicitation, which names
//                  the migration); write a row; reverting to the first
//                  revision is refused (it would drop the applied
//                  migration); a UI change reverted to the published
//                  revision keeps the row.
//   PHASE=restart  after every role restarted: the first revision's
//                  resource is served with exactly its bytes.
//
// Inputs (environment): MCP_URL, WRITER_TOKEN (staff: chat:use + apps:invoke
// + apps:write), PHASE, APP; for publish BASE and FIRST; for restart FIRST
// and FIRST_SHA256. Prints `value NAME=...` lines for the next phase and one
// `ok - …` line per check; exits 1 at the first failure.

import assert from 'node:assert/strict';
import { createHash } from 'node:crypto';

import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import { ElicitRequestSchema } from '@modelcontextprotocol/sdk/types.js';

import { check, done, input } from './harness.mjs';

const MCP_URL = new URL(input('MCP_URL'));
const WRITER_TOKEN = input('WRITER_TOKEN');
const PHASE = input('PHASE');
const APP = input('APP');
const TOOL = APP.replaceAll('-', '_');

/** What the person answers, and what they were asked. */
const person = { answer: 'accept', asked: [] };
const client = new Client({ name: 'sasha-drafts', version: '1.0.0' }, { capabilities: { elicitation: {} } });
client.setRequestHandler(ElicitRequestSchema, async (request) => {
  person.asked.push(request.params.message);
  return person.answer === 'accept' ? { action: 'accept', content: { confirm: true } } : { action: 'decline' };
});
await client.connect(
  new StreamableHTTPClientTransport(MCP_URL, {
    requestInit: { headers: { Authorization: `Bearer ${WRITER_TOKEN}` } },
  }),
);

async function call(name, args) {
  const result = await client.callTool({ name, arguments: args });
  assert.notEqual(result.isError, true, `${name}: ${JSON.stringify(result)}`);
  return result.structuredContent;
}

async function refused(name, args) {
  const result = await client.callTool({ name, arguments: args });
  assert.equal(result.isError, true, `${name} should fail: ${JSON.stringify(result)}`);
  return result.structuredContent.error;
}

function value(name, text) {
  console.log(`value ${name}=${text}`);
}

const SCHEMA = `CREATE TABLE items (
  id INTEGER PRIMARY KEY,
  title TEXT NOT NULL,
  created_by TEXT NOT NULL,
  note TEXT
);
`;

if (PHASE === 'draft') {
  let first;
  await check('createApp makes a data app', async () => {
    const created = await call('createApp', { app: APP, name: 'Field log', description: 'What we saw', withTable: true });
    assert.equal(created.status.ok, true, JSON.stringify(created));
    first = created.status.revision;
    value('FIRST', first);
  });

  await check('the draft tools are listed and the source tools take draft', async () => {
    const { tools } = await client.listTools();
    const names = tools.map((tool) => tool.name);
    assert.ok(names.includes('publishAppDraft') && names.includes('discardAppDraft'), names.join(' '));
    const write = tools.find((tool) => tool.name === 'writeAppFile');
    assert.equal(write.inputSchema.properties.draft.type, 'boolean');
  });

  let base;
  let contentHash;
  await check('writing a migration with draft: true starts a draft and leaves the live app', async () => {
    const written = await call('writeAppFile', {
      app: APP,
      path: 'migrations/002-add-note.sql',
      content: 'ALTER TABLE items ADD COLUMN note TEXT;\n',
      draft: true,
    });
    assert.equal(written.draft.baseRevision, first);
    base = written.draft.baseRevision;
    value('BASE', base);
    value('PREVIEW', written.draft.previewId);
    // schema.sql does not match yet: the draft does not validate.
    assert.equal(written.status.ok, false, JSON.stringify(written.status));
    const live = await call('checkApp', { app: APP });
    assert.equal(live.status.revision, first);
    assert.equal(live.draft, undefined);
  });

  await check('schema.sql and the UI follow in the draft', async () => {
    const schema = await call('readAppFile', { app: APP, path: 'schema.sql', draft: true });
    const fixed = await call('writeAppFile', { app: APP, path: 'schema.sql', content: SCHEMA, expectedVersion: schema.version, draft: true });
    assert.equal(fixed.status.ok, true, JSON.stringify(fixed.status));
    const page = await call('readAppFile', { app: APP, path: 'index.html', draft: true });
    const edited = await call('editAppFile', {
      app: APP,
      path: 'index.html',
      oldString: '<label for="title">New item</label>',
      newString: '<label for="title">New item (with notes)</label>',
      expectedVersion: page.version,
      draft: true,
    });
    assert.equal(edited.status.ok, true, JSON.stringify(edited.status));
  });

  await check('checkApp with draft: true reviews the migration and the new column', async () => {
    const checked = await call('checkApp', { app: APP, draft: true });
    const draft = checked.draft;
    assert.equal(draft.status.ok, true, JSON.stringify(draft.status));
    assert.equal(draft.stale, false);
    assert.deepEqual(draft.review.migrations.map((m) => m.file), ['migrations/002-add-note.sql']);
    const items = draft.review.tables.find((t) => t.table === 'items');
    assert.deepEqual(items.columns.map((c) => `${c.change} ${c.column}`), ['added note']);
    const paths = draft.changes.map((c) => `${c.change} ${c.path}`).sort();
    assert.deepEqual(paths, ['added migrations/002-add-note.sql', 'changed index.html', 'changed schema.sql']);
    assert.ok(draft.changes.find((c) => c.path === 'index.html').unified.includes('+'), 'a unified diff');
    value('DRAFT_REVISION', draft.status.revision);
    assert.match(draft.contentHash, /^[0-9a-f]{64}$/);
    contentHash = draft.contentHash;
    value('CONTENT_HASH', contentHash);
  });

  await check('a declined publication publishes nothing', async () => {
    person.answer = 'decline';
    const error = await refused('publishAppDraft', { app: APP, expectedRevision: base, contentHash });
    assert.equal(error.code, 'APP_CONFIRMATION_REQUIRED');
    assert.equal(person.asked.length, 1);
    assert.match(person.asked[0], /migrations\/002-add-note\.sql/);
    const live = await call('checkApp', { app: APP });
    assert.equal(live.status.revision, first);
  });
}

if (PHASE === 'publish') {
  const FIRST = input('FIRST');
  const BASE = input('BASE');
  const CONTENT_HASH = input('CONTENT_HASH');
  let published;
  await check('a stale expectedRevision is refused before the person is asked', async () => {
    const error = await refused('publishAppDraft', { app: APP, expectedRevision: '0'.repeat(64), contentHash: CONTENT_HASH });
    assert.equal(error.code, 'APP_CONFLICT');
    assert.equal(error.details.diagnostics[0].code, 'DRAFT_BASE_MOVED');
    assert.equal(person.asked.length, 0);
  });

  await check('publishAppDraft asks the person, then applies the migration and goes live', async () => {
    const answer = await call('publishAppDraft', { app: APP, expectedRevision: BASE, contentHash: CONTENT_HASH });
    assert.equal(person.asked.length, 1);
    assert.match(person.asked[0], /every user/);
    assert.deepEqual(answer.published.migrationsApplied, ['migrations/002-add-note.sql']);
    assert.equal(answer.published.previousRevision, FIRST);
    published = answer.published.revision;
    const live = await call('checkApp', { app: APP });
    assert.equal(live.status.revision, published);
    const none = await refused('checkApp', { app: APP, draft: true });
    assert.equal(none.code, 'APP_RECORD_NOT_FOUND');
    value('PUBLISHED', published);
  });

  await check('the migration is in the activity as the publisher\'s, and no undo takes it back', async () => {
    const activity = await call('listAppActivity', { app: APP, initiator: 'migration' });
    assert.equal(activity.entries.length, 1, JSON.stringify(activity));
    const [entry] = activity.entries;
    assert.equal(entry.operation, 'migrate');
    assert.equal(entry.table, 'items');
    assert.equal(entry.initiatorId, 'migrations/002-add-note.sql');
    assert.equal(entry.actor, input('PUBLISHER'));
    assert.equal(entry.revision, published);
    assert.equal(entry.after.rows, 1, 'the row written before the publication');
    assert.ok(entry.after.columns.includes('note TEXT'), JSON.stringify(entry.after));
    assert.ok(!entry.before.columns.includes('note TEXT'), JSON.stringify(entry.before));
    const error = await refused('previewAppUndo', { app: APP, initiator: 'migration', since: '2000-01-01T00:00:00Z' });
    assert.equal(error.code, 'APP_INPUT_INVALID');
    assert.match(error.message, /revert/);
  });

  await check('a row with the new column is written (confirmed by the person)', async () => {
    const created = await call(`app__${TOOL}__items__create`, { values: { title: 'live row', note: 'after publishing' } });
    const row = created.record ?? created;
    assert.equal(row.note, 'after publishing', JSON.stringify(created));
  });

  await check('reverting to the first revision is refused: it would drop the applied migration', async () => {
    const error = await refused('revertApp', { app: APP, revision: FIRST, expectedRevision: published });
    assert.equal(error.code, 'APP_SCHEMA_INCOMPATIBLE');
    assert.match(error.message, /002-add-note\.sql/);
  });

  await check('a UI change reverted to the published revision keeps the row', async () => {
    const page = await call('readAppFile', { app: APP, path: 'index.html' });
    const changed = await call('writeAppFile', { app: APP, path: 'index.html', content: page.content.replace('with notes', 'changed'), expectedVersion: page.version });
    assert.notEqual(changed.status.revision, published);
    const reverted = await call('revertApp', { app: APP, revision: published, expectedRevision: changed.status.revision });
    assert.equal(reverted.revision, published);
    const rows = await call(`app__${TOOL}__items__list`, {});
    assert.deepEqual(rows.rows.map((row) => row.title), ['before the publication', 'live row']);
  });
}

if (PHASE === 'restart') {
  const FIRST = input('FIRST');
  await check('after a restart of every role the first revision is served with its exact bytes', async () => {
    const uri = `ui://sasha/apps/${APP}/revisions/${FIRST}`;
    const read = await client.readResource({ uri });
    const text = read.contents[0].text;
    assert.equal(createHash('sha256').update(text).digest('hex'), input('FIRST_SHA256'));
    assert.match(text, /<label for="title">New item<\/label>/);
  });
}

if (PHASE === 'draft') {
  await check('the first revision\'s resource is read now, for the restart phase', async () => {
    const first = (await call('listAppRevisions', { app: APP })).revisions.at(-1).revision;
    const read = await client.readResource({ uri: `ui://sasha/apps/${APP}/revisions/${first}` });
    value('FIRST_SHA256', createHash('sha256').update(read.contents[0].text).digest('hex'));
  });
}

await client.close();
done();
