// Small DOM helpers for the Studio page. Text is always set as text
// (textContent), never parsed as HTML: app names, errors and log lines may
// come from an app author or a server and must not become markup.

/**
 * Creates an element. `attributes` keys are attribute names, except
 * `class` (className), `text` (textContent), `dataset` (an object) and
 * `on<event>` (a listener). `false`, `null` and `undefined` values are skipped.
 */
export function h(tag, attributes = {}, ...children) {
  const element = document.createElement(tag);
  for (const [key, value] of Object.entries(attributes)) {
    if (value === false || value === null || value === undefined) {
      continue;
    }
    if (key === "class") {
      element.className = value;
    } else if (key === "text") {
      element.textContent = String(value);
    } else if (key === "dataset") {
      Object.assign(element.dataset, value);
    } else if (key.startsWith("on") && typeof value === "function") {
      element.addEventListener(key.slice(2), value);
    } else if (value === true) {
      element.setAttribute(key, "");
    } else {
      element.setAttribute(key, String(value));
    }
  }
  append(element, children);
  return element;
}

function append(element, children) {
  for (const child of children) {
    if (child === null || child === undefined || child === false) {
      continue;
    }
    if (Array.isArray(child)) {
      append(element, child);
    } else if (child instanceof Node) {
      element.appendChild(child);
    } else {
      element.appendChild(document.createTextNode(String(child)));
    }
  }
}

/** Replaces every child of `element` with `children`. */
export function replaceChildren(element, ...children) {
  element.textContent = "";
  append(element, children);
}

/** The error's own sentence, without its code or diagnostic id. */
export function errorMessage(error) {
  const raw = (error && error.message) || "Something went wrong.";
  // Server messages are lowercase fragments; show them as sentences.
  return raw.charAt(0).toUpperCase() + raw.slice(1);
}

/** The code and the diagnostic id (not the nil one of a hidden refusal), as text parts. */
function errorDetailParts(error) {
  const details = [];
  if (error && error.code) {
    details.push(error.code);
  }
  if (error && error.diagnosticId && !/^[0-]+$/.test(error.diagnosticId)) {
    details.push(`diagnostic id ${error.diagnosticId}`);
  }
  return details;
}

/**
 * An error as page content: the plain sentence first, then the code and the
 * diagnostic id folded under "Details" (there to quote to an admin, not in
 * the way of reading what happened).
 */
export function errorContent(error) {
  const parts = errorDetailParts(error);
  return [
    h("span", { class: "error-message", text: errorMessage(error) }),
    parts.length > 0
      ? h("details", { class: "error-details" }, h("summary", { text: "Details" }), h("span", { class: "error-code", text: parts.join(" · ") }))
      : null,
  ];
}

/**
 * The messages of a panel: `say` writes its live status line, `fail` shows an
 * error in its alert (the sentence, with the code and diagnostic id under
 * "Details"; `describe` may turn the error into other text, or into another
 * error to show the same way) and clears the status, `clearAlert` hides the
 * alert. With `onUnauthenticated`, a 401 calls it instead: the session has
 * ended.
 */
export function panelMessages(status, alert, { onUnauthenticated = null, describe = null } = {}) {
  const say = (text) => {
    status.textContent = text;
  };
  const fail = (error) => {
    if (onUnauthenticated && error && error.status === 401) {
      onUnauthenticated();
      return;
    }
    alert.hidden = false;
    const described = describe ? describe(error) : error;
    if (typeof described === "string") {
      alert.textContent = described;
    } else {
      replaceChildren(alert, errorContent(described));
    }
    say("");
  };
  const clearAlert = () => {
    alert.hidden = true;
    alert.textContent = "";
  };
  return { say, fail, clearAlert };
}

/**
 * The error line under one form field: `show(text)` writes it and marks the
 * field `aria-invalid`, described by the line; `clear()` hides it. The line
 * is the element to put right after the field.
 */
