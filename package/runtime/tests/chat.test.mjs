// Chat and upload: app-only tools, progress streaming, one at a time.
import { test } from "node:test";
import assert from "node:assert/strict";
import { UUID, flush, load, settle } from "./harness.mjs";

async function connected(options) {
  const t = load(options);
  await t.init();
  return t;
}

function progress(t, progressToken, message, progressValue = 1) {
  t.fromHost({ jsonrpc: "2.0", method: "notifications/progress", params: { progressToken, progress: progressValue, message } });
}

test("chat.execute calls sasha__chat_execute with a progress token; progress replaces the streamed text", async () => {
  const t = await connected();
  const streamed = [];
  const results = [];
  const offStream = t.Sasha.chat.onStream((text, done) => streamed.push([text, done]));
  const offResult = t.Sasha.chat.onResult((text) => results.push(text));
  const outcome = settle(t.Sasha.chat.execute("Summarise", { newSession: true }));
  await flush();
  const [call] = t.calls();
  assert.equal(call.params.name, "sasha__chat_execute");
  assert.deepEqual(call.params.arguments, { prompt: "Summarise", newSession: true });
  const token = call.params._meta.progressToken;
  assert.equal(typeof token, "string");
  assert.deepEqual(Object.keys(call.params._meta), ["progressToken"]);
  progress(t, token, "Hel");
  progress(t, "someone-else", "spoof");
  progress(t, token, "Hello <b>wor");
  progress(t, token, 42);
  await flush();
  assert.deepEqual(streamed, [["Hel", false], ["Hello <b>wor", false]], "full text each time, untouched, other tokens ignored");
  t.answer(call, { text: "Hello <b>world</b>" });
  await flush();
  assert.equal(outcome.value, "Hello <b>world</b>");
  assert.deepEqual(streamed.at(-1), ["Hello <b>world</b>", true]);
  assert.deepEqual(results, ["Hello <b>world</b>"]);
  progress(t, token, "late");
  await flush();
  assert.equal(streamed.length, 3, "progress after the result is ignored");
  offStream();
  offResult();
  const second = settle(t.Sasha.chat.execute("Again"));
  await flush();
  assert.deepEqual(t.calls()[1].params.arguments, { prompt: "Again" }, "newSession only when given");
  assert.notEqual(t.calls()[1].params._meta.progressToken, token);
  t.answer(t.calls()[1], { text: "done" });
  await flush();
  assert.equal(second.value, "done");
  assert.equal(streamed.length, 3, "unsubscribed");
  assert.equal(results.length, 1);
});

test("only one chat or upload at a time (APP_BUSY) while data calls keep flowing", async () => {
  const t = await connected();
  const chat = settle(t.Sasha.chat.execute("long"));
  const busyChat = settle(t.Sasha.chat.execute("another"));
  const busyUpload = settle(t.Sasha.files.upload([new File(["x"], "a.txt", { type: "text/plain" })]));
  const read = settle(t.Sasha.data.list("expenses", {}));
  await flush();
  assert.equal(busyChat.error.code, "APP_BUSY");
  assert.equal(busyChat.error.retryable, true);
  assert.equal(busyUpload.error.code, "APP_BUSY");
  assert.deepEqual(t.calls().map((c) => c.params.name), ["sasha__chat_execute", "app__expense_log__expenses__list"]);
  t.answer(t.calls()[1], { rows: [] });
  await flush();
  assert.deepEqual(read.value, { rows: [] }, "data did not wait for chat");
  t.answer(t.calls()[0], { error: { code: "APP_OPERATION_UNAVAILABLE", message: "chat is not available on this instance", retryable: false, diagnosticId: "0b8f3c1e-5d2a-4e6f-8a9b-1c2d3e4f5a6b" } }, true);
  await flush();
  assert.equal(chat.error.code, "APP_OPERATION_UNAVAILABLE", "the gateway's answer passes through");
  assert.equal(chat.error.diagnosticId, "0b8f3c1e-5d2a-4e6f-8a9b-1c2d3e4f5a6b");
  const after = settle(t.Sasha.chat.execute("now free"));
  await flush();
  assert.equal(after.done, false);
  assert.equal(t.calls().length, 3, "a failure frees the slot");
});

test("chat waits 120 s without progress; progress keeps it alive", async () => {
  const t = await connected();
  const outcome = settle(t.Sasha.chat.execute("slow"));
  await flush();
  const token = t.calls()[0].params._meta.progressToken;
  await t.clock.advance(100000);
  progress(t, token, "still going");
  await t.clock.advance(100000);
  assert.equal(outcome.done, false);
  await t.clock.advance(20000);
  assert.equal(outcome.error.code, "APP_TIMEOUT");
});

