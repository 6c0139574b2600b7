"use strict";
// Pressing "Spin" runs an endless loop on the view's main thread. The loop
// starts from a timer, after the click handler has returned, so the click
// itself completes; from then on this document never runs anything else.
const state = document.getElementById("state");
Sasha.ready().then(() => {
  state.textContent = "Ready to spin.";
});
document.getElementById("spin").addEventListener("click", () => {
  state.textContent = "Spinning.";
  setTimeout(() => {
    for (;;) {
      // spin forever
    }
  }, 50);
});
