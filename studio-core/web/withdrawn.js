// Withdrawing, restoring and deleting apps (admins only).
//
// `withdrawConfirm` is the in-pane confirmation behind the app pane's
// "Withdraw…" button: it says the app disappears for everyone while its data,
// history and grants are kept and it can be restored, then posts the
// withdrawal. `withdrawnPanel` is the "Withdrawn apps" page (`#/withdrawn`):
// every withdrawn app (no other list shows them) with "Restore" and
// "Delete…". Deleting asks again in the page; "Also delete its data" needs the
// app id typed as well (the Delete button stays disabled until it matches),
// and the answer names the backup kept of the data file. An app whose package
// was deleted cannot be restored, so it has no Restore.
//
// The pure helpers (`withdrawnMeta`, `withdrawnState`, `deleteReady`,
// `deletedText`) are what the Node tests in tests/withdrawn.test.mjs check.

import * as api from "./api.js";
import { dismissible, errorContent, h, replaceChildren } from "./dom.js";

/** Unix seconds as the browser's local date and time (the raw value if unusable). */
export function whenText(seconds) {
  if (seconds === null || seconds === undefined || seconds === "") {
    return "at an unknown time";
  }
  const date = new Date(Number(seconds) * 1000);
  return Number.isNaN(date.getTime()) ? String(seconds) : date.toLocaleString();
}

/** "app-id · withdrawn <when> by <who>" for one entry of `GET /api/withdrawn-apps`. */
export function withdrawnMeta(entry, when = whenText) {
  const by = entry && entry.withdrawnBy ? entry.withdrawnBy : "someone unknown";
  return `${entry.app} · withdrawn ${when(entry.withdrawnAt)} by ${by}`;
}

/** What is left of a withdrawn app, as one sentence. */
export function withdrawnState(entry) {
  const packageDeleted = Boolean(entry && entry.packageDeleted);
  const dataDeleted = Boolean(entry && entry.dataDeleted);
  if (packageDeleted && dataDeleted) {
    return "Its package and its data are deleted; it cannot be restored.";
  }
  if (packageDeleted) {
    return "Its package is deleted, its data is kept; it cannot be restored.";
  }
  if (dataDeleted) {
    return "Its package is kept, its data is deleted.";
  }
  return "Its package, data, history and access grants are kept.";
}

/**
 * Whether the Delete button may be pressed: always without `deleteData`;
 * with it, only once the app id has been typed exactly.
 */
export function deleteReady({ deleteData, typed, appId }) {
  if (!deleteData) {
    return true;
  }
  return typeof typed === "string" && typed.trim() === appId;
}

/** What a delete answer (`{app, packageDeleted, dataDeleted, dataBackup?}`) did, said in text. */
export function deletedText(name, answer) {
  const parts = [`Deleted the package of ${name}.`];
  if (answer && answer.dataDeleted) {
    parts.push(
      answer.dataBackup
        ? `Its data was backed up to ${answer.dataBackup} and deleted.`
        : "Its data was deleted.",
    );
  } else {
    parts.push("Its data is kept.");
  }
  return parts.join(" ");
}

/**
 * The confirmation shown in the app pane by "Withdraw…". `options`: `{app,
 * onWithdrawn(answer), onCancel(), onUnauthenticated()}`.
 */
