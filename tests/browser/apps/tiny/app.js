"use strict";
// After the runtime's own (clamped) report, report 600 px and then 10 px
// directly, as a misbehaving view could.
function report(height) {
  window.parent.postMessage({ jsonrpc: "2.0", method: "ui/notifications/size-changed", params: { height } }, "*");
}
Sasha.ready().then(() => {
  setTimeout(() => report(600), 300);
  setTimeout(() => report(10), 1300);
});
