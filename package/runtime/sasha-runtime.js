// Sasha runtime (pinned into every app resource).
//
// Defines window.Sasha, the facade an app uses to reach its host. This build
// carries the facade's shape only: every operation rejects with APP_NOT_READY
// until the host bridge is delivered with the browser work.
"use strict";
(function () {
  function notReady(operation) {
    return Promise.reject({
      code: "APP_NOT_READY",
      message: operation + " is not available in this build yet",
      retryable: true,
      diagnosticId: (self.crypto && self.crypto.randomUUID) ? self.crypto.randomUUID() : "",
    });
  }
  var data = {};
  ["list", "get", "aggregate", "create", "update", "delete"].forEach(function (op) {
    data[op] = function () { return notReady("Sasha.data." + op); };
  });
  Object.defineProperty(window, "Sasha", {
    value: Object.freeze({
      data: Object.freeze(data),
      actions: Object.freeze({ call: function () { return notReady("Sasha.actions.call"); } }),
      chat: Object.freeze({ execute: function () { return notReady("Sasha.chat.execute"); } }),
      files: Object.freeze({ upload: function () { return notReady("Sasha.files.upload"); } }),
    }),
    writable: false,
    configurable: false,
  });
})();