export function withdrawConfirm({ app, onWithdrawn = () => {}, onCancel = () => {}, onUnauthenticated = () => {} }) {
  const status = h("p", { class: "status", role: "status", "aria-live": "polite" });
  const alert = h("p", { class: "alert", role: "alert", hidden: true });
  const yes = h("button", { type: "button", class: "button button-danger", text: "Yes, withdraw" });
  const no = h("button", { type: "button", class: "button button-quiet", text: "Cancel" });
  // Set once the panel is shown (`dismissible`): its own buttons unregister it.
  let done = () => {};
  no.addEventListener("click", () => {
    done();
    onCancel({ refocus: true });
  });
  yes.addEventListener("click", async () => {
    done();
    yes.disabled = true;
    no.disabled = true;
    alert.hidden = true;
    alert.textContent = "";
    status.textContent = `Withdrawing ${app.name}…`;
    let answer;
    try {
      answer = await api.withdrawApp(app.id);
    } catch (error) {
      if (error && error.status === 401) {
        onUnauthenticated();
        return;
      }
      status.textContent = "";
      alert.hidden = false;
      replaceChildren(alert, errorContent(error));
      yes.disabled = false;
      no.disabled = false;
      return;
    }
    status.textContent = `Withdrew ${app.name}.`;
    await onWithdrawn(answer);
  });
  const element = h(
    "section",
    { class: "lifecycle-confirm", "aria-labelledby": "withdraw-heading" },
    h("h2", { id: "withdraw-heading", tabindex: "-1", text: `Withdraw ${app.name}?` }),
    h("p", {
      text: `${app.name} disappears for everyone at once: from every list in the Studio and from assistants and MCP clients, admins included.`,
    }),
    h("p", {
      text: "Its data, history and access grants are kept, and an admin can restore it from Withdrawn apps.",
    }),
    alert,
    h("div", { class: "form-actions" }, yes, no),
    status,
  );
  return {
    element,
    focus: () => element.querySelector("h2").focus(),
    /** Closes the panel on Escape or on work elsewhere (`opener`, the Withdraw… button, excepted). */
    dismissOn: (opener) => {
      done = dismissible(element, (how) => onCancel(how), opener);
    },
  };
}

/**
 * The Withdrawn apps page. `options`: `{notice, onRestored(answer),
 * onDeleted(answer), onUnauthenticated()}`; `notice` is said first (what the
 * page was opened after, such as a withdrawal).
 */
