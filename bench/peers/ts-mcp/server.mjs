// Load benchmark peer (issue 25): the Time Sheet `entries` create and list as
// an MCP server on the official TypeScript SDK, written the way its examples
// and README show a user deploying one: Express via `createMcpExpressApp`,
// Streamable HTTP in stateless mode (a new server and transport per request,
// JSON responses), the SDK's `requireBearerAuth` with a token table in SQLite,
// better-sqlite3 with WAL.
//
//   node server.mjs init <db> <user>   # schema, one user, 5 projects; prints {"token": …, "user": …}
//   node server.mjs serve <db> [port]  # prints {"event":"ready","port":N} once listening
//
// Same guarantees as the governed path where the shape allows: every request
// reads the credential from the database (a deleted token fails the next
// call), rows are owner-stamped and owner-scoped from the token, a create
// stores its receipt (idempotency key, input hash, result) in the write's own
// transaction and a retry with the same key replays it.
import { createHash, randomBytes } from 'node:crypto';

import Database from 'better-sqlite3';
import { McpServer } from '@modelcontextprotocol/sdk/server/mcp.js';
import { StreamableHTTPServerTransport } from '@modelcontextprotocol/sdk/server/streamableHttp.js';
import { createMcpExpressApp } from '@modelcontextprotocol/sdk/server/express.js';
import { requireBearerAuth } from '@modelcontextprotocol/sdk/server/auth/middleware/bearerAuth.js';
import { InvalidTokenError } from '@modelcontextprotocol/sdk/server/auth/errors.js';
import * as z from 'zod/v4';

const SCHEMA = `
CREATE TABLE IF NOT EXISTS users (id TEXT PRIMARY KEY, name TEXT NOT NULL UNIQUE);
CREATE TABLE IF NOT EXISTS tokens (
  hash TEXT PRIMARY KEY, user_id TEXT NOT NULL REFERENCES users(id), expires_at INTEGER NOT NULL
);
CREATE TABLE IF NOT EXISTS projects (id INTEGER PRIMARY KEY, name TEXT NOT NULL UNIQUE);
CREATE TABLE IF NOT EXISTS entries (
  id INTEGER PRIMARY KEY,
  date TEXT NOT NULL,
  project INTEGER NOT NULL REFERENCES projects(id),
  hours REAL NOT NULL,
  note TEXT,
  created_by TEXT NOT NULL
);
CREATE INDEX IF NOT EXISTS entries_by_owner_date ON entries (created_by, date);
CREATE TABLE IF NOT EXISTS receipts (
  owner TEXT NOT NULL, operation TEXT NOT NULL, key TEXT NOT NULL,
  input_hash TEXT NOT NULL, result_json TEXT NOT NULL, created_at TEXT NOT NULL,
  PRIMARY KEY (owner, operation, key)
);
`;

const sha256 = (text) => createHash('sha256').update(text).digest('hex');

function open(path) {
  const db = new Database(path);
  // WAL is what anyone tuning SQLite for a server sets; `synchronous` stays at
  // better-sqlite3's default (FULL), foreign keys at its default (ON).
  db.pragma('journal_mode = WAL');
  db.pragma('busy_timeout = 5000');
  db.exec(SCHEMA);
  return db;
}

const [command, path, arg] = process.argv.slice(2);
if (command === 'init' && path && arg) {
  const db = open(path);
  const user = `user_${randomBytes(8).toString('hex')}`;
  const token = randomBytes(32).toString('base64url');
  db.transaction(() => {
    db.prepare('INSERT INTO users (id, name) VALUES (?, ?)').run(user, arg);
    db.prepare('INSERT INTO tokens (hash, user_id, expires_at) VALUES (?, ?, ?)')
      .run(sha256(token), user, Math.floor(Date.now() / 1000) + 86400);
    for (let p = 0; p < 5; p++) db.prepare('INSERT INTO projects (name) VALUES (?)').run(`Project ${p}`);
  })();
  console.log(JSON.stringify({ token, user }));
  db.close();
} else if (command === 'serve' && path) {
  serve(open(path), Number(arg ?? 0));
} else {
  console.error('usage: node server.mjs init <db> <user> | serve <db> [port]');
  process.exit(2);
}