test("a chat result without text is APP_CHAT_FAILED; bad prompts are refused locally", async () => {
  const t = await connected();
  const outcome = settle(t.Sasha.chat.execute("x"));
  await flush();
  t.answer(t.calls()[0], { answer: 1 });
  await flush();
  assert.equal(outcome.error.code, "APP_CHAT_FAILED");
  for (const prompt of ["", "   ", 5, undefined]) {
    const bad = settle(t.Sasha.chat.execute(prompt));
    await flush();
    assert.equal(bad.error.code, "APP_INPUT_INVALID");
  }
  assert.equal(t.calls().length, 1);
  assert.throws(() => t.Sasha.chat.onStream("not a function"), TypeError);
});

test("files.upload sends name, type, size and base64 bytes and resolves with the descriptors", async () => {
  const t = await connected();
  const bytes = new Uint8Array(70000).map((_, i) => i % 251);
  const files = [new File(["hello"], "brief.txt", { type: "text/plain" }), new File([bytes], "data.bin")];
  const outcome = settle(t.Sasha.files.upload(files));
  await flush();
  const [call] = t.calls();
  assert.equal(call.params.name, "sasha__files_upload");
  assert.deepEqual(call.params.arguments.files[0], { name: "brief.txt", type: "text/plain", size: 5, dataBase64: "aGVsbG8=" });
  const second = call.params.arguments.files[1];
  assert.deepEqual([second.name, second.type, second.size], ["data.bin", "", 70000]);
  assert.deepEqual(new Uint8Array(Buffer.from(second.dataBase64, "base64")), bytes);
  t.answer(call, { files: [{ original: "brief.txt", converted: "brief.md", extra: "/abs/path" }, { original: "data.bin", converted: "data.md" }] });
  await flush();
  assert.deepEqual(outcome.value, [{ original: "brief.txt", converted: "brief.md" }, { original: "data.bin", converted: "data.md" }]);
});

test("files.upload reports reading, uploading and converting to onProgress", async () => {
  const t = await connected();
  const seen = [];
  const files = [new File(["hello"], "a.txt"), new File(["world!"], "b.txt")];
  const outcome = settle(t.Sasha.files.upload(files, { onProgress: (step) => seen.push(step) }));
  await flush();
  const [call] = t.calls();
  const token = call.params._meta.progressToken;
  assert.match(token, /^sasha-upload-/);
  progress(t, "someone-else", "converting");
  progress(t, token, "converting 2 documents");
  await flush();
  t.answer(call, { files: [{ original: "a.txt", converted: "a.md" }, { original: "b.txt", converted: "b.md" }] });
  await flush();
  assert.equal(outcome.value.length, 2);
  assert.deepEqual(seen.map((step) => step.phase), ["reading", "reading", "reading", "uploading", "converting"]);
  assert.equal(seen.at(-1).total, 11);
  assert.equal(seen.filter((step) => step.phase === "reading").at(-1).loaded, 11);
  // A late progress after the result is ignored.
  progress(t, token, "late");
  await flush();
  assert.equal(seen.length, 5);
});

test("upload limits are checked locally: at most 10 files and 25 MiB", async () => {
  const t = await connected();
  const eleven = Array.from({ length: 11 }, (_, i) => new File(["x"], `f${i}.txt`));
  const big = { name: "big.pdf", type: "application/pdf", size: 25 * 1024 * 1024 + 1, arrayBuffer: () => Promise.reject(new Error("not read")) };
  const outcomes = [settle(t.Sasha.files.upload(eleven)), settle(t.Sasha.files.upload([big]))];
  const empty = settle(t.Sasha.files.upload([]));
  const junk = settle(t.Sasha.files.upload(["not a file"]));
  await flush();
  assert.deepEqual(outcomes.map((o) => o.error.code), ["APP_RESOURCE_LIMIT", "APP_RESOURCE_LIMIT"]);
  assert.equal(empty.error.code, "APP_INPUT_INVALID");
  assert.equal(junk.error.code, "APP_INPUT_INVALID");
  assert.equal(t.calls().length, 0);
  const ten = settle(t.Sasha.files.upload(eleven.slice(1)));
  await flush();
  assert.equal(t.calls().length, 1, "ten files are fine");
  t.answer(t.calls()[0], { files: [] });
  await flush();
  assert.equal(ten.error.code, "APP_UPLOAD_FAILED", "an empty descriptor list is refused");
});

test("an unreadable file is APP_UPLOAD_FAILED and frees the slot", async () => {
  const t = await connected();
  const broken = { name: "x.txt", type: "", size: 1, arrayBuffer: () => Promise.reject(new Error("/home/secret/x.txt: EIO")) };
  const outcome = settle(t.Sasha.files.upload([broken]));
  await flush();
  assert.equal(outcome.error.code, "APP_UPLOAD_FAILED");
  assert.doesNotMatch(outcome.error.message, /secret/);
  assert.match(outcome.error.diagnosticId, UUID);
  const chat = settle(t.Sasha.chat.execute("hi"));
  await flush();
  assert.equal(chat.done, false);
  assert.equal(t.calls().length, 1);
});
