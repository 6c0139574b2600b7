// The History panel (admin and staff who manage the app, with `apps:write`):
// the app's revisions newest first; choosing one shows what reverting to it
// would change (the diff from the current revision to it, per file added,
// removed or changed, unified text in a <pre>); "Revert to this revision"
// asks again in the panel, then posts the revert with the current revision
// as `expectedRevision`, so a change made meanwhile is refused, not lost.
// Each changed file has "View file": the file as it is at the chosen revision
// (or, for a file that revision lacks, at the current one) in a <pre>; a
// binary asset is named with its size instead of shown as base64.

import * as api from "./api.js";
import { dismissible, h, panelMessages, replaceChildren } from "./dom.js";

const SURFACE_TEXT = { mcp: "assistant (MCP)", studio: "Studio", filesystem: "found on disk", seed: "bundled" };

function short(revision) {
  return String(revision).slice(0, 12);
}

function when(seconds) {
  const date = new Date(Number(seconds) * 1000);
  return Number.isNaN(date.getTime()) ? String(seconds) : date.toLocaleString();
}

/** How many bytes, said for people: "1 byte", "12 bytes", "3.4 KB". */
export function byteText(bytes) {
  const n = Number(bytes);
  if (!Number.isFinite(n) || n < 0) {
    return "an unknown number of bytes";
  }
  if (n < 1024) {
    return `${n} byte${n === 1 ? "" : "s"}`;
  }
  if (n < 1024 * 1024) {
    return `${(n / 1024).toFixed(1)} KB (${n} bytes)`;
  }
  return `${(n / (1024 * 1024)).toFixed(1)} MB (${n} bytes)`;
}

/**
 * What "View file" shows for a `GET …/revisions/:rev/file` answer: the text
 * itself, or for a binary asset (`encoding` "base64") one sentence instead.
 */
export function fileView(answer) {
  const path = answer && answer.path ? String(answer.path) : "This file";
  if (answer && answer.encoding && answer.encoding !== "utf-8") {
    return { binary: true, text: `${path} is a binary asset of ${byteText(answer.bytes)}; it is not shown here.` };
  }
  return { binary: false, text: answer && typeof answer.content === "string" ? answer.content : "" };
}

/**
 * Which revision "View file" reads a diff entry at: the chosen revision
 * unless the file is not in it (reverting would remove it), then the current one.
 */
export function viewRevision(file, chosen, current) {
  return file && file.change === "removed" ? current : chosen;
}

/**
 * The revisions and the reverts in one list, newest first: `{revision}` or
 * `{revert}` items. A revert and a revision of the same second: the revert
 * first (a revert goes back to a revision recorded before it).
 */
export function historyEntries(revisions, reverts) {
  const items = [
    ...revisions.map((revision, index) => ({ at: Number(revision.recordedAt), order: index, revision })),
    ...reverts.map((revert, index) => ({ at: Number(revert.at), order: index, revert })),
  ];
  items.sort((a, b) => b.at - a.at || (a.revert ? 0 : 1) - (b.revert ? 0 : 1) || a.order - b.order);
  return items.map(({ revision, revert }) => (revert ? { revert } : { revision }));
}

/**
 * The panel. `options`: `{app, onReverted(reverted), onClose(), onUnauthenticated()}`.
 */
