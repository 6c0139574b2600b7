// The Draft page (admin and staff who manage the app, with `apps:write`): the
// app's one draft — a copy-on-write working set of its files that an
// assistant or an MCP client edits with the source tools and `draft: true` —
// for a person to review, preview and then publish or discard.
//
// It shows who started the draft and when, whether it validates (or its
// diagnostics), a warning when the live app moved since it began (publishing is
// then refused), every changed file with its unified diff, and the schema
// review: the migrations publishing would apply, table and column changes,
// drift (which blocks publishing) and read widening (which needs an admin).
// "Preview" opens the draft's UI in this page with `createHost({preview})`, so
// every /mcp call carries `Sasha-Preview` and works on a scratch copy of the
// data. "Publish…" and "Discard draft…" ask again in the panel; publishing
// posts the draft's `baseRevision` as `expectedRevision`, so a change made to
// the live app meanwhile is refused, not overwritten, and the `contentHash` of
// the draft shown, so a change made to the draft after this page drew it (by
// an assistant or another person) is refused, not published unseen: the page
// then shows the draft as it is now to review again.
//
// "Start a draft" (and "Edit files" on a draft) opens App Studio's package
// editor (appstudio.js's `packageEditor`) on the draft's files: Check writes
// each changed file into the draft and deletes each removed one
// (`PUT|DELETE /api/apps/:id/draft/files`, the source tools' own rules, each
// write carrying the version it read), then reviews the draft again and lists
// its diagnostics under the files, each a button to its line. Publish stays
// disabled until the draft differs from the live app and validates.

import * as api from "./api.js";
import { dismissibleBy, errorContent, h, replaceChildren } from "./dom.js";
import { packageEditor } from "./appstudio.js";
import { createHost } from "./host.js";
import { ROLES } from "./vocabulary.js";

const CHANGE_TEXT = { added: "added", removed: "removed", changed: "changed" };

export const PREVIEW_BANNER = "Preview — a scratch copy of the data with the draft's migrations; nothing here changes live records.";

/**
 * Draws a draft's preview into `slot` (a heading, the banner with Close
 * preview, the frame) and starts its host with `preview: previewId`, so every
 * /mcp call carries `Sasha-Preview` and works on scratch data. The Draft page
 * and App Studio both preview through this. `isCurrent(host)` says whether
 * the caller still shows that host (a later open replaces it); `onClose` runs
 * on Close preview. Answers the host.
 */
export function openPreviewSection({ slot, heading, sandboxOrigin, app, resource, hostVersion, previewId, isCurrent, say, fail, onUnauthenticated, onClose }) {
  const frameSlot = h("div", { class: "frame-slot draft-preview-frame" });
  const closeButton = h("button", { type: "button", class: "button", text: "Close preview" });
  closeButton.addEventListener("click", async () => {
    closeButton.disabled = true;
    await onClose();
  });
  const headingId = `preview-heading-${app.id}`;
  replaceChildren(
    slot,
    h(
      "section",
      { class: "draft-preview", "aria-labelledby": headingId },
      h("h3", { id: headingId, text: heading }),
      h("div", { class: "draft-preview-banner", role: "note" }, h("p", { class: "draft-strong", text: PREVIEW_BANNER }), closeButton),
      frameSlot,
    ),
  );
  // createHost reports its first state before it returns: `host` is set after.
  let host = null;
  const current = () => host === null || isCurrent(host);
  host = createHost({
    iframeParent: frameSlot,
    sandboxOrigin,
    app,
    resource,
    hostVersion,
    preview: previewId,
    onStateChange: (state) => {
      const text = { loading: "Starting the preview…", initializing: "Starting the preview…", ready: "The preview is open." }[state];
      if (current() && text) {
        say(text);
      }
    },
    onError: (envelope) => {
      if (current()) {
        fail(envelope);
      }
    },
    onUnauthenticated: () => onUnauthenticated(),
  });
  closeButton.focus();
  return host;
}
export const STALE_WARNING = "The live app changed since this draft began; publishing is refused — discard it and start again.";

function short(revision) {
  return String(revision || "").slice(0, 12);
}