export function fieldError(field, id) {
  const element = h("p", { class: "field-error", id, hidden: true });
  const described = (field.getAttribute("aria-describedby") || "").split(" ").filter(Boolean);
  field.setAttribute("aria-describedby", [...described, id].join(" "));
  const clear = () => {
    element.hidden = true;
    element.textContent = "";
    field.removeAttribute("aria-invalid");
  };
  const show = (text) => {
    element.hidden = false;
    element.textContent = text;
    field.setAttribute("aria-invalid", "true");
  };
  field.addEventListener("input", () => {
    if (!element.hidden) {
      clear();
    }
  });
  return { element, show, clear };
}

/** A Copy button for the text `value()` returns; says "Copied" for a moment. */
export function copyButton(value, label = "Copy") {
  const button = h("button", { type: "button", class: "button button-quiet button-inline", text: label });
  button.addEventListener("click", async () => {
    try {
      await navigator.clipboard.writeText(value());
      button.textContent = "Copied";
    } catch {
      button.textContent = "Select and copy it";
    }
    setTimeout(() => {
      button.textContent = label;
    }, 2000);
  });
  return button;
}

/**
 * The open confirmation panels (Withdraw, Delete, Revert…): each is closed by
 * Escape (the newest first, focus back on the button that opened it), and by
 * doing something else — pressing or focusing anything outside the panel and
 * its opener — so a destructive question never lingers behind other work.
 */
const openPanels = [];
let panelsWatched = false;

function closePanel(entry, refocus) {
  const index = openPanels.indexOf(entry);
  if (index >= 0) {
    openPanels.splice(index, 1);
  }
  entry.cancel({ refocus });
}

function livePanels() {
  for (let index = openPanels.length - 1; index >= 0; index -= 1) {
    if (!openPanels[index].element.isConnected) {
      openPanels.splice(index, 1);
    }
  }
  return openPanels;
}

function outside(entry, target) {
  return !(target instanceof Node) || !(entry.element.contains(target) || (entry.opener && entry.opener.contains(target)));
}

function watchPanels() {
  if (panelsWatched) {
    return;
  }
  panelsWatched = true;
  document.addEventListener("keydown", (event) => {
    if (event.key !== "Escape" || event.defaultPrevented) {
      return;
    }
    const open = livePanels();
    if (open.length > 0) {
      event.preventDefault();
      closePanel(open[open.length - 1], true);
    }
  });
  const elsewhere = (event) => {
    for (const entry of [...livePanels()]) {
      if (outside(entry, event.target)) {
        closePanel(entry, false);
      }
    }
  };
  document.addEventListener("pointerdown", elsewhere, true);
  document.addEventListener("focusin", elsewhere, true);
}

/**
 * Registers `element`, a confirmation panel just shown, to be closed by
 * Escape or by work elsewhere: `cancel({refocus})` closes it (`refocus`:
 * Escape put the focus back on `opener`; work elsewhere keeps it where it
 * went). Answers `done()`, to call when the panel closes by its own buttons.
 */
export function dismissible(element, cancel, opener = null) {
  watchPanels();
  element.dataset.dismissible = "";
  const entry = { element, cancel, opener };
  openPanels.push(entry);
  return () => {
    const index = openPanels.indexOf(entry);
    if (index >= 0) {
      openPanels.splice(index, 1);
    }
  };
}

/**
 * `dismissible` for a panel that its own Cancel button `no` closes: Escape
 * presses it (which puts the focus back as Cancel does); work elsewhere
 * presses it and leaves the focus where it went. Answers `done()`, to call
 * when the panel's other button takes over.
 */
export function dismissibleBy(element, no, opener = null) {
  const done = dismissible(
    element,
    ({ refocus }) => {
      const went = document.activeElement;
      no.click();
      if (!refocus && went && went !== document.body && went.isConnected && !element.contains(went)) {
        went.focus();
      }
    },
    opener,
  );
  no.addEventListener("click", done);
  return done;
}
