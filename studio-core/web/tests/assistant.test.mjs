// Unit tests of the assistant pane's parts under Node's built-in runner
// (`node --test studio-core/web/tests/`): the server-sent event parser and
// the turn stream (`../api.js`, against a fake fetch), the pure helpers and
// the rendering of confirmation summaries, cards and tool calls
// (`../assistant.js`) into a small fake DOM. The pane itself runs in real
// Chromium in tests/browser/assistant.mjs.

import assert from "node:assert/strict";
import { afterEach, test } from "node:test";

// --- A fake DOM: just what dom.js's `h` and the cards use ------------------

class FakeNode {
  constructor() {
    this.parentNode = null;
  }
  remove() {
    if (this.parentNode) {
      this.parentNode.childNodes = this.parentNode.childNodes.filter((child) => child !== this);
      this.parentNode = null;
    }
  }
}

class FakeText extends FakeNode {
  constructor(text) {
    super();
    this.text = text;
  }
  get textContent() {
    return this.text;
  }
}

class FakeElement extends FakeNode {
  constructor(tag) {
    super();
    this.tagName = tag.toUpperCase();
    this.childNodes = [];
    this.attributes = {};
    this.className = "";
    this.dataset = {};
    this.listeners = {};
    this.disabled = false;
  }
  get hidden() {
    return "hidden" in this.attributes;
  }
  set hidden(value) {
    if (value) {
      this.attributes.hidden = "";
    } else {
      delete this.attributes.hidden;
    }
  }
  setAttribute(name, value) {
    this.attributes[name] = String(value);
  }
  getAttribute(name) {
    return name in this.attributes ? this.attributes[name] : null;
  }
  addEventListener(type, listener) {
    (this.listeners[type] ||= []).push(listener);
  }
  appendChild(child) {
    child.remove();
    child.parentNode = this;
    this.childNodes.push(child);
    return child;
  }
  get textContent() {
    return this.childNodes.map((child) => child.textContent).join("");
  }
  set textContent(value) {
    for (const child of this.childNodes) {
      child.parentNode = null;
    }
    this.childNodes = value === "" ? [] : [new FakeText(String(value))];
  }
  /** Every element below, depth first. */
  *descendants() {
    for (const child of this.childNodes) {
      if (child instanceof FakeElement) {
        yield child;
        yield* child.descendants();
      }
    }
  }
  all(predicate) {
    return [...this.descendants()].filter(predicate);
  }
  byTag(tag) {
    return this.all((element) => element.tagName === tag.toUpperCase());
  }
  byClass(name) {
    return this.all((element) => element.className.split(" ").includes(name));
  }
  button(text) {
    return this.byTag("button").find((button) => button.textContent === text);
  }
  async click() {
    await Promise.all((this.listeners.click || []).map((listener) => listener({ preventDefault() {} })));
  }
}

globalThis.Node = FakeNode;
globalThis.document = {
  createElement: (tag) => new FakeElement(tag),
  createTextNode: (text) => new FakeText(text),
};

const api = await import("../api.js");
const A = await import("../assistant.js");

const realFetch = globalThis.fetch;
afterEach(() => {
  globalThis.fetch = realFetch;
});

const flush = () => new Promise((resolve) => setTimeout(resolve, 0));

// --- The event-stream parser ----------------------------------------------

function parse(chunks) {
  const events = [];
  const parser = api.sseParser((data) => events.push(data));
  for (const chunk of chunks) {
    parser.push(chunk);
  }
  parser.end();
  return events;
}

test("events end at a blank line and their data lines join with newlines", () => {
  assert.deepEqual(parse(['data: {"type":"text","text":"Hi"}\n\n']), ['{"type":"text","text":"Hi"}']);
  assert.deepEqual(parse(["data: one\ndata: two\n\ndata:three\n\n"]), ["one\ntwo", "three"]);
  assert.deepEqual(parse(["data:  spaced\n\n"]), [" spaced"], "only the first space after the colon goes");
});