function when(seconds) {
  const date = new Date(Number(seconds) * 1000);
  return Number.isNaN(date.getTime()) ? String(seconds) : date.toLocaleString();
}

function list(value) {
  return Array.isArray(value) ? value : [];
}

/** One diagnostic as "file:line — reason (CODE)" (the line only when known). */
export function diagnosticText(diagnostic) {
  const file = diagnostic && diagnostic.file ? String(diagnostic.file) : "(package)";
  const line = diagnostic && Number.isInteger(diagnostic.line) ? `:${diagnostic.line}` : "";
  const reason = diagnostic && diagnostic.reason ? String(diagnostic.reason) : "no reason given";
  const code = diagnostic && diagnostic.code ? ` (${diagnostic.code})` : "";
  return `${file}${line} — ${reason}${code}`;
}

function diagnosticList(diagnostics, label) {
  return h(
    "ul",
    { class: "draft-diagnostics", "aria-label": label },
    diagnostics.map((diagnostic) => h("li", { text: diagnosticText(diagnostic) })),
  );
}

/** A column change as one line: "note: added (TEXT)", "title: changed (TEXT → TEXT NOT NULL)". */
function columnText(column) {
  const name = column.column || "(column)";
  const change = CHANGE_TEXT[column.change] || column.change || "changed";
  const before = column.before !== undefined && column.before !== null ? String(column.before) : null;
  const after = column.after !== undefined && column.after !== null ? String(column.after) : null;
  let shape = "";
  if (before !== null && after !== null) {
    shape = ` (${before} → ${after})`;
  } else if (after !== null) {
    shape = ` (${after})`;
  } else if (before !== null) {
    shape = ` (was ${before})`;
  }
  return `${name}: ${change}${shape}`;
}

function tableItems(tables) {
  return tables.map((table) =>
    h(
      "li",
      { class: "draft-table" },
      h("span", { class: "draft-table-name", text: `Table ${table.table}: ${CHANGE_TEXT[table.change] || table.change}` }),
      table.declaration === "undeclared" ? h("span", { class: "badge badge-small badge-warning", text: "no longer declared in APP.md" }) : null,
      table.declaration === "declared" ? h("span", { class: "badge badge-small badge-note", text: "newly declared in APP.md" }) : null,
      list(table.columns).length > 0 ? h("ul", { class: "draft-columns" }, list(table.columns).map((column) => h("li", { text: columnText(column) }))) : null,
    ),
  );
}

function migrationBlocks(migrations, open) {
  return migrations.map((migration) =>
    h(
      "details",
      { class: "draft-migration", open },
      h("summary", { text: migration.file }),
      h("pre", { class: "draft-diff", "aria-label": `SQL of ${migration.file}`, text: migration.sql || "" }),
    ),
  );
}

function readWideningWarning(review) {
  const widened = list(review.readWidened);
  if (widened.length === 0 && !review.needsAdmin) {
    return null;
  }
  return h(
    "div",
    { class: "draft-warning draft-read-widened" },
    widened.length > 0 ? h("p", { class: "draft-strong", text: "This draft lets more people read records the app already holds:" }) : null,
    widened.length > 0 ? h("ul", { class: "draft-diagnostics", "aria-label": "Read widening" }, widened.map((reason) => h("li", { text: String(reason) }))) : null,
    widened.length > 0 ? h("p", { text: "Check that everyone who can use the app may see those records." }) : null,
    h("p", { class: "draft-strong", text: "Only an admin can publish this draft." }),
  );
}

/**
 * The panel. `options`: `{app, sandboxOrigin, hostVersion, userRole,
 * onPreviewHost(host|null), onPublished(published), onClose(),
 * onUnauthenticated()}`. `onPreviewHost` hears of the preview's host when it
 * opens and closes, so the page can close it with the app.
 */
