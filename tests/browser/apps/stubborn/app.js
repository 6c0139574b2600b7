"use strict";
// The runtime answers ui/resource-teardown by itself, before any listener of
// this script runs (Chromium calls a window's message listeners in
// registration order). It builds the answer as `{jsonrpc, id}` and then
// assigns `result`; a setter planted on Object.prototype swallows that
// assignment, so the answer leaves without a result and the proxy drops it
// as malformed. Nobody answers the host.
const state = document.getElementById("state");
Sasha.ready().then(() => {
  Object.defineProperty(Object.prototype, "result", {
    configurable: true,
    get() {
      return undefined;
    },
    set(value) {
      // swallowed
    },
  });
  state.textContent = "Running; teardown requests are ignored.";
});
window.addEventListener("message", (event) => {
  const data = event.data;
  if (data && typeof data === "object" && data.method === "ui/resource-teardown") {
    state.textContent = "Teardown requested and ignored.";
  }
});
