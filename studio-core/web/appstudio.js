// App Studio (`#/studio`, `#/studio/<id>`): every signed-in person's own small
// apps ("member apps", `/api/member-apps`). "Your apps" lists them (name, id,
// size, last change, status, shares) with Open, Edit, History (Revert…,
// confirmed in the page, sending the current revision as `expectedRevision`),
// Share and Delete…. The editor has one textarea per file with its file name
// ("New app" starts from the package the server's New app form builds), Check
// (the validator's diagnostics, each focusing its file's line), Preview (an
// existing app: the files become its draft, previewed as drafts.js previews a
// catalogue draft: `GET /api/apps/:id/draft/resource`, drafts.js's `openPreviewSection`)
// and Deploy (create, or update with `expectedRevision`; a new app's id is the
// platform's, written into its APP.md, so the editor asks only for a name).
// Sharing answers alike for every name, so the page says the server's
// sentence. A disabled app has no Edit and no Share form. With member apps
// switched off, the editor, New app, Check, Preview, Deploy and Revert are
// hidden and one sentence says why; Open and Delete stay. Admin and staff also
// get "Member apps (moderation)" (Disable/Enable, Delete…; admins: Promote to
// catalogue… and the switch "Let members make their own apps").
//
// It must never evaluate the pasted source in the Studio page: files are only
// text in textareas and JSON strings sent to the server (no innerHTML, eval,
// Function, Blob or object URLs, no frames of its own). Source only ever runs
// in the sandbox frame, through the preview host (host.js) or, once deployed,
// the app pane. Every change of state is said in text: the status line for
// progress and outcomes, the alert for failures (code, diagnostic id, and the
// package's diagnostics when there are some).

import * as api from "./api.js";
import { dismissibleBy, errorContent, h, replaceChildren } from "./dom.js";
import { diagnosticText, openPreviewSection } from "./drafts.js";
import { byteText } from "./history.js";
import { shareNameList } from "./users.js";
import { whenText } from "./withdrawn.js";

export const OFF_SENTENCE = "Your administrator has turned off member apps: you can still open and delete the apps you have.";

const NAME_MAX = 80;

function short(revision) {
  return String(revision || "").slice(0, 12);
}

function list(value) {
  return Array.isArray(value) ? value : [];
}

function plural(n, word) {
  return `${n} ${word}${n === 1 ? "" : "s"}`;
}