test("chunks may split anywhere, lines may end in CRLF or CR", () => {
  const whole = 'data: {"type":"done"}\r\n\r\ndata: x\r\rdata: y\n\n';
  const expected = ['{"type":"done"}', "x", "y"];
  assert.deepEqual(parse([whole]), expected);
  for (let cut = 1; cut < whole.length; cut++) {
    assert.deepEqual(parse([whole.slice(0, cut), whole.slice(cut)]), expected, `cut at ${cut}`);
  }
  assert.deepEqual(parse([...whole]), expected, "one character at a time");
});

test("comments, other fields and empty events are ignored; end() flushes the last event", () => {
  assert.deepEqual(parse([": keep-alive\n\nevent: message\nid: 7\nretry: 10\ndata: a\n\n\n\n"]), ["a"]);
  assert.deepEqual(parse(["data: tail"]), ["tail"]);
  assert.deepEqual(parse([":\n\n"]), []);
});

/** A fake fetch answering with an event stream written in `chunks`. */
function streamingFetch(chunks, { status = 200, type = "text/event-stream" } = {}) {
  const calls = [];
  globalThis.fetch = async (url, init) => {
    calls.push({ url, init, body: JSON.parse(init.body) });
    const encoder = new TextEncoder();
    const body = new ReadableStream({
      start(controller) {
        for (const chunk of chunks) {
          controller.enqueue(encoder.encode(chunk));
        }
        controller.close();
      },
    });
    return new Response(body, { status, headers: { "content-type": type } });
  };
  return calls;
}

test("a turn posts the prompt and hands over each event's JSON", async () => {
  const calls = streamingFetch([
    'data: {"type":"text","text":"Wor',
    'king"}\n\ndata: {"type":"toolCall","id":"c1","tool":"listAppFiles","arguments":{"app":"x"}}\n\n',
    "data: not json\n\n",
    ': ping\n\ndata: {"type":"done"}\n\n',
  ]);
  const events = [];
  await api.streamTurn("conv/1", "Hello", { signal: undefined, onEvent: (event) => events.push(event) });
  assert.equal(calls[0].url, "/api/assistant/conversations/conv%2F1/turn");
  assert.equal(calls[0].init.method, "POST");
  assert.equal(calls[0].init.credentials, "same-origin");
  assert.deepEqual(calls[0].body, { prompt: "Hello" });
  assert.deepEqual(
    events.map((event) => event.type),
    ["text", "toolCall", "done"],
  );
  assert.equal(events[0].text, "Working");
  assert.deepEqual(events[1].arguments, { app: "x" });
});

test("a turn refused before its stream throws the envelope", async () => {
  streamingFetch([JSON.stringify({ code: "APP_BUSY", message: "this conversation already has a turn running", retryable: true, diagnosticId: "d-1" })], {
    status: 409,
    type: "application/json",
  });
  await assert.rejects(
    api.streamTurn("c", "Hi", { onEvent: () => assert.fail("no events") }),
    (error) => error instanceof api.ApiError && error.status === 409 && error.code === "APP_BUSY" && error.diagnosticId === "d-1",
  );
});

test("the confirmation and conversation calls", async () => {
  const calls = [];
  globalThis.fetch = async (url, init) => {
    calls.push({ url, method: init.method, body: init.body === undefined ? undefined : JSON.parse(init.body) });
    return { status: 200, ok: true, json: async () => ({ decided: true, approved: false }) };
  };
  assert.deepEqual(await api.decideConfirmation("abc", false, "c 1"), { decided: true, approved: false });
  await api.createConversation("Build me an expense log");
  await api.deleteConversation("c 1");
  await api.listConfirmations();
  await api.cancelTurn("c 1");
  assert.deepEqual(calls, [
    { url: "/api/assistant/confirmations/abc", method: "POST", body: { approve: false, conversation: "c 1" } },
    { url: "/api/assistant/conversations", method: "POST", body: { title: "Build me an expense log" } },
    { url: "/api/assistant/conversations/c%201", method: "DELETE", body: undefined },
    { url: "/api/assistant/confirmations", method: "GET", body: undefined },
    { url: "/api/assistant/conversations/c%201/cancel", method: "POST", body: undefined },
  ]);
});

