// Behaviour tests of the people and connected-clients modules' pure parts
// under Node's built-in runner: each client's steps made from the server's
// own MCP URL, when hosted clients can reach Sasha, the names Share
// suggests (never one a member did not type before), user names that
// ignore case, and why the directory keeps a provisioned person out.

import assert from "node:assert/strict";
import { test } from "node:test";

import { clientGuides, reachableFromInternet } from "../tokens.js";
import { directoryHold, sameName, shareNames } from "../users.js";

test("every client's steps name this server's MCP URL", () => {
  const url = "https://studio.example.org/mcp";
  const guides = clientGuides(url);
  assert.deepEqual(
    guides.map((guide) => guide.name),
    ["Claude Desktop", "claude.ai", "ChatGPT", "VS Code", "Cursor"],
  );
  assert.deepEqual(guides.filter((guide) => guide.hosted).map((guide) => guide.id), ["claude-ai", "chatgpt"]);
  const snippet = (id) => JSON.parse(guides.find((guide) => guide.id === id).snippet.text);
  assert.deepEqual(snippet("claude-desktop"), { mcpServers: { sasha: { command: "npx", args: ["-y", "mcp-remote", url] } } });
  assert.deepEqual(snippet("vscode"), { servers: { sasha: { type: "http", url } } });
  assert.deepEqual(snippet("cursor"), { mcpServers: { sasha: { url } } });
  for (const guide of guides) {
    assert.ok(guide.steps.length >= 2, guide.name);
  }
  // mcp-remote takes plain http only on this computer unless told.
  const local = JSON.parse(clientGuides("http://localhost:3007/mcp")[0].snippet.text);
  assert.deepEqual(local.mcpServers.sasha.args, ["-y", "mcp-remote", "http://localhost:3007/mcp"]);
  const lan = JSON.parse(clientGuides("http://sasha.lan:3007/mcp")[0].snippet.text);
  assert.deepEqual(lan.mcpServers.sasha.args, ["-y", "mcp-remote", "http://sasha.lan:3007/mcp", "--allow-http"]);
});

test("hosted clients reach only a public https address", () => {
  for (const url of ["https://studio.example.org/mcp", "https://8.8.8.8/mcp"]) {
    assert.equal(reachableFromInternet(url), true, url);
  }
  for (const url of [
    "http://localhost:3007/mcp",
    "http://studio.example.org/mcp",
    "https://localhost/mcp",
    "https://127.0.0.1:3007/mcp",
    "https://10.1.2.3/mcp",
    "https://192.168.1.20/mcp",
    "https://172.20.0.5/mcp",
    "https://sasha.local/mcp",
    "https://[::1]/mcp",
    "not a url",
  ]) {
    assert.equal(reachableFromInternet(url), false, url);
  }
});

test("Share suggests a member only names they typed before", async () => {
  let asked = 0;
  const listUsers = async () => {
    asked += 1;
    return { users: [{ username: "Zoe", status: "active" }, { username: "old", status: "disabled" }, { username: "Bo", status: "invited" }] };
  };
  const apps = [{ shares: ["mia", "Ola"] }, { shares: ["MIA"] }, {}];
  assert.deepEqual(await shareNames(apps, false, listUsers), ["mia", "Ola"]);
  assert.equal(asked, 0, "a member's suggestions ask the server nothing");
  assert.deepEqual(await shareNames(apps, true, listUsers), ["mia", "Ola", "Zoe"]);
  const failing = async () => {
    throw new Error("offline");
  };
  assert.deepEqual(await shareNames(apps, true, failing), ["mia", "Ola"]);
});

test("user names are one name whatever their case", () => {
  assert.equal(sameName("Ada", "ada"), true);
  assert.equal(sameName("ada", "adam"), false);
  assert.equal(sameName(undefined, ""), true);
});

test("the Users page says why the directory keeps a provisioned person out", () => {
  const person = (status, directory) => ({ status, source: "scim", directory });
  assert.equal(directoryHold({ status: "active", source: "password" }), null);
  assert.equal(directoryHold(person("active", { active: true, held: false, groups: ["Staff"] })), null);
  assert.equal(directoryHold(person("disabled", { active: false, held: false, groups: [] })), "deactivated in the directory");
  assert.equal(directoryHold(person("disabled", { active: true, held: false, groups: [] })), "in no group that gives a role");
  assert.equal(directoryHold(person("disabled", { active: true, held: true, groups: ["Staff"] })), "disabled by an admin here");
});