export function withdrawnPanel({ notice = "", onRestored = () => {}, onDeleted = () => {}, onUnauthenticated = () => {} } = {}) {
  const status = h("p", { class: "status", role: "status", "aria-live": "polite" });
  const outcome = h("p", { class: "withdrawn-outcome", hidden: true });
  const alert = h("div", { class: "alert", role: "alert", hidden: true });
  const list = h("ul", { class: "withdrawn-list", role: "list", "aria-label": "Withdrawn apps" });
  let apps = [];

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
  const fail = (error) => {
    if (error && error.status === 401) {
      onUnauthenticated();
      return;
    }
    alert.hidden = false;
    replaceChildren(
      alert,
      h("span", {}, errorContent(error)),
      h("button", { type: "button", class: "button button-quiet", text: "Dismiss", onclick: clearAlert }),
    );
    say("");
  };

  async function load() {
    say("Loading the withdrawn apps…");
    let answer;
    try {
      answer = await api.listWithdrawnApps();
    } catch (error) {
      replaceChildren(list);
      fail(error);
      return false;
    }
    apps = answer && Array.isArray(answer.apps) ? answer.apps : [];
    say(apps.length === 0 ? "" : `${apps.length} withdrawn app${apps.length === 1 ? "" : "s"}.`);
    draw();
    return true;
  }

  function draw() {
    if (apps.length === 0) {
      replaceChildren(list, h("li", { class: "withdrawn-empty", text: "No app is withdrawn. Withdraw an app from its page to hide it from everyone without losing its data." }));
      return;
    }
    replaceChildren(list, apps.map((entry) => item(entry)));
  }

  function item(entry) {
    const name = entry.name || entry.app;
    const confirmSlot = h("div", { class: "withdrawn-confirm" });
    const restore = entry.packageDeleted
      ? null
      : h("button", { type: "button", class: "button button-primary", text: "Restore", "aria-label": `Restore ${name}` });
    const remove =
      entry.packageDeleted && entry.dataDeleted
        ? null
        : h("button", { type: "button", class: "button button-danger", text: "Delete…", "aria-label": `Delete ${name}…` });
    const buttons = [restore, remove].filter(Boolean);
    if (restore) {
      restore.addEventListener("click", async () => {
        buttons.forEach((button) => {
          button.disabled = true;
        });
        clearAlert();
        tell("");
        say(`Restoring ${name}…`);
        let answer;
        try {
          answer = await api.restoreApp(entry.app);
        } catch (error) {
          fail(error);
          buttons.forEach((button) => {
            button.disabled = false;
          });
          return;
        }
        await load();
        tell(`Restored ${name}: it is back in the Apps list for everyone with access.`);
        await onRestored(answer);
      });
    }
    if (remove) {
      remove.addEventListener("click", () => {
        buttons.forEach((button) => {
          button.disabled = true;
        });
        drawDeleteConfirm(entry, name, confirmSlot, remove, ({ refocus }) => {
          replaceChildren(confirmSlot);
          buttons.forEach((button) => {
            button.disabled = false;
          });
          if (refocus) {
            remove.focus();
          }
        });
      });
    }
    const state = [];
    if (entry.packageDeleted) {
      state.push(h("span", { class: "badge badge-small badge-warning", text: "package deleted" }));
    }
    if (entry.dataDeleted) {
      state.push(h("span", { class: "badge badge-small badge-warning", text: "data deleted" }));
    }
    return h(
      "li",
      { class: "withdrawn-item", dataset: { app: entry.app } },
      h("div", { class: "withdrawn-heading" }, h("h2", { class: "withdrawn-name", text: name }), state),
      h("p", { class: "withdrawn-meta", text: withdrawnMeta(entry) }),
      h("p", { class: "withdrawn-state", text: withdrawnState(entry) }),
      buttons.length > 0 ? h("div", { class: "form-actions" }, buttons) : null,
      confirmSlot,
    );
  }

  function drawDeleteConfirm(entry, name, slot, opener, cancel) {
    // Escape, or work elsewhere on the page, closes the question too.
    const done = dismissible(slot, cancel, opener);
    const ids = { data: `delete-data-${entry.app}`, typed: `delete-confirm-${entry.app}` };
    const dataBox = h("input", { type: "checkbox", id: ids.data, disabled: entry.dataDeleted });
    const typed = h("input", { type: "text", id: ids.typed, autocomplete: "off", autocapitalize: "none", spellcheck: "false" });
    const typedField = h(
      "div",
      { class: "field", hidden: true },
      h("label", { for: ids.typed, text: `Type the app id ${entry.app} to confirm` }),
      typed,
    );
    const yes = h("button", { type: "button", class: "button button-danger", text: "Delete" });
    const no = h("button", { type: "button", class: "button button-quiet", text: "Cancel" });
    const update = () => {
      typedField.hidden = !dataBox.checked;
      yes.disabled = !deleteReady({ deleteData: dataBox.checked, typed: typed.value, appId: entry.app });
    };
    dataBox.addEventListener("change", () => {
      update();
      if (dataBox.checked) {
        typed.focus();
      }
    });
    typed.addEventListener("input", update);
    no.addEventListener("click", () => {
      done();
      cancel({ refocus: true });
    });
    yes.addEventListener("click", async () => {
      const deleteData = dataBox.checked;
      if (!deleteReady({ deleteData, typed: typed.value, appId: entry.app })) {
        return;
      }
      done();
      yes.disabled = true;
      no.disabled = true;
      dataBox.disabled = true;
      typed.disabled = true;
      clearAlert();
      tell("");
      say(`Deleting ${name}…`);
      let answer;
      try {
        answer = await api.deleteApp(entry.app, { deleteData, confirmAppId: deleteData ? typed.value.trim() : "" });
      } catch (error) {
        fail(error);
        no.disabled = false;
        dataBox.disabled = Boolean(entry.dataDeleted);
        typed.disabled = false;
        update();
        return;
      }
      await load();
      tell(deletedText(name, answer));
      await onDeleted(answer);
    });
    replaceChildren(
      slot,
      h("h3", { text: `Delete ${name}?` }),
      h("p", {
        text: entry.packageDeleted
          ? `The package of ${name} is already deleted.`
          : `The package of ${name} (its files) is deleted for good and it can no longer be restored. Its history and the audit log are kept.`,
      }),
      entry.dataDeleted
        ? h("p", { text: "Its data is already deleted." })
        : h(
            "div",
            { class: "check-field" },
            dataBox,
            h("label", { for: ids.data, text: "Also delete its data (a backup is kept)" }),
          ),
      typedField,
      h("div", { class: "form-actions" }, yes, no),
    );
    update();
    (entry.dataDeleted ? yes : dataBox).focus();
  }

  const heading = h("h1", { id: "withdrawn-heading", tabindex: "-1", text: "Withdrawn apps" });
  const panel = h(
    "section",
    { class: "panel withdrawn-panel", "aria-labelledby": "withdrawn-heading" },
    h("div", { class: "panel-header" }, heading),
    h("p", {
      class: "hint",
      text: "A withdrawn app is hidden from everyone, admins included. Restore brings it back as it was; Delete removes its package, and its data too if you ask.",
    }),
    alert,
    outcome,
    status,
    list,
  );
  if (notice) {
    tell(notice);
  }
  load();
  return panel;
}