// --- Pure helpers ---------------------------------------------------------

test("diff lines are told apart", () => {
  assert.equal(A.diffLineKind("+++ b/notes.md"), "meta");
  assert.equal(A.diffLineKind("--- a/notes.md"), "meta");
  assert.equal(A.diffLineKind("@@ -0,0 +1 @@"), "hunk");
  assert.equal(A.diffLineKind("+# Notes"), "add");
  assert.equal(A.diffLineKind("-old"), "del");
  assert.equal(A.diffLineKind(" same"), "context");
});

test("a row change lists every field before and after", () => {
  assert.deepEqual(A.rowFields(null, { title: "Coffee", amount: 3 }), [
    { field: "title", before: "—", after: "Coffee", changed: true },
    { field: "amount", before: "—", after: "3", changed: true },
  ]);
  assert.deepEqual(A.rowFields({ id: "r1", title: "Tea" }, { title: "Coffee" }), [
    { field: "id", before: "r1", after: "r1", changed: false },
    { field: "title", before: "Tea", after: "Coffee", changed: true },
  ]);
  assert.deepEqual(A.rowFields({ title: "Tea" }, null), [{ field: "title", before: "Tea", after: "—", changed: true }]);
});

test("a draft change links to the app's Draft page", () => {
  assert.equal(A.draftHref("expense-log", { kind: "file", draft: true }), "#/apps/expense-log/draft");
  assert.equal(A.draftHref("expense-log", { kind: "publish" }), "#/apps/expense-log/draft");
  assert.equal(A.draftHref("expense-log", { kind: "file", draft: false }), null);
  assert.equal(A.draftHref(null, { kind: "publish" }), null);
  assert.equal(A.draftHref("expense-log", { kind: "row" }), null);
});

test("arguments are pretty-printed, JSON text parsed first", () => {
  assert.equal(A.prettyJson('{"a":1}'), '{\n  "a": 1\n}');
  assert.equal(A.prettyJson({ b: [true] }), '{\n  "b": [\n    true\n  ]\n}');
  assert.equal(A.prettyJson("not json"), "not json");
});

test("a stored transcript joins each result to its call", () => {
  const items = A.transcriptItems([
    { role: "user", content: "Build me an expense log" },
    { role: "assistant", content: "", tool_calls: [{ id: "c1", type: "function", function: { name: "createApp", arguments: '{"app":"expense-log"}' } }] },
    { role: "tool", tool_call_id: "c1", content: "Created", ui: { tool: "createApp", ok: true, declined: false, shown: "Created the app" } },
    { role: "assistant", content: "Done." },
    { role: "tool", tool_call_id: "c9", content: "x", ui: { tool: "writeAppFile", ok: false, declined: true, shown: "declined" } },
    { role: "tool", tool_call_id: "c8", content: "Cancelled: x", ui: { tool: "createApp", ok: false, declined: false, cancelled: true, shown: "Cancelled: x" } },
  ]);
  assert.deepEqual(items, [
    { kind: "user", text: "Build me an expense log" },
    { kind: "call", id: "c1", tool: "createApp", arguments: '{"app":"expense-log"}', result: { ok: true, declined: false, cancelled: false, text: "Created the app" } },
    { kind: "assistant", text: "Done." },
    { kind: "call", id: "c9", tool: "writeAppFile", arguments: "", result: { ok: false, declined: true, cancelled: false, text: "declined" } },
    { kind: "call", id: "c8", tool: "createApp", arguments: "", result: { ok: false, declined: false, cancelled: true, text: "Cancelled: x" } },
  ]);
  assert.equal(A.resultState({ ok: true }), "ok");
  assert.equal(A.resultState({ ok: false, declined: true }), "declined");
  assert.equal(A.resultState({ ok: false }), "error");
  assert.equal(A.resultState({ ok: false, cancelled: true }), "cancelled");
  assert.equal(A.callStatusText("cancelled"), "Cancelled");
});