function escapeHtml(text) {
  return String(text).replace(/[&<>"']/g, (c) => ({ "&": "&amp;", "<": "&lt;", ">": "&gt;", '"': "&quot;", "'": "&#39;" })[c]);
}

// The package a new app starts from: the shape of studio-core/src/create.rs's
// New app package without a table (APP.md, index.html, styles.css, app.js).
const BRIEF =
  "Made in App Studio as a starting point: `index.html` holds the markup, `styles.css` the styles and `app.js` the script. " +
  "The app declares no capability and stores nothing; declare `capabilities.data` and a table when it needs stored data.\n";
const STYLES = `main { max-width: 40rem; margin: 0 auto; padding: 1rem; }
h1 { font-size: 1.5rem; margin: 0 0 0.25rem; }
.description, .status, .empty { color: var(--sasha-color-muted, #6b6b6b); }
`;
const SCRIPT = `"use strict";
// A starting point: replace this with the app's behaviour.
const status = document.getElementById("status");

Sasha.ready().then(
  () => {
    status.textContent = "Ready.";
  },
  (error) => {
    status.textContent = error && typeof error.message === "string" ? error.message : "The app could not start.";
  },
);
`;

/**
 * The files of a new app called `name`: name and description quoted for YAML
 * (a JSON string is a YAML 1.2 double-quoted scalar) and escaped for HTML.
 * The manifest has no `id:`: the platform names the app when it is deployed
 * and writes its id there.
 */
export function templateFiles(name) {
  const title = String(name || "").trim() || "My app";
  const description = "A small app made in App Studio";
  const manifest =
    `---\nname: ${JSON.stringify(title)}\ndescription: ${JSON.stringify(description)}\n` +
    `version: 0.1.0\ntheme: sasha-timesheet-v1\n---\n# ${title}\n\n${description}\n\n${BRIEF}`;
  const index =
    `<!doctype html>\n<html lang="en">\n<head>\n  <meta charset="utf-8">\n` +
    `  <meta name="viewport" content="width=device-width, initial-scale=1">\n  <title>${escapeHtml(title)}</title>\n` +
    `  <link rel="stylesheet" href="styles.css">\n</head>\n<body>\n  <main>\n    <h1>${escapeHtml(title)}</h1>\n` +
    `    <p class="description">${escapeHtml(description)}</p>\n` +
    `    <p id="status" class="status" role="status" aria-live="polite">Starting…</p>\n  </main>\n` +
    `  <script src="app.js"></script>\n</body>\n</html>\n`;
  return { "APP.md": manifest, "index.html": index, "styles.css": STYLES, "app.js": SCRIPT };
}

/** File paths in editing order: APP.md, index.html, then the rest by name. */
export function fileOrder(paths) {
  const rank = (path) => (path === "APP.md" ? 0 : path === "index.html" ? 1 : 2);
  return [...paths].sort((a, b) => rank(a) - rank(b) || (a < b ? -1 : a > b ? 1 : 0));
}

/** Where 1-based `line` starts and ends in `text` (string offsets; the last line when past the end). */
export function lineRange(text, line) {
  const lines = String(text).split("\n");
  const index = Math.min(Math.max(1, Number(line) || 1), lines.length) - 1;
  let start = 0;
  for (let i = 0; i < index; i += 1) {
    start += lines[i].length + 1;
  }
  return { start, end: start + lines[index].length, index };
}

/** "habit-tracker · 2.1 KB · changed <when> · revision <short>" for one app. */
export function appMeta(app, when = whenText) {
  const parts = [app.id, byteText(app.size), `changed ${when(app.updatedAt)}`];
  if (app.revision) {
    parts.push(`revision ${short(app.revision)}`);
  }
  return parts.join(" · ");
}

/** Who an app is shared with, as one sentence. */
export function sharesText(app) {
  const shares = list(app && app.shares);
  return shares.length === 0 ? "Not shared with anyone." : `Shared with ${shares.join(", ")}.`;
}

function statusBadge(app) {
  const disabled = app.status === "disabled";
  return h("span", { class: disabled ? "badge badge-small badge-warning" : "badge badge-small", text: disabled ? "disabled" : "active" });
}

/**
 * The package editor App Studio and the Draft page share: one row per file
 * (its name and its text in a textarea; a binary asset, given as
 * `{base64}`, is kept as it is), and under them the validator's answer, each
 * diagnostic with a file here a button that selects its line. Files are only
 * ever text in textareas here. `say(text)` and `fail(error)` report;
 * `onEdit()` hears of every change a person makes; `fallbackFocus()` is where
 * focus goes when the last file is removed; `removed` says what removing a
 * file means. Answers `{fileList, diagnostics, setFiles(files),
 * addFile(path, content), filesOf(), focusLine(path, line),
 * showDiagnostics(ok, diagnostics, okText), paths()}`.
 */
export function packageEditor({ say, fail, onEdit = () => {}, fallbackFocus = () => null, removed = "it goes when you deploy" }) {
  const fileList = h("ol", { class: "studio-files", "aria-label": "Files" });
  const diagnostics = h("div", { class: "studio-diagnostics" });
  const state = { rows: [], counter: 0 };

  /** One file's row; `content` is its text, or `{base64}` for a binary asset, which is kept as it is. */
  function addFile(path, content) {
    state.counter += 1;
    const n = state.counter;
    const binary = typeof content === "string" ? null : content;
    const text = binary ? "" : content;
    const pathInput = h("input", { id: `studio-path-${n}`, type: "text", value: path, autocomplete: "off", autocapitalize: "none", spellcheck: "false" });
    const label = h("label", { for: `studio-text-${n}` });
    const area = h("textarea", { id: `studio-text-${n}`, class: "studio-source", spellcheck: "false", autocapitalize: "none", autocomplete: "off", wrap: "off" });
    area.value = text;
    area.rows = Math.min(24, Math.max(6, text.split("\n").length + 1));
    const remove = h("button", { type: "button", class: "button button-quiet button-danger", text: "Remove file" });
    const head = h("div", { class: "studio-file-head" }, h("div", { class: "field" }, h("label", { for: `studio-path-${n}`, text: "File name" }), pathInput), remove);
    const kept = binary ? h("p", { class: "hint", text: `A binary asset (${byteText(Math.floor((String(binary.base64 || "").length * 3) / 4))}): it is kept as it is; remove it or give it a new name.` }) : null;
    const element = h("li", { class: "studio-file" }, head, binary ? kept : h("div", { class: "field" }, label, area));
    const row = { pathInput, area, element, binary };
    const relabel = () => {
      const shown = pathInput.value.trim();
      label.textContent = shown ? `Contents of ${shown}` : `Contents of new file ${n}`;
      remove.setAttribute("aria-label", shown ? `Remove file ${shown}` : `Remove new file ${n}`);
    };
    relabel();
    pathInput.addEventListener("input", () => {
      onEdit();
      pathInput.removeAttribute("aria-invalid");
      relabel();
    });
    area.addEventListener("input", () => {
      onEdit();
    });
    remove.addEventListener("click", () => {
      onEdit();
      const index = state.rows.indexOf(row);
      state.rows.splice(index, 1);
      element.remove();
      say(`Removed ${pathInput.value.trim() || "the new file"} from the package; ${removed}.`);
      const next = state.rows[Math.min(index, state.rows.length - 1)];
      const target = next ? next.pathInput : fallbackFocus();
      if (target) {
        target.focus();
      }
    });
    state.rows.push(row);
    fileList.appendChild(element);
    return row;
  }

  function setFiles(files) {
    state.rows = [];
    replaceChildren(fileList);
    for (const path of fileOrder(Object.keys(files))) {
      addFile(path, typeof files[path] === "string" ? files[path] : files[path] || "");
    }
  }

  /** The files as `{path: text}`, or null after saying which name is missing or repeated. */
  function filesOf() {
    const files = {};
    let problem = "";
    let field = null;
    for (const row of state.rows) {
      const path = row.pathInput.value.trim();
      if (path === "" || Object.prototype.hasOwnProperty.call(files, path)) {
        problem = path === "" ? "Give every file a name (for example styles.css)." : `Two files are named ${path}: give each file its own name.`;
        field = row.pathInput;
        break;
      }
      files[path] = row.binary || row.area.value;
    }
    if (!problem && Object.keys(files).length === 0) {
      problem = "The package has no files: add at least APP.md and index.html.";
    }
    if (!problem) {
      return files;
    }
    fail({ message: problem });
    if (field) {
      field.setAttribute("aria-invalid", "true");
      field.focus();
    }
    return null;
  }

  /** Focuses `path`'s textarea with `line` selected and scrolled into view. */
  function focusLine(path, line) {
    const row = state.rows.find((candidate) => candidate.pathInput.value.trim() === path && !candidate.binary);
    if (!row) {
      return;
    }
    row.area.focus();
    if (Number.isInteger(line)) {
      const range = lineRange(row.area.value, line);
      row.area.setSelectionRange(range.start, range.end);
      const height = parseFloat(getComputedStyle(row.area).lineHeight) || 20;
      row.area.scrollTop = Math.max(0, (range.index - 2) * height);
    }
    row.element.scrollIntoView({ block: "nearest" });
  }

  /** The validator's answer under the files: each diagnostic with a file here is a button to its line. */
  function showDiagnostics(ok, found, okText) {
    const problems = list(found);
    const paths = new Set(state.rows.map((row) => row.pathInput.value.trim()));
    const go = (d) => h("button", { type: "button", class: "studio-diagnostic", text: diagnosticText(d), onclick: () => focusLine(d.file, d.line) });
    const item = (d) => h("li", {}, paths.has(d.file) ? go(d) : h("span", { text: diagnosticText(d) }));
    const summary = ok ? h("p", { class: "studio-ok", text: okText }) : h("p", { class: "draft-strong", text: problems.length > 0 ? `The package has ${plural(problems.length, "problem")}:` : "The package does not validate." });
    replaceChildren(diagnostics, summary, problems.length > 0 ? h("ul", { class: "studio-diagnostic-list", "aria-label": "Problems found" }, problems.map(item)) : null);
  }

  return { fileList, diagnostics, setFiles, addFile, filesOf, focusLine, showDiagnostics };
}

/**
 * The page. `options`: `{editId, notice, sandboxOrigin, hostVersion,
 * onOpenApp(id), onNavigate(hash, notice), onAppsChanged(),
 * onPreviewHost(host|null), onUnauthenticated()}`. `startNew` opens a new
 * app's editor on the starting template (the Create page's way in); `editId` opens that app's
 * files in the editor (`#/studio/<id>`); `notice` is said first (what led here,
 * such as a deployment); `onPreviewHost` hears of the preview's host when it
 * opens and closes, so the page closes it with everything else.
 */
export function appStudioPanel({ editId = null, startNew = false, notice = "", sandboxOrigin = "", hostVersion = "0", onOpenApp = () => {}, onNavigate = () => {}, onAppsChanged = () => {}, onPreviewHost = () => {}, onUnauthenticated = () => {} } = {}) {
  const status = h("p", { class: "status", role: "status", "aria-live": "polite" });
  const outcome = h("p", { class: "studio-outcome", hidden: true });
  const alert = h("div", { class: "alert", role: "alert", hidden: true });
  const offNote = h("p", { class: "studio-off", hidden: true, text: OFF_SENTENCE });
  const newButton = h("button", { type: "button", class: "button button-primary", text: "New app", hidden: true });
  const mineList = h("ul", { class: "studio-apps", role: "list", "aria-label": "Your apps" });
  const allList = h("ul", { class: "studio-apps", role: "list", "aria-label": "Every member app" });
  const editorSlot = h("div", { class: "studio-editor-slot" });
  const moderation = h("section", { class: "studio-section studio-moderation", "aria-labelledby": "studio-mod-heading", hidden: true });
  let listing = { enabled: false, canModerate: false, isAdmin: false, apps: [] };
  let everyone = [];
  let settings = null;
  /** The editor's state while it is open, and the preview's host. */
  let editor = null;
  let previewHost = null;
  /** The one inline panel open under an app (`{where: "mine"|"all", id, kind}`), kept across redraws. */
  let inline = null;

  const say = (text) => {
    status.textContent = text;
  };
  const tell = (text) => {
    outcome.hidden = !text;
    outcome.textContent = text || "";
  };
  const clearAlert = () => {
    alert.hidden = true;
    alert.textContent = "";
  };
  /**
   * Shows the server's message, code and diagnostic id, and its diagnostics
   * (unless the editor lists them, `listed`); `extra` says what to do.
   */
  const fail = (error, extra = "", listed = false) => {
    if (error && error.status === 401) {
      onUnauthenticated();
      return;
    }
    const found = error && error.details && !listed ? list(error.details.diagnostics) : [];
    alert.hidden = false;
    const problems = found.length > 0 ? h("ul", { class: "draft-diagnostics", "aria-label": "What the server found" }, found.map((d) => h("li", { text: diagnosticText(d) }))) : null;
    const text = h("div", { class: "draft-alert-text" }, h("p", {}, errorContent(error)), extra ? h("p", { text: extra }) : null, problems);
    replaceChildren(alert, text, h("button", { type: "button", class: "button button-quiet", text: "Dismiss", onclick: clearAlert }));
    say("");
  };

  /** Loads the caller's apps (for moderators every member app; for admins the switch) and draws them. */
  async function load({ quiet = false } = {}) {
    if (!quiet) {
      say("Loading App Studio…");
    }
    try {
      const mine = await api.listMemberApps();
      const all = mine.canModerate ? await api.listMemberApps({ all: true }) : null;
      settings = mine.isAdmin ? await api.settings() : null;
      listing = { enabled: Boolean(mine.enabled), canModerate: Boolean(mine.canModerate), isAdmin: Boolean(mine.isAdmin), apps: list(mine.apps) };
      everyone = all ? list(all.apps) : [];
    } catch (error) {
      fail(error);
      return false;
    }
    if (!quiet) {
      say(listing.apps.length === 0 ? "App Studio is ready." : `You have ${plural(listing.apps.length, "app")}.`);
    }
    offNote.hidden = listing.enabled;
    newButton.hidden = !listing.enabled;
    if (!listing.enabled && editor) {
      closeEditor();
    }
    if (inline && !(inline.where === "mine" ? listing.apps : everyone).some((app) => app.id === inline.id)) {
      inline = null;
    }
    redraw();
    return true;
  }

  function redraw() {
    drawMine();
    drawModeration();
  }

  function itemOf(where, id) {
    return (where === "mine" ? mineList : allList).querySelector(`li[data-app="${CSS.escape(id)}"]`);
  }

  /** Focuses the first control of the open inline panel. */
  function focusInline() {
    const item = inline && itemOf(inline.where, inline.id);
    const target = item && item.querySelector(".studio-inline input, .studio-inline button");
    if (target) {
      target.focus();
    }
  }

  function toggle(where, id, kind) {
    const same = inline && inline.where === where && inline.id === id && inline.kind === kind;
    inline = same ? null : { where, id, kind };
    clearAlert();
    redraw();
    if (!same) {
      focusInline();
      return;
    }
    const item = itemOf(where, id);
    const button = item && item.querySelector(`button[data-kind="${kind}"]`);
    if (button) {
      button.focus();
    }
  }

  function toggleButton(where, app, kind, text, label, danger = false) {
    const open = Boolean(inline && inline.where === where && inline.id === app.id && inline.kind === kind);
    const attributes = { type: "button", class: danger ? "button button-danger" : "button", text, "aria-label": `${label} ${app.name || app.id}`, "aria-expanded": String(open) };
    return h("button", { ...attributes, dataset: { kind }, onclick: () => toggle(where, app.id, kind) });
  }

  /**
   * Runs one change: says `doing`, calls `call`, reloads the listing and the
   * sidebar, and says `done(answer)`. Answers the answer, or null after a failure.
   */
  async function act(doing, call, done, { keepInline = false } = {}) {
    clearAlert();
    tell("");
    say(doing);
    let answer;
    try {
      answer = (await call()) || {};
    } catch (error) {
      fail(error);
      return null;
    }
    if (!keepInline) {
      inline = null;
    }
    await load({ quiet: true });
    await onAppsChanged();
    say(done(answer));
    return answer;
  }

  /** An in-page confirmation in `slot`; `run` answers null when it failed (the buttons come back). */
  function confirmIn(slot, { title, text, yes, primary = false, run, onCancel = null }) {
    const yesButton = h("button", { type: "button", class: primary ? "button button-primary" : "button button-danger", text: yes });
    const no = h("button", { type: "button", class: "button button-quiet", text: "Cancel" });
    // Escape, or work elsewhere on the page, cancels it too.
    const done = dismissibleBy(slot, no);
    no.addEventListener("click", () => (onCancel ? onCancel() : inline && toggle(inline.where, inline.id, inline.kind)));
    yesButton.addEventListener("click", async () => {
      done();
      yesButton.disabled = true;
      no.disabled = true;
      if ((await run()) === null) {
        yesButton.disabled = false;
        no.disabled = false;
      }
    });
    replaceChildren(slot, h("h4", { text: title }), h("p", { text }), h("div", { class: "form-actions" }, yesButton, no));
    yesButton.focus();
  }

  // -------------------------------------------------------------------------
  // Your apps

  function drawMine() {
    const empty = listing.enabled ? "You have no apps yet. Start one with New app." : "You have no apps.";
    replaceChildren(mineList, listing.apps.length === 0 ? h("li", { class: "studio-empty", text: empty }) : listing.apps.map((app) => appItem("mine", app)));
  }

  /** One app of either list, with its buttons and, when open, its inline panel. */
  function appItem(where, app) {
    const name = app.name || app.id;
    const mine = where === "mine";
    const slot = h("div", { class: "studio-inline" });
    const disabled = app.status === "disabled";
    const author = app.author ? app.author.username : "someone unknown";
    const verb = disabled ? "Enable" : "Disable";
    const flipped = disabled ? `Enabled ${name}: its author and the people it is shared with can open it again.` : `Disabled ${name}: nobody can open it until it is enabled again.`;
    const flip = () => act(`${disabled ? "Enabling" : "Disabling"} ${name}…`, () => (disabled ? api.enableMemberApp(app.id) : api.disableMemberApp(app.id)), () => flipped);
    const buttons = mine
      ? [
          disabled ? null : h("button", { type: "button", class: "button button-primary", text: "Open", "aria-label": `Open ${name}`, onclick: () => onOpenApp(app.id) }),
          listing.enabled && !disabled ? h("button", { type: "button", class: "button", text: "Edit", "aria-label": `Edit ${name}`, onclick: () => onNavigate(`#/studio/${app.id}`, "") }) : null,
          toggleButton(where, app, "history", "History", "History of"),
          toggleButton(where, app, "share", "Share", "Share"),
          toggleButton(where, app, "delete", "Delete…", "Delete", true),
        ]
      : [
          h("button", { type: "button", class: "button", text: verb, "aria-label": `${verb} ${name}`, onclick: flip }),
          toggleButton(where, app, "delete", "Delete…", "Delete", true),
          listing.isAdmin ? toggleButton(where, app, "promote", "Promote to catalogue…", "Promote to catalogue:") : null,
        ];
    const item = h(
      "li",
      { class: "studio-app", dataset: { app: app.id } },
      h("div", { class: "studio-app-heading" }, h("h3", { class: "studio-app-name", text: name }), statusBadge(app)),
      h("p", { class: "studio-meta", text: mine ? appMeta(app) : `${app.id} · by ${author} · ${byteText(app.size)} · changed ${whenText(app.updatedAt)}` }),
      mine ? h("p", { class: "studio-meta studio-shares-line", text: sharesText(app) }) : null,
      mine && disabled ? h("p", { class: "hint", text: "An admin or staff member disabled this app: nobody can open it, and you cannot change, preview or share it, until it is enabled again." }) : null,
      h("div", { class: "form-actions" }, buttons),
      slot,
    );
    const kind = inline && inline.where === where && inline.id === app.id ? inline.kind : null;
    const draw = { history: drawHistory, share: drawShare, delete: (a, s) => drawDelete(a, s, !mine), promote: drawPromote }[kind];
    if (draw) {
      draw(app, slot);
    }
    return item;
  }

  function drawDelete(app, slot, moderating) {
    const name = app.name || app.id;
    const author = app.author ? app.author.username : "someone unknown";
    confirmIn(slot, {
      title: `Delete ${name}?`,
      text: moderating
        ? `${name} (by ${author}) is deleted for its author and everyone it is shared with. This cannot be undone.`
        : `${name} is deleted for you and everyone you shared it with. This cannot be undone.`,
      yes: "Yes, delete",
      run: () => {
        if (editor && editor.app && editor.app.id === app.id) {
          closeEditor();
        }
        return act(`Deleting ${name}…`, () => api.deleteMemberApp(app.id), () => `Deleted ${name}.`);
      },
    });
  }

  function drawShare(app, slot) {
    const name = app.name || app.id;
    const id = `studio-share-${app.id}`;
    // Suggests only names this person may already see (users.js).
    const names = shareNameList(`${id}-names`, listing.apps.filter((mine) => mine.mine !== false), listing.canModerate);
    const input = h("input", { id, type: "text", autocomplete: "off", autocapitalize: "none", spellcheck: "false", list: `${id}-names` });
    const add = h("button", { type: "submit", class: "button", text: "Add" });
    const share = async (event) => {
      event.preventDefault();
      const username = input.value.trim();
      if (username === "") {
        fail({ message: "Type the user name of the person to share with." });
        input.focus();
        return;
      }
      add.disabled = true;
      const answer = await act(`Sharing ${name} with ${username}…`, () => api.shareMemberApp(app.id, username), (done) => done.shared || `${name} is shared with ${username}.`, { keepInline: true });
      if (answer === null) {
        add.disabled = false;
        input.focus();
        return;
      }
      focusInline();
    };
    const unshare = async (username) => {
      const answer = await act(`Removing ${username} from ${name}…`, () => api.unshareMemberApp(app.id, username), (done) => done.shared || `${name} is no longer shared with ${username}.`, { keepInline: true });
      if (answer !== null) {
        focusInline();
      }
    };
    const shares = list(app.shares);
    const remove = (username) => h("button", { type: "button", class: "button button-quiet button-small", text: "Remove", "aria-label": `Remove ${username}`, onclick: () => unshare(username) });
    const person = (username) => h("li", {}, h("span", { class: "studio-share-name", text: username }), remove(username));
    replaceChildren(
      slot,
      h("h4", { text: `Share ${name}` }),
      h("p", { class: "hint", text: "People you share with can open and use the app, but not change it. Check the spelling: sharing never says whether someone uses a name here." }),
      app.status === "disabled" ? null : h("form", { class: "studio-share-form", novalidate: true, onsubmit: share }, h("div", { class: "field" }, h("label", { for: id, text: "Share with (user name)" }), input, names), add),
      shares.length === 0 ? h("p", { class: "hint", text: "Not shared with anyone yet." }) : h("ul", { class: "studio-shares", "aria-label": `People ${name} is shared with` }, shares.map(person)),
    );
  }

  async function drawHistory(app, slot) {
    const name = app.name || app.id;
    replaceChildren(slot, h("h4", { text: `History of ${name}` }), h("p", { class: "hint", text: "Loading the revisions…" }));
    let answer;
    try {
      answer = await api.memberAppRevisions(app.id);
    } catch (error) {
      replaceChildren(slot);
      fail(error);
      return;
    }
    if (!slot.isConnected) {
      return;
    }
    const revisions = list(answer.revisions);
    const current = revisions.find((revision) => revision.current);
    const expected = current ? current.revision : app.revision;
    const confirmSlot = h("div", { class: "studio-confirm" });
    const revert = (revision) =>
      confirmIn(confirmSlot, {
        title: `Revert ${name} to revision ${short(revision.revision)}?`,
        text: `Its files replace the current ones (${short(expected)}) for you and everyone you share it with. Records are kept.`,
        yes: "Yes, revert",
        onCancel: () => {
          replaceChildren(confirmSlot);
          focusInline();
        },
        run: () => act(`Reverting ${name}…`, () => api.revertMemberApp(app.id, revision.revision, expected), (done) => `Reverted ${name} to revision ${short(done.app ? done.app.revision : revision.revision)}.`, { keepInline: true }),
      });
    const items = revisions.map((revision) => {
      const files = Array.isArray(revision.files) ? revision.files.length : Number(revision.files) || 0;
      const label = `Revert ${name} to revision ${short(revision.revision)}…`;
      const button = !revision.current && listing.enabled ? h("button", { type: "button", class: "button button-small button-danger", text: "Revert…", "aria-label": label, onclick: () => revert(revision) }) : null;
      const line = h("div", { class: "studio-revision-line" }, h("span", { class: "studio-revision-summary", text: revision.summary || "(no summary)" }), revision.current ? h("span", { class: "badge badge-small", text: "current" }) : null, button);
      const meta = `${whenText(revision.recordedAt)} · ${byteText(revision.bytes)} · ${plural(files, "file")} · ${short(revision.revision)}`;
      return h("li", { class: "studio-revision", dataset: { revision: revision.revision } }, line, h("p", { class: "studio-meta", text: meta }));
    });
    replaceChildren(
      slot,
      h("h4", { text: `History of ${name}` }),
      revisions.length === 0 ? h("p", { class: "hint", text: "No revision is recorded yet." }) : h("ol", { class: "studio-revisions", "aria-label": `Revisions of ${name}, newest first` }, items),
      confirmSlot,
    );
  }

  // -------------------------------------------------------------------------
  // Moderation (admin and staff)

  function drawModeration() {
    moderation.hidden = !listing.canModerate;
    if (!listing.canModerate) {
      replaceChildren(moderation);
      return;
    }
    replaceChildren(allList, everyone.length === 0 ? h("li", { class: "studio-empty", text: "No member has made an app yet." }) : everyone.map((app) => appItem("all", app)));
    replaceChildren(moderation, h("h2", { id: "studio-mod-heading", text: "Member apps (moderation)" }), listing.isAdmin && settings ? memberSwitch() : null, allList);
  }

  /** Admins: "Let members make their own apps", bound to `PUT /api/settings/member-apps`. */
  function memberSwitch() {
    const box = h("input", { type: "checkbox", id: "studio-members-switch", checked: Boolean(settings.memberAppsEnabled), "aria-describedby": "studio-members-switch-hint" });
    box.addEventListener("change", async () => {
      const enabled = box.checked;
      box.disabled = true;
      clearAlert();
      say(enabled ? "Turning member apps on…" : "Turning member apps off…");
      let answer;
      try {
        answer = await api.setMemberAppsEnabled(enabled);
      } catch (error) {
        box.checked = !enabled;
        box.disabled = false;
        fail(error);
        return;
      }
      await load({ quiet: true });
      const on = "Member apps are on: members can make, change and share their own apps.";
      say(answer && answer.memberAppsEnabled ? on : "Member apps are off: members can still open and delete the apps they have, but cannot make or change any.");
      const again = moderation.querySelector("#studio-members-switch");
      if (again) {
        again.focus();
      }
    });
    const hint = "Off: nobody can make or change a member app; the apps that exist keep working and can still be deleted.";
    return h("div", { class: "check-field" }, box, h("div", {}, h("label", { for: "studio-members-switch", text: "Let members make their own apps" }), h("p", { class: "hint", id: "studio-members-switch-hint", text: hint })));
  }

  function drawPromote(app, slot) {
    const name = app.name || app.id;
    confirmIn(slot, {
      title: `Promote ${name} to the catalogue?`,
      text: `${name} becomes a catalogue app: admins and staff manage it and grant access to it like any other app.`,
      yes: "Yes, promote",
      primary: true,
      run: () => act(`Promoting ${name}…`, () => api.promoteMemberApp(app.id), (done) => `Promoted ${name} to the catalogue as ${done.promoted || app.id}.`),
    });
  }

  // -------------------------------------------------------------------------
  // The editor

  async function closePreview() {
    const host = previewHost;
    const slot = editor ? editor.previewSlot : null;
    previewHost = null;
    if (host) {
      onPreviewHost(null);
      await host.close();
    }
    if (slot) {
      replaceChildren(slot);
    }
  }

  function closeEditor() {
    closePreview();
    editor = null;
    replaceChildren(editorSlot);
  }

  /** Opens the editor on `files` ({path: text}); `app` is null for a new app. */
  function openEditor(app, files) {
    closePreview();
    const fresh = app === null;
    const state = { app, revision: app ? app.revision : null, pristine: fresh, nameInput: null };
    editor = state;
    state.editor = packageEditor({
      say,
      fail,
      onEdit: () => {
        state.pristine = false;
      },
      fallbackFocus: () => state.buttons[0],
    });
    state.fileList = state.editor.fileList;
    state.diagnostics = state.editor.diagnostics;
    state.previewSlot = h("div", { class: "studio-preview-slot" });
    const addFile = h("button", { type: "button", class: "button", text: "Add file" });
    const check = h("button", { type: "button", class: "button", text: "Check", onclick: () => checkFiles(state) });
    const preview = fresh ? null : h("button", { type: "button", class: "button", text: "Preview", title: "Save these files as the app's draft and open it here, over a scratch copy of the data", onclick: () => openPreview(state) });
    const deployButton = h("button", { type: "button", class: "button button-primary", text: "Deploy", onclick: () => deploy(state) });
    const close = h("button", { type: "button", class: "button button-quiet", text: "Close editor" });
    state.buttons = [addFile, check, preview, deployButton].filter(Boolean);
    state.previewButton = preview;
    if (fresh) {
      state.nameInput = h("input", { id: "studio-name", type: "text", maxlength: NAME_MAX, autocomplete: "off", "aria-describedby": "studio-name-hint" });
      state.nameInput.addEventListener("input", () => {
        state.nameInput.removeAttribute("aria-invalid");
        if (state.pristine) {
          // The template follows the name until a file is edited.
          state.editor.setFiles(templateFiles(state.nameInput.value));
        }
      });
    }
    state.editor.setFiles(files);
    addFile.addEventListener("click", () => {
      state.pristine = false;
      state.editor.addFile("", "").pathInput.focus();
      say("Added a file: give it a name and its contents.");
    });
    close.addEventListener("click", () => {
      if (!fresh) {
        onNavigate("#/studio", "");
        return;
      }
      closeEditor();
      say("The editor is closed; nothing was deployed.");
      newButton.focus();
    });
    const heading = h("h2", { id: "studio-editor-heading", tabindex: "-1", text: fresh ? "New app" : `Editing ${app.name || app.id}` });
    // Kept so a deploy can say what the app is now (its name and revision may change).
    state.heading = heading;
    state.meta = fresh ? null : h("p", { class: "studio-meta", text: appMeta(app) });
    const nameHint = `What people see, at most ${NAME_MAX} characters. Until you edit a file, the files below follow it.`;
    replaceChildren(
      editorSlot,
      h(
        "section",
        { class: "studio-section studio-editor", "aria-labelledby": "studio-editor-heading" },
        h("div", { class: "panel-header" }, heading, close),
        fresh
          ? h("div", { class: "field" }, h("label", { for: "studio-name", text: "Name" }), state.nameInput, h("p", { class: "hint", id: "studio-name-hint", text: nameHint }))
          : state.meta,
        h("p", { class: "hint", text: "Paste or type each file of the package. Check asks the validator; nothing runs until you preview or deploy, and then only in the app's sandbox." }),
        state.fileList,
        h("div", { class: "form-actions" }, addFile),
        state.diagnostics,
        h("div", { class: "form-actions studio-editor-actions" }, check, preview, deployButton),
        state.previewSlot,
      ),
    );
    (state.nameInput || heading).focus();
  }

  function busy(state, on) {
    for (const button of state.buttons) {
      button.disabled = on;
    }
  }

  /** Runs `call` with the editor's buttons disabled, saying `doing`; answers its answer, or null after `failed(error)`. */
  async function attempt(state, doing, call, failed = (error) => fail(error)) {
    clearAlert();
    busy(state, true);
    say(doing);
    try {
      return (await call()) || {};
    } catch (error) {
      failed(error);
      return null;
    } finally {
      busy(state, false);
    }
  }

  async function checkFiles(state) {
    const files = state.editor.filesOf();
    const answer = files && (await attempt(state, "Checking the package…", () => api.checkMemberApp(state.app ? state.app.id : null, files)));
    if (!answer) {
      return;
    }
    const found = list(answer.diagnostics);
    state.editor.showDiagnostics(Boolean(answer.ok), found, "The package is valid: it can be deployed.");
    say(answer.ok ? "Checked: no problems found." : `Checked: ${plural(found.length, "problem")} found. Choose one to go to its line.`);
  }

  /** Why a deploy was refused, with the diagnostics under the files when the package is invalid. */
  function deployFailed(state, error) {
    const reason = error && error.details ? error.details.reason : "";
    const found = error && error.details ? list(error.details.diagnostics) : [];
    if (found.length > 0) {
      state.editor.showDiagnostics(false, found, "");
    }
    const stale = "The app changed since you opened it (another tab, or a revert). Open it again with Edit to get its latest files, then apply your change again.";
    const invalid = "Nothing was deployed: fix the problems listed under the files, then deploy again.";
    fail(error, reason === "stale-revision" ? stale : reason === "member-apps-off" ? OFF_SENTENCE : found.length > 0 ? invalid : "", found.length > 0);
    if (reason === "member-apps-off") {
      load({ quiet: true });
    }
  }

  async function deploy(state) {
    const files = state.editor.filesOf();
    if (!files) {
      return;
    }
    const fresh = state.app === null;
    const name = fresh ? state.nameInput.value.trim() : state.app.name || state.app.id;
    if (fresh && name === "") {
      fail({ message: "Enter a name for the app." });
      state.nameInput.setAttribute("aria-invalid", "true");
      state.nameInput.focus();
      return;
    }
    tell("");
    // The preview's scratch data is not deployed; its frame goes first.
    await closePreview();
    const call = () => (fresh ? api.createMemberApp(name, files) : api.updateMemberApp(state.app.id, files, state.revision));
    const answer = await attempt(state, `Deploying ${name}…`, call, (error) => deployFailed(state, error));
    if (!answer) {
      return;
    }
    const deployed = answer.app || {};
    if (fresh) {
      await onAppsChanged();
      onNavigate(`#/studio/${deployed.id}`, `Deployed ${deployed.name || name} as ${deployed.id}: it is in your Apps list now.`);
      return;
    }
    state.app = deployed;
    state.revision = deployed.revision;
    // The editor's header follows the deployed app.
    state.heading.textContent = `Editing ${deployed.name || deployed.id || name}`;
    if (state.meta && deployed.id) {
      state.meta.textContent = appMeta(deployed);
    }
    replaceChildren(state.diagnostics);
    const text = `Deployed ${deployed.name || name}, revision ${short(deployed.revision)}: it is live for you and everyone you share it with.`;
    await load({ quiet: true });
    await onAppsChanged();
    // Said once, in the outcome line (the status line would say it twice).
    tell(text);
    say("");
  }

  /**
   * Saves the files as the app's draft, then previews it exactly as drafts.js
   * previews a catalogue draft: the draft's resource in the preview host, so
   * every /mcp call carries Sasha-Preview and works on a scratch copy of the data.
   */
  async function openPreview(state) {
    const files = state.editor.filesOf();
    if (!files) {
      return;
    }
    const app = state.app;
    await closePreview();
    const saved = await attempt(state, "Saving the draft for the preview…", () => api.draftMemberApp(app.id, files));
    if (!saved) {
      return;
    }
    state.editor.showDiagnostics(Boolean(saved.ok), list(saved.diagnostics), "The draft is valid.");
    if (!saved.ok) {
      say("The draft does not validate: the preview opens once the problems listed are fixed.");
      return;
    }
    const resource = await attempt(state, "Loading the preview…", () => api.draftResource(app.id));
    if (!resource || editor !== state) {
      return;
    }
    const host = openPreviewSection({
      slot: state.previewSlot,
      heading: `Preview of ${app.name || app.id} (not deployed)`,
      sandboxOrigin,
      app: { id: app.id, revision: state.revision, name: app.name || app.id },
      resource,
      hostVersion,
      previewId: saved.previewId,
      isCurrent: (opened) => previewHost === opened,
      say,
      fail,
      onUnauthenticated,
      onClose: async () => {
        await closePreview();
        say("The preview is closed.");
        state.previewButton.focus();
      },
    });
    previewHost = host;
    onPreviewHost(host);
  }

  async function openForEditing(id) {
    if (!listing.enabled) {
      return;
    }
    say("Loading the app's files…");
    let answer;
    try {
      answer = await api.getMemberApp(id);
    } catch (error) {
      fail(error);
      return;
    }
    // A saved draft (the assistant's, or an earlier Preview) opens instead of
    // the live files: preview it, then deploy it.
    const draft = answer.draft && typeof answer.draft === "object" ? answer.draft : null;
    openEditor(answer.app, draft ? draft.files || {} : answer.files || {});
    // A notice (such as a deployment) is already the outcome line: said once.
    say(
      draft
        ? `Editing the saved draft of ${answer.app.name || id} (the live app is unchanged): Preview it, then Deploy.`
        : `Editing ${answer.app.name || id}: ${plural(editor.rows.length, "file")}.`,
    );
  }

  newButton.addEventListener("click", () => {
    clearAlert();
    tell("");
    openEditor(null, templateFiles(""));
    say("A new app from the starting template: name it, then change its files.");
  });

  const panel = h(
    "section",
    { class: "panel studio-panel", "aria-labelledby": "studio-heading" },
    h("div", { class: "panel-header" }, h("h1", { id: "studio-heading", tabindex: "-1", text: "App Studio" })),
    h("p", { class: "hint", text: "Make your own small apps, change them, and share them with the people you work with." }),
    alert,
    outcome,
    status,
    offNote,
    h("section", { class: "studio-section", "aria-labelledby": "studio-mine-heading" }, h("div", { class: "panel-header studio-mine-header" }, h("h2", { id: "studio-mine-heading", text: "Your apps" }), newButton), mineList),
    editorSlot,
    moderation,
  );
  tell(notice);
  load().then((loaded) => {
    if (loaded && startNew && !newButton.hidden) {
      // Create's "Write it myself": straight into a new app's editor.
      newButton.click();
    } else if (loaded && editId) {
      openForEditing(editId);
    }
  });
  return panel;
}
