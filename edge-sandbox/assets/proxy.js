// Sasha sandbox proxy: the only script on the sandbox origin.
//
// It runs inside the Studio's outer iframe and will relay MCP Apps messages
// between the Studio host and the app's inner frame. Loaded at top level it
// refuses to do anything: the sandbox is never a page of its own.
"use strict";
(function () {
  if (window.top === window.self) {
    document.documentElement.textContent = "This page only runs inside Sasha Studio.";
  }
})();