test("a call with no result waits, runs, or was cancelled with its turn", () => {
  assert.equal(A.openCallState("c1", { running: true, waiting: new Set(["c1"]) }), "waiting");
  assert.equal(A.openCallState("c2", { running: true, waiting: new Set(["c1"]) }), "running");
  // No turn runs any more (it ended, or Studio restarted): never "Running…".
  assert.equal(A.openCallState("c2", { running: false }), "cancelled");
  assert.equal(A.openCallState("c2"), "cancelled");
});

// --- Rendering summaries --------------------------------------------------

test("a file summary shows its path and the diff's lines marked", () => {
  const element = A.renderSummary({
    kind: "file",
    path: "notes.md",
    draft: true,
    change: "create",
    diff: "--- a/notes.md\n+++ b/notes.md\n@@ -0,0 +1 @@\n+# Notes\n",
  });
  assert.match(element.textContent, /New file notes\.md/);
  assert.match(element.textContent, /in the draft/);
  const pre = element.byTag("pre")[0];
  assert.equal(pre.getAttribute("aria-label"), "Changes to notes.md");
  const lines = pre.byTag("span").map((span) => [span.className, span.textContent]);
  assert.deepEqual(lines, [
    ["diff-line diff-meta", "--- a/notes.md\n"],
    ["diff-line diff-meta", "+++ b/notes.md\n"],
    ["diff-line diff-hunk", "@@ -0,0 +1 @@\n"],
    ["diff-line diff-add", "+# Notes\n"],
  ]);
  const live = A.renderSummary({ kind: "file", path: "app.js", draft: false, change: "delete", diff: null });
  assert.match(live.textContent, /Deleted file app\.js/);
  assert.match(live.textContent, /live app/);
  assert.match(live.textContent, /The file is removed\./);
});

test("a row summary is a before/after table", () => {
  const element = A.renderSummary({ kind: "row", change: "update", before: { id: "r1", title: "Tea" }, after: { title: "Coffee" } });
  assert.match(element.textContent, /^Changed row/);
  const rows = element.byTag("tr").map((row) => row.childNodes.map((cell) => cell.textContent));
  assert.deepEqual(rows, [
    ["Field", "Before", "After"],
    ["id", "r1", "r1"],
    ["title", "Tea", "Coffee"],
  ]);
  assert.equal(element.byClass("row-changed").length, 1);
  const created = A.renderSummary({ kind: "row", change: "create", before: null, after: { title: "Coffee" } });
  assert.deepEqual(
    created.byTag("tr").map((row) => row.childNodes.map((cell) => cell.textContent)),
    [
      ["Field", "Before", "After"],
      ["title", "—", "Coffee"],
    ],
  );
});

test("a publish summary lists files, migrations with SQL, tables and read widening", () => {
  const element = A.renderSummary({
    kind: "publish",
    changes: [{ path: "app.js", change: "changed" }, { path: "migrations/002-add-note.sql", change: "added" }],
    migrations: [{ file: "migrations/002-add-note.sql", sql: "ALTER TABLE items ADD COLUMN note TEXT;" }],
    tables: [{ table: "items", change: "changed", columns: [{ column: "note", change: "added", after: "TEXT" }] }],
    readWidened: ["items: every user now reads every row"],
  });
  const text = element.textContent;
  assert.match(text, /Files changed/);
  assert.match(text, /app\.js — changed/);
  assert.match(text, /Migrations/);
  assert.equal(element.byTag("pre")[0].getAttribute("aria-label"), "SQL of migrations/002-add-note.sql");
  assert.match(element.byTag("pre")[0].textContent, /ADD COLUMN note/);
  assert.match(text, /Table items: changed/);
  assert.match(text, /note: added \(TEXT\)/);
  assert.equal(element.byClass("assistant-warning").length, 1);
  assert.match(text, /more people read/);
  const shown = A.renderSummary({
    kind: "publish",
    changes: [{ path: "app.js", change: "changed", unified: "--- a/app.js\n+++ b/app.js\n@@ -1 +1 @@\n-old();\n+fetchEveryone();\n" }],
  });
  const diff = shown.byTag("pre").find((pre) => pre.getAttribute("aria-label") === "Changes to app.js");
  assert.ok(diff, "the code that goes live is on the card, not only its name");
  assert.match(diff.textContent, /\+fetchEveryone\(\);/);
  const quiet = A.renderSummary({ kind: "publish", changes: [], migrations: null, tables: null, readWidened: null });
  assert.match(quiet.textContent, /No file differs/);
  assert.equal(quiet.byClass("assistant-warning").length, 0);
});