export function historyPanel({ app, onReverted = () => {}, onClose = () => {}, onUnauthenticated = () => {} }) {
  const status = h("p", { class: "status", role: "status", "aria-live": "polite" });
  const alert = h("p", { class: "alert", role: "alert", hidden: true });
  const { say, fail, clearAlert } = panelMessages(status, alert, { onUnauthenticated });
  const list = h("ol", { class: "history-list", "aria-label": "Revisions, newest first" });
  const detail = h("div", { class: "history-detail" });
  let revisions = [];
  /** The app's reverts (`{at, user, from, to}`), newest first: listed among the revisions. */
  let reverts = [];
  let selected = null;

  const current = () => revisions.find((revision) => revision.current) || null;

  async function load(keep) {
    say("Loading the history…");
    let answer;
    try {
      answer = await api.listRevisions(app.id);
    } catch (error) {
      fail(error);
      return;
    }
    revisions = Array.isArray(answer.revisions) ? answer.revisions : [];
    reverts = Array.isArray(answer.reverts) ? answer.reverts : [];
    say(`${revisions.length} revision${revisions.length === 1 ? "" : "s"}.`);
    drawList();
    const again = keep && revisions.find((revision) => revision.revision === keep);
    if (again) {
      await select(again);
    } else {
      selected = null;
      replaceChildren(detail, h("p", { class: "hint", text: "Choose a revision to see what reverting to it would change." }));
    }
  }

  function drawList() {
    replaceChildren(
      list,
      historyEntries(revisions, reverts).map(({ revision, revert }) =>
        revert
          ? h(
              "li",
              { class: "history-item history-revert", dataset: { from: revert.from, to: revert.to } },
              h("span", { class: "history-summary", text: `Reverted to ${short(revert.to)}` }),
              h("span", {
                class: "history-meta",
                text: `${when(revert.at)} · ${revert.user || "nobody known"} · from ${short(revert.from)}`,
              }),
            )
          : h(
          "li",
          { class: revision === selected ? "history-item selected" : "history-item", dataset: { revision: revision.revision } },
          h(
            "button",
            {
              type: "button",
              class: "history-choose",
              "aria-pressed": String(revision === selected),
              onclick: () => select(revision),
            },
            h("span", { class: "history-summary", text: revision.summary || "(no summary)" }),
            revision.current ? h("span", { class: "badge badge-small", text: "current" }) : null,
            h("span", {
              class: "history-meta",
              text: `${when(revision.recordedAt)} · ${revision.user || "nobody known"} · ${SURFACE_TEXT[revision.surface] || revision.surface} · ${short(revision.revision)}`,
            }),
          ),
        ),
      ),
    );
  }

  async function select(revision) {
    selected = revision;
    clearAlert();
    drawList();
    const now = current();
    if (!now || revision.current) {
      replaceChildren(detail, h("p", { class: "hint", text: "This is the current revision." }));
      return;
    }
    replaceChildren(detail, h("p", { class: "hint", text: `Comparing with the current revision ${short(now.revision)}…` }));
    let diff;
    try {
      diff = await api.diffRevisions(app.id, now.revision, revision.revision);
    } catch (error) {
      fail(error);
      replaceChildren(detail);
      return;
    }
    if (selected !== revision) {
      return;
    }
    drawDetail(revision, now, diff);
  }

  function drawDetail(revision, now, diff) {
    const files = Array.isArray(diff.files) ? diff.files : [];
    const revertButton = h("button", { type: "button", class: "button button-danger", text: "Revert to this revision" });
    const confirmSlot = h("div", { class: "history-confirm" });
    revertButton.addEventListener("click", () => {
      revertButton.disabled = true;
      const yes = h("button", { type: "button", class: "button button-danger", text: "Yes, revert" });
      const no = h("button", { type: "button", class: "button button-quiet", text: "Cancel" });
      const close = ({ refocus }) => {
        replaceChildren(confirmSlot);
        revertButton.disabled = false;
        if (refocus) {
          revertButton.focus();
        }
      };
      // Escape, or work elsewhere on the page, closes the question too.
      const done = dismissible(confirmSlot, close, revertButton);
      no.addEventListener("click", () => {
        done();
        close({ refocus: true });
      });
      yes.addEventListener("click", async () => {
        done();
        yes.disabled = true;
        no.disabled = true;
        clearAlert();
        say(`Reverting ${app.name}…`);
        let reverted;
        try {
          reverted = await api.revertApp(app.id, revision.revision, now.revision);
        } catch (error) {
          fail(error);
          replaceChildren(confirmSlot);
          revertButton.disabled = false;
          return;
        }
        replaceChildren(confirmSlot);
        await load(null);
        say(
          reverted.status && reverted.status.ok
            ? `Reverted ${app.name} to ${short(reverted.revision)}.`
            : `Reverted ${app.name} to ${short(reverted.revision)}, but the package does not validate.`,
        );
        await onReverted(reverted);
      });
      replaceChildren(
        confirmSlot,
        h("p", {
          text: `Revert ${app.name} to revision ${short(revision.revision)}? Its files replace the current ones (${short(now.revision)}) for everyone at once. Records are kept.`,
        }),
        h("div", { class: "form-actions" }, yes, no),
      );
      yes.focus();
    });
    replaceChildren(
      detail,
      h("h3", { text: `Reverting to ${short(revision.revision)} would change` }),
      files.length === 0
        ? h("p", { class: "hint", text: "No file differs from the current revision." })
        : h(
            "ul",
            { class: "history-files" },
            files.map((file) => fileItem(file, revision, now)),
          ),
      files
        .filter((file) => typeof file.diff === "string")
        .map((file) => h("pre", { class: "history-diff", "aria-label": `Changes to ${file.path}`, text: file.diff })),
      diff.truncated ? h("p", { class: "hint", text: "Some diffs were left out to keep the answer bounded." }) : null,
      h("div", { class: "form-actions" }, revertButton),
      confirmSlot,
    );
  }

  /** One changed file: what changed, and "View file" with its viewer. */
  function fileItem(file, revision, now) {
    const at = viewRevision(file, revision.revision, now.revision);
    const label = `${file.path} at ${short(at)}${at === now.revision ? " (current)" : ""}`;
    const viewer = h("div", { class: "history-file-view" });
    const view = h("button", {
      type: "button",
      class: "button button-small",
      text: "View file",
      "aria-label": `View ${label}`,
      "aria-expanded": "false",
    });
    view.addEventListener("click", async () => {
      if (view.getAttribute("aria-expanded") === "true") {
        replaceChildren(viewer);
        view.setAttribute("aria-expanded", "false");
        view.setAttribute("aria-label", `View ${label}`);
        view.textContent = "View file";
        return;
      }
      view.disabled = true;
      clearAlert();
      replaceChildren(viewer, h("p", { class: "hint", text: `Loading ${label}…` }));
      let answer;
      try {
        answer = await api.revisionFile(app.id, at, file.path);
      } catch (error) {
        view.disabled = false;
        replaceChildren(viewer);
        fail(error);
        return;
      }
      view.disabled = false;
      const shown = fileView(answer);
      replaceChildren(
        viewer,
        shown.binary
          ? h("p", { class: "history-file-binary", text: shown.text })
          : h("pre", { class: "history-diff history-file", "aria-label": `${label}`, tabindex: "0", text: shown.text }),
      );
      view.setAttribute("aria-expanded", "true");
      view.setAttribute("aria-label", `Hide ${label}`);
      view.textContent = "Hide file";
    });
    return h(
      "li",
      { class: "history-file-item", dataset: { path: file.path } },
      h(
        "div",
        { class: "history-file-line" },
        h("span", { class: "history-file-name", text: `${file.change} ${file.path}${file.binary ? " (binary)" : ""}${file.truncated ? " (diff left out)" : ""}` }),
        view,
      ),
      viewer,
    );
  }

  const panel = h(
    "section",
    { class: "panel history-panel", "aria-labelledby": "history-heading" },
    h(
      "div",
      { class: "panel-header" },
      h("h2", { id: "history-heading", text: `History of ${app.name}` }),
      h("button", { type: "button", class: "button button-quiet", text: "Back to the app", onclick: () => onClose() }),
    ),
    alert,
    status,
    h("div", { class: "history-body" }, list, detail),
  );
  load(null);
  return panel;
}