export function draftPanel({
  app,
  sandboxOrigin = "",
  hostVersion = "0",
  userRole = "",
  onPreviewHost = () => {},
  onPublished = () => {},
  onClose = () => {},
  onUnauthenticated = () => {},
}) {
  const status = h("p", { class: "status", role: "status", "aria-live": "polite" });
  const alert = h("div", { class: "alert draft-alert", role: "alert", hidden: true });
  const body = h("div", { class: "draft-body" });
  const editorSlot = h("div", { class: "draft-editor-slot" });
  /** The draft shown, and the preview's host when one is open. */
  let draft = null;
  let previewHost = null;
  /** The open editor: `{editor, versions, saved, buttons}`. */
  let editing = null;

  const say = (text) => {
    status.textContent = text;
  };
  const clearAlert = () => {
    alert.hidden = true;
    alert.textContent = "";
  };
  /** Shows the server's message, code and diagnostic id, and its diagnostics. */
  const fail = (error) => {
    if (error && error.status === 401) {
      onUnauthenticated();
      return;
    }
    const diagnostics = error && error.details ? list(error.details.diagnostics) : [];
    alert.hidden = false;
    replaceChildren(
      alert,
      h("div", { class: "draft-alert-text" }, h("p", {}, errorContent(error)), diagnostics.length > 0 ? diagnosticList(diagnostics, "What the server found") : null),
      h("button", { type: "button", class: "button button-quiet", text: "Dismiss", onclick: clearAlert }),
    );
    say("");
  };

  async function closePreview() {
    const host = previewHost;
    previewHost = null;
    if (host) {
      onPreviewHost(null);
      await host.close();
    }
  }

  /** Loads the draft and draws it; `keepAlert` leaves an error shown. */
  async function load(keepAlert = false) {
    if (!keepAlert) {
      clearAlert();
    }
    say("Loading the draft…");
    let answer;
    try {
      answer = await api.getDraft(app.id);
    } catch (error) {
      if (api.isNoDraft(error)) {
        draft = null;
        say("");
        drawNoDraft();
        return;
      }
      draft = null;
      replaceChildren(body, h("p", { class: "hint", text: "The draft could not be loaded; the reason is shown above." }), h("button", { type: "button", class: "button", text: "Try again", onclick: () => load() }));
      fail(error);
      return;
    }
    draft = answer && answer.draft ? answer.draft : null;
    if (!draft) {
      closeEditor();
      drawNoDraft();
      say("");
      return;
    }
    say(draft.status && draft.status.ok ? "The draft validates." : "The draft does not validate yet.");
    drawDraft();
  }

  function drawNoDraft() {
    closeEditor();
    const start = h("button", { type: "button", class: "button button-primary", text: "Start a draft" });
    start.addEventListener("click", async () => {
      start.disabled = true;
      clearAlert();
      say("Starting a draft…");
      try {
        await api.startDraft(app.id);
      } catch (error) {
        start.disabled = false;
        fail(error);
        return;
      }
      await load();
      if (draft) {
        await openEditor();
      }
    });
    replaceChildren(
      body,
      h("h3", { class: "draft-title", text: "No draft" }),
      h("p", {
        text: `${app.name} has no draft. A draft is a private working copy of the app's files: edit it here (Start a draft opens its files), or let an assistant or an MCP client edit it with the source tools and draft: true. The live app stays as it is until someone publishes the draft here.`,
      }),
      h("div", { class: "form-actions" }, start),
    );
  }

  /** Why publishing cannot work as the draft stands, or "" when it may. */
  function publishBlocker() {
    const review = draft.review || {};
    if (draft.stale) {
      return "Publishing is refused: the live app changed since this draft began.";
    }
    if (list(draft.changes).length === 0) {
      return "Nothing to publish yet: the draft does not differ from the live app.";
    }
    if (!draft.status || !draft.status.ok) {
      return "Publishing needs a draft that validates: fix the problems listed above.";
    }
    if (list(review.drift).length > 0) {
      return "Publishing is blocked by schema drift: the migrations and the declared schema disagree.";
    }
    if (review.needsAdmin && userRole !== ROLES.ADMIN) {
      return "Only an admin can publish this draft.";
    }
    return "";
  }

  function drawDraft() {
    const review = draft.review || {};
    const changes = list(draft.changes);
    const migrations = list(review.migrations);
    const tables = list(review.tables);
    const drift = list(review.drift);
    const diagnostics = draft.status ? list(draft.status.diagnostics) : [];
    const ok = Boolean(draft.status && draft.status.ok);

    const previewSlot = h("div", { class: "draft-preview-slot" });
    const confirmSlot = h("div", { class: "draft-confirm" });
    const previewButton = ok
      ? h("button", { type: "button", class: "button", text: "Preview", title: "Open the draft's UI here, over a scratch copy of the data" })
      : null;
    const publishButton = h("button", { type: "button", class: "button button-primary", text: "Publish…" });
    const discardButton = h("button", { type: "button", class: "button button-danger", text: "Discard draft…" });
    const editButton = editing ? null : h("button", { type: "button", class: "button", text: "Edit files", onclick: () => openEditor() });
    const blocker = publishBlocker();
    if (blocker) {
      publishButton.disabled = true;
      publishButton.setAttribute("aria-describedby", "draft-publish-blocker");
    }

    if (previewButton) {
      previewButton.addEventListener("click", () => openPreview(previewButton, previewSlot));
    }
    publishButton.addEventListener("click", () => confirmPublish(publishButton, discardButton, confirmSlot));
    discardButton.addEventListener("click", () => confirmDiscard(publishButton, discardButton, confirmSlot));

    const by = draft.createdBy ? `Started by ${draft.createdBy}` : "Started by someone unknown";
    replaceChildren(
      body,
      h(
        "p",
        { class: "draft-meta" },
        `${by} on ${when(draft.createdAt)} · last changed ${when(draft.updatedAt)} · from revision ${short(draft.baseRevision)}`,
        draft.liveRevision && draft.liveRevision !== draft.baseRevision ? ` · live is now ${short(draft.liveRevision)}` : "",
      ),
      draft.stale ? h("p", { class: "draft-warning draft-stale", text: STALE_WARNING }) : null,
      h(
        "section",
        { class: "draft-section draft-status", "aria-labelledby": "draft-status-heading" },
        h("h3", { id: "draft-status-heading", text: "Status" }),
        ok
          ? h("p", { class: "draft-ok", text: `Validates${draft.status.revision ? ` (revision ${short(draft.status.revision)})` : ""}` })
          : h(
              "div",
              { class: "draft-invalid" },
              h("p", { text: "Does not validate:" }),
              diagnostics.length > 0 ? diagnosticList(diagnostics, "Why the draft does not validate") : h("p", { class: "hint", text: "No diagnostic was given." }),
            ),
      ),
      h(
        "section",
        { class: "draft-section", "aria-labelledby": "draft-changes-heading" },
        h("h3", { id: "draft-changes-heading", text: "Changes" }),
        changes.length === 0
          ? h("p", { class: "hint", text: "No file differs from the live app yet." })
          : h(
              "ul",
              { class: "draft-files", "aria-label": "Changed files" },
              changes.map((file) => h("li", { class: "draft-file", dataset: { path: file.path } }, fileDetails(file, changes.length <= 4))),
            ),
      ),
      h(
        "section",
        { class: "draft-section draft-review", "aria-labelledby": "draft-schema-heading" },
        h("h3", { id: "draft-schema-heading", text: "Schema changes" }),
        migrations.length === 0 && tables.length === 0 && drift.length === 0
          ? h("p", { class: "hint", text: "No schema changes: publishing applies no migration." })
          : null,
        migrations.length > 0 ? h("h4", { text: `Migrations publishing applies (${migrations.length})` }) : null,
        migrationBlocks(migrations, true),
        tables.length > 0 ? h("h4", { text: "Tables and columns" }) : null,
        tables.length > 0 ? h("ul", { class: "draft-tables" }, tableItems(tables)) : null,
        drift.length > 0
          ? h(
              "div",
              { class: "draft-warning draft-drift" },
              h("p", { class: "draft-strong", text: "Schema drift blocks publishing: the migrations and the declared schema disagree." }),
              diagnosticList(drift, "Schema drift"),
            )
          : null,
        readWideningWarning(review),
      ),
      h("div", { class: "form-actions draft-actions" }, editButton, previewButton, publishButton, discardButton),
      blocker ? h("p", { class: "hint", id: "draft-publish-blocker", text: blocker }) : null,
      !ok ? h("p", { class: "hint", text: "Preview opens once the draft validates." }) : null,
      confirmSlot,
      previewSlot,
    );
  }

  function closeEditor() {
    editing = null;
    replaceChildren(editorSlot);
  }

  /** Opens the package editor on the draft's files. */
  async function openEditor() {
    clearAlert();
    const said = status.textContent;
    say("Loading the draft's files…");
    let answer;
    try {
      answer = await api.draftFiles(app.id);
    } catch (error) {
      fail(error);
      return;
    }
    say(said);
    const files = list(answer && answer.files);
    const shown = (file) => (file.encoding ? { base64: String(file.content || "") } : String(file.content ?? ""));
    const checkButton = h("button", { type: "button", class: "button button-primary", text: "Check" });
    const addButton = h("button", { type: "button", class: "button", text: "Add file" });
    const closeButton = h("button", { type: "button", class: "button button-quiet", text: "Close editor" });
    const editor = packageEditor({ say, fail, fallbackFocus: () => addButton, removed: "it leaves the draft when you check" });
    editing = {
      editor,
      versions: new Map(files.map((file) => [file.path, file.version])),
      saved: new Map(files.map((file) => [file.path, shown(file)])),
      buttons: [checkButton, addButton],
    };
    editor.setFiles(Object.fromEntries(files.map((file) => [file.path, shown(file)])));
    checkButton.addEventListener("click", () => check());
    addButton.addEventListener("click", () => {
      editor.addFile("", "").pathInput.focus();
      say("Added a file: give it a name and its contents.");
    });
    closeButton.addEventListener("click", () => {
      closeEditor();
      drawDraft();
      say("The editor is closed; the draft keeps what was checked.");
    });
    replaceChildren(
      editorSlot,
      h(
        "section",
        { class: "draft-section draft-editor", "aria-labelledby": "draft-editor-heading" },
        h("div", { class: "panel-header" }, h("h3", { id: "draft-editor-heading", tabindex: "-1", text: "Edit the draft's files" }), closeButton),
        h("p", { class: "hint", text: "Change the files below, then Check: it saves them into the draft (never the live app) and lists any problem under the files. Preview and Publish use what was checked." }),
        editor.fileList,
        h("div", { class: "form-actions" }, addButton),
        editor.diagnostics,
        h("div", { class: "form-actions" }, checkButton),
      ),
    );
    if (draft) {
      drawDraft();
    }
    editorSlot.querySelector("#draft-editor-heading").focus();
  }

  /** Whether the editor's `content` for a file is what the draft holds. */
  function same(saved, content) {
    if (typeof saved === "string" || typeof content === "string") {
      return saved === content;
    }
    return Boolean(saved) && Boolean(content) && saved.base64 === content.base64;
  }

  /** Check: writes each changed file into the draft, deletes each removed one, then reviews it again. */
  async function check() {
    const open = editing;
    if (!open) {
      return;
    }
    const files = open.editor.filesOf();
    if (!files) {
      return;
    }
    clearAlert();
    for (const button of open.buttons) {
      button.disabled = true;
    }
    say("Saving the changed files into the draft…");
    try {
      for (const [path, content] of Object.entries(files)) {
        if (open.saved.has(path) && same(open.saved.get(path), content)) {
          continue;
        }
        const file = typeof content === "string" ? { path, content } : { path, content: content.base64, encoding: "base64" };
        if (open.versions.has(path)) {
          file.expectedVersion = open.versions.get(path);
        }
        const written = await api.writeDraftFile(app.id, file);
        open.versions.set(path, written.version);
        open.saved.set(path, content);
      }
      for (const path of [...open.saved.keys()]) {
        if (!Object.prototype.hasOwnProperty.call(files, path)) {
          await api.deleteDraftFile(app.id, path, open.versions.get(path));
          open.saved.delete(path);
          open.versions.delete(path);
        }
      }
    } catch (error) {
      fail(error);
      return;
    } finally {
      for (const button of open.buttons) {
        button.disabled = false;
      }
    }
    await closePreview();
    await load(true);
    if (editing !== open || !draft) {
      return;
    }
    const found = draft.status ? list(draft.status.diagnostics) : [];
    const ok = Boolean(draft.status && draft.status.ok);
    open.editor.showDiagnostics(ok, found, "Checked: the draft validates. Preview it, then publish.");
    say(ok ? "Checked: the draft validates." : `Checked: ${found.length} problem${found.length === 1 ? "" : "s"} found. Choose one to go to its line.`);
  }

  function fileDetails(file, open) {
    const notes = [];
    if (file.binary) {
      notes.push("binary");
    }
    if (file.truncated) {
      notes.push("diff cut short");
    }
    const versions = file.fromVersion || file.toVersion ? `${file.fromVersion ? short(file.fromVersion) : "none"} → ${file.toVersion ? short(file.toVersion) : "none"}` : "";
    return h(
      "details",
      { class: "draft-file-details", open: open && typeof file.unified === "string" },
      h(
        "summary",
        {},
        h("span", { class: `draft-change draft-change-${file.change}`, text: CHANGE_TEXT[file.change] || file.change }),
        " ",
        h("span", { class: "draft-path", text: file.path }),
        notes.length > 0 ? h("span", { class: "hint", text: ` (${notes.join(", ")})` }) : null,
      ),
      versions ? h("p", { class: "hint", text: `Version ${versions}` }) : null,
      typeof file.unified === "string"
        ? h("pre", { class: "draft-diff", "aria-label": `Changes to ${file.path}`, text: file.unified })
        : h("p", { class: "hint", text: file.binary ? "A binary file: no text diff to show." : "No text diff to show." }),
      file.truncated && typeof file.unified === "string" ? h("p", { class: "hint", text: "The diff was cut short to keep the answer bounded." }) : null,
    );
  }

  async function openPreview(previewButton, previewSlot) {
    previewButton.disabled = true;
    clearAlert();
    say("Loading the preview…");
    const shown = draft;
    let resource;
    try {
      resource = await api.draftResource(app.id);
    } catch (error) {
      previewButton.disabled = false;
      fail(error);
      return;
    }
    if (draft !== shown) {
      return;
    }
    await closePreview();
    previewButton.hidden = true;
    const host = openPreviewSection({
      slot: previewSlot,
      heading: `Preview of the draft (revision ${short(shown.status.revision)})`,
      sandboxOrigin,
      app: { id: app.id, revision: shown.status.revision, name: app.name },
      resource,
      hostVersion,
      previewId: shown.previewId,
      isCurrent: (opened) => previewHost === opened,
      say,
      fail,
      onUnauthenticated,
      onClose: async () => {
        await closePreview();
        replaceChildren(previewSlot);
        previewButton.hidden = false;
        previewButton.disabled = false;
        say("The preview is closed.");
        previewButton.focus();
      },
    });
    previewHost = host;
    onPreviewHost(host);
  }

  function confirmPublish(publishButton, discardButton, confirmSlot) {
    publishButton.disabled = true;
    discardButton.disabled = true;
    const review = draft.review || {};
    const migrations = list(review.migrations);
    const tables = list(review.tables);
    const shown = draft;
    const yes = h("button", { type: "button", class: "button button-primary", text: "Yes, publish" });
    const no = h("button", { type: "button", class: "button button-quiet", text: "Cancel" });
    const reset = () => {
      replaceChildren(confirmSlot);
      publishButton.disabled = Boolean(publishBlocker());
      discardButton.disabled = false;
    };
    // Escape, or work elsewhere on the page, cancels it too.
    const done = dismissibleBy(confirmSlot, no, publishButton);
    no.addEventListener("click", () => {
      reset();
      publishButton.focus();
    });
    yes.addEventListener("click", async () => {
      done();
      yes.disabled = true;
      no.disabled = true;
      clearAlert();
      say(`Publishing the draft of ${app.name}…`);
      // The preview's scratch data is not published; its frame goes first.
      await closePreview();
      let answer;
      try {
        answer = await api.publishDraft(app.id, shown.baseRevision, shown.contentHash);
      } catch (error) {
        fail(error);
        // The draft may have gone stale or changed meanwhile: show it as it
        // is now, to review again.
        await load(true);
        return;
      }
      const published = (answer && answer.published) || {};
      drawPublished(published);
      await onPublished(published);
    });
    replaceChildren(
      confirmSlot,
      h("h3", { text: "Publish this draft?" }),
      h("p", {
        text: `Publishing makes the draft live for every user of ${app.name} at once: its files replace revision ${short(shown.baseRevision)}.`,
      }),
      migrations.length > 0
        ? h(
            "div",
            {},
            h("p", { text: `These migrations are applied to the live data, in order (${migrations.length}); open one to read its SQL:` }),
            migrationBlocks(migrations, false),
          )
        : h("p", { text: "No migration is applied: the live data stays as it is." }),
      tables.length > 0 ? h("p", { text: "The schema changes:" }) : null,
      tables.length > 0 ? h("ul", { class: "draft-tables" }, tableItems(tables)) : null,
      readWideningWarning(review),
      h("p", { class: "hint", text: "Rows made in the preview are not published. If the live app changed since the draft began, or the draft changed since this page showed it, publishing is refused." }),
      h("div", { class: "form-actions" }, yes, no),
    );
    yes.focus();
  }

  function confirmDiscard(publishButton, discardButton, confirmSlot) {
    publishButton.disabled = true;
    discardButton.disabled = true;
    const yes = h("button", { type: "button", class: "button button-danger", text: "Yes, discard" });
    const no = h("button", { type: "button", class: "button button-quiet", text: "Cancel" });
    // Escape, or work elsewhere on the page, cancels it too.
    const done = dismissibleBy(confirmSlot, no, discardButton);
    no.addEventListener("click", () => {
      replaceChildren(confirmSlot);
      publishButton.disabled = Boolean(publishBlocker());
      discardButton.disabled = false;
      discardButton.focus();
    });
    yes.addEventListener("click", async () => {
      done();
      yes.disabled = true;
      no.disabled = true;
      clearAlert();
      say(`Discarding the draft of ${app.name}…`);
      await closePreview();
      try {
        await api.discardDraft(app.id);
      } catch (error) {
        fail(error);
        await load(true);
        return;
      }
      await load();
      say("The draft is discarded; the live app is unchanged.");
    });
    replaceChildren(
      confirmSlot,
      h("h3", { text: "Discard this draft?" }),
      h("p", { text: `Discard the draft of ${app.name}? Its changes and its preview data are lost. The live app is not affected.` }),
      h("div", { class: "form-actions" }, yes, no),
    );
    yes.focus();
  }

  function drawPublished(published) {
    draft = null;
    const applied = list(published.migrationsApplied);
    const valid = !published.status || published.status.ok !== false;
    const text = `Published revision ${short(published.revision)}`;
    replaceChildren(
      body,
      h("h3", { class: "draft-title", text: "Published" }),
      h("p", { class: "draft-ok draft-done", text: `${text}.` }),
      h("p", { text: `It is live for every user of ${app.name}${published.previousRevision ? `, replacing revision ${short(published.previousRevision)}` : ""}.` }),
      applied.length > 0
        ? h("div", {}, h("p", { text: "Migrations applied:" }), h("ul", { class: "draft-confirm-list" }, applied.map((file) => h("li", { text: String(file) }))))
        : h("p", { class: "hint", text: "No migration was applied." }),
      valid ? null : diagnosticList(list(published.status.diagnostics), "Why the published app does not validate"),
      h("div", { class: "form-actions" }, h("button", { type: "button", class: "button button-primary", text: "Open the app", onclick: () => onClose() })),
    );
    say(valid ? `${text} — it is live now.` : `${text}, but the package does not validate.`);
  }

  const panel = h(
    "section",
    { class: "panel draft-panel", "aria-labelledby": "draft-heading" },
    h(
      "div",
      { class: "panel-header" },
      h("h2", { id: "draft-heading", text: `Draft of ${app.name}` }),
      h("button", { type: "button", class: "button button-quiet", text: "Back to the app", onclick: () => onClose() }),
    ),
    alert,
    status,
    body,
    editorSlot,
  );
  load();
  return panel;
}