test("anything else shows its arguments as JSON", () => {
  const element = A.renderSummary({ kind: "arguments", arguments: { app: "expense-log", name: "Expense log" } });
  assert.equal(element.byTag("pre")[0].textContent, '{\n  "app": "expense-log",\n  "name": "Expense log"\n}');
});

// --- Cards and calls --------------------------------------------------------

const CONFIRMATION = {
  type: "confirmation",
  id: "k1",
  conversation: "conv-1",
  callId: "call_0_writeAppFile",
  tool: "writeAppFile",
  title: "Write an app file",
  sentence: "Adds notes.md in your draft of expense-log: nobody else sees it until the draft is published, and discarding the draft undoes it.",
  app: "expense-log",
  summary: { kind: "file", path: "notes.md", draft: true, change: "create", diff: "+# Notes\n" },
};

test("a card shows what it is about and a draft link; a click disables both buttons and says the outcome", async () => {
  const asked = [];
  const card = A.confirmationCard(CONFIRMATION, { decide: async (approve) => (asked.push(approve), { decided: true, approved: approve }) });
  const text = card.element.textContent;
  assert.match(text, /^Write an app fileAdds notes\.md in your draft of expense-log: nobody else sees it/);
  // The details (tool, diff) come after the sentence, behind "Show details".
  const details = card.element.byTag("details")[0];
  assert.equal(details.byTag("summary")[0].textContent, "Show details");
  assert.match(details.textContent, /App expense-log · tool writeAppFile/);
  assert.match(details.textContent, /\+# Notes/);
  assert.equal(details.getAttribute("open"), null, "closed at first");
  const link = card.element.byTag("a")[0];
  assert.equal(link.textContent, "Open the draft");
  assert.equal(link.getAttribute("href"), "#/apps/expense-log/draft");
  const approve = card.element.button("Approve");
  const deny = card.element.button("Deny");
  await deny.click();
  assert.deepEqual(asked, [false]);
  assert.equal(approve.disabled, true);
  assert.equal(deny.disabled, true);
  assert.equal(card.element.dataset.confirmation, "declined");
  assert.match(card.element.textContent, /Declined$/);
  card.decided(false);
  assert.equal(card.element.dataset.confirmation, "declined");
});

test("a card no longer waiting says why and stays disabled", async () => {
  const card = A.confirmationCard({ ...CONFIRMATION, summary: { kind: "row", change: "create", before: null, after: { title: "Coffee" } } }, {
    decide: async () => {
      throw new api.ApiError({ status: 404, code: "APP_RECORD_NOT_FOUND", message: "no such confirmation is waiting for you", diagnosticId: "d-9" });
    },
  });
  assert.equal(card.element.byTag("a").length, 0, "a row change has no draft link");
  await card.element.button("Approve").click();
  // The sentence reads first; the code and diagnostic id wait under "Details".
  assert.match(card.element.textContent, /No such confirmation is waiting for youDetailsAPP_RECORD_NOT_FOUND · diagnostic id d-9/);
  assert.equal(card.element.button("Approve").disabled, true);
  const timedOut = A.confirmationCard(CONFIRMATION, { decide: async () => ({}) });
  timedOut.decided(false);
  assert.equal(timedOut.element.dataset.confirmation, "declined");
  assert.equal(timedOut.element.button("Deny").disabled, true);
  const ended = A.confirmationCard(CONFIRMATION, { decide: async () => ({}) });
  ended.settle("No longer waiting: the turn ended.");
  assert.match(ended.element.textContent, /No longer waiting/);
  assert.equal(ended.waiting, false);
});

test("a deploy card counts and names its files before any diff, and JSON stays in the details", () => {
  const deploy = A.confirmationCard(
    {
      ...CONFIRMATION,
      title: "Update your app habits",
      sentence: "Makes a new version of your app habits live.",
      summary: {
        kind: "deploy",
        app: "habits",
        change: "update",
        files: [
          { path: "app.js", change: "change", diff: "-a\n+b\n" },
          { path: "chart.js", change: "create", diff: "+c\n" },
          { path: "old.css", change: "delete" },
        ],
        ok: true,
      },
    },
    { decide: async () => ({}) },
  );
  const files = deploy.element.byTag("ul")[0];
  assert.equal(files.getAttribute("aria-label"), "Files");
  assert.deepEqual(
    files.byTag("li").map((item) => item.textContent),
    ["Added (1): chart.js", "Changed (1): app.js", "Removed (1): old.css"],
  );
  const before = deploy.element.textContent.indexOf("Removed (1)");
  assert.ok(before >= 0 && before < deploy.element.textContent.indexOf("+c"), "the counts come before the diff");
  assert.deepEqual(A.fileChanges({ files: [{ path: "a", change: "create" }, { path: "b", change: "change" }] }), { added: ["a"], changed: ["b"], removed: [] });

  const create = A.confirmationCard(
    { ...CONFIRMATION, tool: "createApp", title: "Create the app notes", sentence: "Creates a new app “Notes” (notes).", summary: { kind: "arguments", arguments: { app: "notes" } } },
    { decide: async () => ({}) },
  );
  const text = create.element.textContent;
  assert.ok(text.indexOf("Creates a new app") < text.indexOf("{"), "the sentence, not JSON, comes first");
  assert.match(create.element.byTag("details")[0].textContent, /"app": "notes"/);
});

test("a card that lapsed or expired says so and stays disabled", async () => {
  const card = A.confirmationCard(CONFIRMATION, {
    decide: async () => {
      throw new api.ApiError({ status: 409, code: "APP_CONFLICT", message: "Cancelled: Studio restarted before this change was approved, so nothing was run.", diagnosticId: "d-2" });
    },
  });
  await card.element.button("Approve").click();
  assert.match(card.element.textContent, /Studio restarted/);
  assert.equal(card.element.dataset.confirmation, "gone");
  assert.equal(card.element.button("Approve").disabled, true);
});

test("a tool call block shows its arguments, then its result and state", async () => {
  const block = A.callBlock({ id: "c1", tool: "createApp", arguments: { app: "expense-log" } });
  assert.equal(block.element.tagName, "DETAILS");
  assert.equal(block.element.dataset.state, "running");
  assert.match(block.element.byTag("summary")[0].textContent, /createApp Running…/);
  assert.equal(block.element.byTag("pre")[0].textContent, '{\n  "app": "expense-log"\n}');
  block.setState("waiting");
  assert.match(block.element.textContent, /Waiting for your decision/);
  block.setResult({ ok: false, declined: true, text: "The person declined this change" });
  assert.equal(block.element.dataset.state, "declined");
  assert.match(block.element.byTag("summary")[0].textContent, /Declined/);
  assert.equal(block.element.byTag("pre")[1].textContent, "The person declined this change");
  const stale = A.callBlock({ id: "c2", tool: "createApp", arguments: {}, open: "cancelled" });
  assert.match(stale.element.byTag("summary")[0].textContent, /createApp Cancelled/);
  await flush();
});
