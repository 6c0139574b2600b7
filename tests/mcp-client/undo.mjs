// Undo of a Studio assistant conversation through the official MCP
// TypeScript SDK client: the member who chatted previews the undo of the
// conversation's changes (listAppActivity shows them as the conversation's),
// sees the row they edited by hand since as a conflict, applies it (the SDK
// answers the confirmation), and the rows are exactly those before the
// conversation, with the hand edit kept. Replaying the approved undo applies
// nothing more. Then the undo is itself undone: the conversation's changes
// come back. Expected row sets come from the Rust test.

import assert from 'node:assert/strict';

import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import { ElicitRequestSchema } from '@modelcontextprotocol/sdk/types.js';

import { check, done, input } from './harness.mjs';

const MCP_URL = new URL(input('MCP_URL'));
const CONVERSATION = input('CONVERSATION');
const EDITED_ID = Number(input('EDITED_ID'));
const BEFORE = JSON.parse(input('BEFORE_ROWS'));
const AFTER = JSON.parse(input('AFTER_ROWS'));
const APP = 'expense-log';

const client = new Client({ name: 'sasha-undo', version: '1.0.0' }, { capabilities: { elicitation: {} } });
let asked = 0;
client.setRequestHandler(ElicitRequestSchema, async () => {
  asked += 1;
  return { action: 'accept', content: { confirm: true } };
});
await client.connect(
  new StreamableHTTPClientTransport(MCP_URL, { requestInit: { headers: { Authorization: `Bearer ${input('MEMBER_TOKEN')}` } } }),
);

async function call(name, args) {
  const result = await client.callTool({ name, arguments: args });
  assert.notEqual(result.isError, true, JSON.stringify(result));
  return result.structuredContent;
}

/** The member's expenses as [id, amount, note], by id. */
async function rows() {
  const listed = await call('app__expense_log__expenses__list', { limit: 200, orderBy: [{ field: 'id' }] });
  return listed.rows.map((row) => [row.id, row.amount, row.note]);
}

const conversation = { app: APP, initiator: 'assistant', initiatorId: CONVERSATION, since: '2000-01-01T00:00:00Z' };

await check('the activity names the conversation as the initiator of its 45 changes', async () => {
  const first = await call('listAppActivity', { app: APP, initiator: 'assistant', initiatorId: CONVERSATION, limit: 200 });
  assert.equal(first.entries.length, 45);
  assert.ok(first.entries.every((entry) => entry.initiator === 'assistant' && entry.initiatorId === CONVERSATION));
  const forged = await call('listAppActivity', { app: APP, initiator: 'assistant', initiatorId: 'not-a-conversation' });
  assert.equal(forged.entries.length, 0);
});

let preview;
await check('the preview lists 45 rows, the hand-edited one as a conflict', async () => {
  preview = await call('previewAppUndo', { ...conversation, limit: 200 });
  assert.equal(preview.entries, 45);
  assert.equal(preview.rows, 45);
  assert.equal(preview.conflicts, 1);
  const conflict = preview.page.find((row) => row.conflict !== null);
  assert.equal(conflict.id, EDITED_ID);
  assert.equal(conflict.conflict.reason, 'changed-since');
  assert.equal(conflict.conflict.changes[0].initiator, 'app-view');
  assert.equal(preview.page.filter((row) => row.action === 'delete').length, 30);
  assert.equal(preview.page.filter((row) => row.action === 'recreate').length, 5);
});

let undone;
const approved = { ...conversation, planHash: null, idempotencyKey: 'undo-the-conversation' };
await check('applying the undo restores exactly the earlier rows and keeps the hand edit', async () => {
  approved.planHash = preview.planHash;
  undone = await call('undoAppChanges', approved);
  assert.equal(asked, 1, 'the person was asked once');
  assert.deepEqual([undone.deleted, undone.updated, undone.recreated], [30, 9, 5]);
  assert.deepEqual(undone.leftAlone, [{ table: 'expenses', id: EDITED_ID, reason: 'changed-since' }]);
  assert.deepEqual(await rows(), BEFORE);
});

await check('replaying the approved undo applies nothing more', async () => {
  const again = await call('undoAppChanges', approved);
  assert.deepEqual(again, undone);
  assert.deepEqual(await rows(), BEFORE);
});

await check('undoing the undo brings the conversation back', async () => {
  const ofUndo = { app: APP, initiator: 'undo', initiatorId: undone.undoId, since: '2000-01-01T00:00:00Z' };
  const second = await call('previewAppUndo', { ...ofUndo, limit: 200 });
  assert.equal(second.conflicts, 0);
  const redone = await call('undoAppChanges', { ...ofUndo, planHash: second.planHash, idempotencyKey: 'redo' });
  assert.deepEqual([redone.deleted, redone.updated, redone.recreated], [5, 9, 30]);
  assert.deepEqual(await rows(), AFTER);
});

await client.close();
done();
