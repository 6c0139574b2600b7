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

/**
 * An error as one line of text: its message, then its code and diagnostic id
 * when known, so a user can quote them. The nil id of a hidden refusal is left
 * out: there is nothing to diagnose.
 */
export function errorText(error) {
  const raw = (error && error.message) || "Something went wrong.";
  // Server messages are lowercase fragments; show them as sentences.
  const message = raw.charAt(0).toUpperCase() + raw.slice(1);
  const details = [];
  if (error && error.code) {
    details.push(error.code);
  }
  if (error && error.diagnosticId && !/^[0-]+$/.test(error.diagnosticId)) {
    details.push(`diagnostic id ${error.diagnosticId}`);
  }
  return details.length > 0 ? `${message} (${details.join(", ")})` : message;
}

/**
 * The messages of a panel: `say` writes its live status line, `fail` shows an
 * error in its alert (`describe` turns the error into text, `errorText` by
 * default) and clears the status, `clearAlert` hides the alert. With
 * `onUnauthenticated`, a 401 calls it instead: the session has ended.
 */
export function panelMessages(status, alert, { onUnauthenticated = null, describe = errorText } = {}) {
  const say = (text) => {
    status.textContent = text;
  };
  const fail = (error) => {
    if (onUnauthenticated && error && error.status === 401) {
      onUnauthenticated();
      return;
    }
    alert.hidden = false;
    alert.textContent = describe(error);
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
