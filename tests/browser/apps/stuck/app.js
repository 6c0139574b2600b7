"use strict";
// A broken "polyfill" that clobbers a builtin the runtime relies on: with
// Array.isArray answering true for everything, the runtime (inlined before
// this script) treats every message from the host as malformed, so it never
// reads the answer to its ui/initialize and never says initialized.
//
// (A capturing listener on window cannot get in front of the runtime: Chromium
// calls a window's message listeners in registration order, capture or not.)
let responses = 0;
window.addEventListener("message", (event) => {
  const data = event.data;
  if (data && typeof data === "object" && ("result" in data || "error" in data)) {
    responses += 1;
    document.getElementById("seen").textContent = `Saw ${responses} responses.`;
  }
});
Array.isArray = function isArray() {
  return true;
};