function serve(db, port) {
  const tokenLookup = db.prepare(
    'SELECT users.id AS id, tokens.expires_at AS expires FROM tokens JOIN users ON users.id = tokens.user_id WHERE tokens.hash = ?');
  const receipt = db.prepare(
    'SELECT input_hash, result_json FROM receipts WHERE owner = ? AND operation = ? AND key = ?');
  const insertEntry = db.prepare(
    'INSERT INTO entries (date, project, hours, note, created_by) VALUES (?, ?, ?, ?, ?) RETURNING *');
  const insertReceipt = db.prepare(
    "INSERT INTO receipts (owner, operation, key, input_hash, result_json, created_at) VALUES (?, ?, ?, ?, ?, strftime('%Y-%m-%dT%H:%M:%fZ', 'now'))");
  const listEntries = db.prepare(
    'SELECT * FROM entries WHERE created_by = ? AND date >= ? AND date <= ? ORDER BY date, id LIMIT ?');

  // Receipt lookup, insert and receipt in one BEGIN IMMEDIATE transaction.
  const create = db.transaction((owner, key, values) => {
    const inputHash = sha256(JSON.stringify(values));
    const stored = receipt.get(owner, 'create', key);
    if (stored) {
      if (stored.input_hash !== inputHash) throw new Error('idempotency key reused with different input');
      return JSON.parse(stored.result_json);
    }
    const row = insertEntry.get(values.date, values.project, values.hours, values.note ?? null, owner);
    insertReceipt.run(owner, 'create', key, inputHash, JSON.stringify(row));
    return row;
  });

  const result = (value) => ({ content: [{ type: 'text', text: JSON.stringify(value) }], structuredContent: value });

  const server = (owner) => {
    const mcp = new McpServer({ name: 'ts-mcp-time-sheet', version: '1.0.0' });
    mcp.registerTool('entries_create', {
      description: 'Create a time sheet entry owned by the caller.',
      inputSchema: {
        values: z.object({
          date: z.string().regex(/^\d{4}-\d{2}-\d{2}$/),
          project: z.number().int(),
          hours: z.number().min(0).max(24),
          note: z.string().max(2000).optional(),
        }),
        idempotencyKey: z.string().min(1).max(200),
      },
    }, async ({ values, idempotencyKey }) => result(create.immediate(owner, idempotencyKey, values)));
    mcp.registerTool('entries_list', {
      description: "List the caller's entries in a date range, ordered by date.",
      inputSchema: {
        from: z.string().regex(/^\d{4}-\d{2}-\d{2}$/),
        to: z.string().regex(/^\d{4}-\d{2}-\d{2}$/),
        limit: z.number().int().min(1).max(1000).default(50),
      },
    }, async ({ from, to, limit }) => {
      const rows = listEntries.all(owner, from, to, limit + 1);
      return result({ rows: rows.slice(0, limit), hasMore: rows.length > limit });
    });
    return mcp;
  };

  const app = createMcpExpressApp();
  const auth = requireBearerAuth({
    verifier: {
      async verifyAccessToken(token) {
        const found = tokenLookup.get(sha256(token));
        if (!found || found.expires < Date.now() / 1000) throw new InvalidTokenError('unknown or expired token');
        return { token, clientId: found.id, scopes: [], expiresAt: found.expires, extra: { owner: found.id } };
      },
    },
  });
  app.post('/mcp', auth, async (req, res) => {
    const mcp = server(req.auth.extra.owner);
    const transport = new StreamableHTTPServerTransport({ sessionIdGenerator: undefined, enableJsonResponse: true });
    res.on('close', () => {
      transport.close();
      mcp.close();
    });
    try {
      await mcp.connect(transport);
      await transport.handleRequest(req, res, req.body);
    } catch (error) {
      console.error('ts-mcp: request failed:', error);
      if (!res.headersSent) {
        res.status(500).json({ jsonrpc: '2.0', error: { code: -32603, message: 'Internal server error' }, id: null });
      }
    }
  });
  const listener = app.listen(port, '127.0.0.1', (error) => {
    if (error) {
      console.error('ts-mcp: could not listen:', error);
      process.exit(1);
    }
    console.log(JSON.stringify({ event: 'ready', port: listener.address().port }));
  });
  process.on('SIGTERM', () => process.exit(0));
}
