// Sasha realm lockdown: the first script of every app resource, before the
// facade and before any app script. It must never be skipped, reordered or made
// optional, and it must never call a function the app could have replaced: it
// captures every native it needs now, while nothing else has run.
//
// What it guarantees (security catalogue B9; ARCHITECTURE.md "Realm lockdown"):
//  1. No WebRTC: every `RTC*` interface, its `webkit`/`moz` aliases and
//     `XSLTProcessor` (which builds nodes from data no check below sees) are
//     non-configurable `undefined` on the app's window, so `new
//     RTCPeerConnection()` is a TypeError and cannot be brought back.
//  2. No second realm: an `iframe`, `frame`, `object`, `embed`, `portal`,
//     `fencedframe` or `applet` element can never be created, so no child window
//     (with WebRTC of its own) ever exists. DOM creation is refused in the two
//     factories that make elements (`createElement`, `createElementNS`), in
//     `createDocument` and in customized built-ins; every HTML and XML string
//     parser is reached only through Trusted Types (the resource's CSP has
//     `require-trusted-types-for 'script'`), whose default policy, and every
//     policy the app creates, refuses such markup. The browser, not a list kept
//     here, decides which APIs are HTML sinks, so a new sink is covered the day
//     it ships.
//  3. No speculative connection: `<link>` (preconnect, dns-prefetch, prefetch,
//     prerender, modulepreload, preload) cannot be created by any of the same
//     routes (an assembled document has none: stylesheets are inlined), and the
//     `ping` attribute cannot be set by property, attribute, Attr or markup.
// The markup check is a sound over-approximation: an element or attribute named
// above can only come out of a parser if its name appears literally after `<`
// (or after an XML prefix), and XML entities, the one way to spell markup
// indirectly, are refused whole. Text that merely mentions `<iframe` is refused
// too; apps insert text with textContent.
(function () {
  "use strict";
  var W = window;
  var O = Object, R = Reflect;
  var apply = R.apply, defineProperty = O.defineProperty, getOwnPropertyNames = O.getOwnPropertyNames;
  var getOwnPropertyDescriptor = O.getOwnPropertyDescriptor, getPrototypeOf = O.getPrototypeOf, create = O.create;
  var exec = RegExp.prototype.exec, toLowerCase = String.prototype.toLowerCase, slice = String.prototype.slice;
  var lastIndexOf = String.prototype.lastIndexOf, toStr = String, TypeErr = TypeError;

  function matches(pattern, text) { return apply(exec, pattern, [text]) !== null; }
  function lower(text) { return apply(toLowerCase, text, []); }
  // The local part of a qualified name (`h:iframe` -> `iframe`), lower-cased.
  function localName(name) {
    var text = lower(toStr(name)), colon = apply(lastIndexOf, text, [":"]);
    return colon < 0 ? text : apply(slice, text, [colon + 1]);
  }
  function set(names) {
    var table = create(null);
    for (var i = 0; i < names.length; i++) table[names[i]] = true;
    return table;
  }
  function refuse(what) {
    return new TypeErr("Sasha apps cannot use " + what + ": the sandbox allows no nested frame, peer connection or speculative connection (APP_CAPABILITY_DENIED)");
  }
  function lock(object, name, value) {
    try {
      defineProperty(object, name, { value: value, writable: false, enumerable: false, configurable: false });
    } catch (ignored) { /* already non-configurable: nothing the app could have set yet */ }
  }
  // Replaces a method (data property) or an accessor's setter, non-configurably.
  function wrap(object, name, make) {
    var descriptor = object && getOwnPropertyDescriptor(object, name);
    if (!descriptor) return;
    if (typeof descriptor.value === "function") {
      descriptor.value = make(descriptor.value);
      descriptor.writable = false;
    } else if (typeof descriptor.set === "function") {
      descriptor.set = make(descriptor.set);
    } else {
      return;
    }
    descriptor.configurable = false;
    defineProperty(object, name, descriptor);
  }

  // Elements that open a browsing context (a window of their own) or a
  // speculative connection.
  var ELEMENTS = set(["iframe", "frame", "object", "embed", "portal", "fencedframe", "applet", "link"]);
  var MARKUP = /<(?:[^\s\/>:]*:)?(?:iframe|frame|object|embed|portal|fencedframe|applet|link)(?:[\s\/>]|$)|<!entity/i;
  var PING = /[\s\/"']ping\s*=/i;
  function element(name) {
    if (ELEMENTS[localName(name)] === true) throw refuse("<" + localName(name) + ">");
  }
  function attribute(name) {
    if (localName(name) === "ping") throw refuse("the ping attribute");
  }
  function markup(value) {
    var text = value === null || value === undefined ? "" : toStr(value);
    if (matches(MARKUP, text)) throw refuse("markup with a nested frame, a <link> or an XML entity");
    if (matches(PING, text)) throw refuse("markup with a ping attribute");
    return text;
  }

  // 1. WebRTC and XSLT, gone for good.
  var names = getOwnPropertyNames(W);
  for (var i = 0; i < names.length; i++) {
    if (matches(/^(?:webkit|moz)?RTC/, names[i])) lock(W, names[i], undefined);
  }
  lock(W, "XSLTProcessor", undefined);

  // 2 and 3: the element factories. Each name is converted to a string once and
  // that string is what the native receives, so a changing toString cannot
  // pass one name to the check and another to the browser.
  var DocumentProto = W.Document.prototype;
  wrap(DocumentProto, "createElement", function (native) {
    return function createElement(name, options) {
      var text = toStr(name);
      element(text);
      return apply(native, this, arguments.length > 1 ? [text, options] : [text]);
    };
  });
  wrap(DocumentProto, "createElementNS", function (native) {
    return function createElementNS(namespace, name, options) {
      var text = toStr(name);
      element(text);
      return apply(native, this, arguments.length > 2 ? [namespace, text, options] : [namespace, text]);
    };
  });
  wrap(W.DOMImplementation && W.DOMImplementation.prototype, "createDocument", function (native) {
    return function createDocument(namespace, name, doctype) {
      var text = name === null || name === undefined ? name : toStr(name);
      if (text) element(text);
      return apply(native, this, [namespace, text, doctype === undefined ? null : doctype]);
    };
  });
  wrap(W.CustomElementRegistry && W.CustomElementRegistry.prototype, "define", function (native) {
    return function define(name, constructor, options) {
      // `extends` is read once, so a getter cannot show the check one name
      // and the browser another.
      var copy = {}, extended = options === null || options === undefined ? undefined : options.extends;
      if (extended !== undefined) {
        copy.extends = toStr(extended);
        element(copy.extends);
      }
      return apply(native, this, [name, constructor, copy]);
    };
  });
  wrap(DocumentProto, "createAttribute", function (native) {
    return function createAttribute(name) {
      var text = toStr(name);
      attribute(text);
      return apply(native, this, [text]);
    };
  });
  wrap(DocumentProto, "createAttributeNS", function (native) {
    return function createAttributeNS(namespace, name) {
      var text = toStr(name);
      attribute(text);
      return apply(native, this, [namespace, text]);
    };
  });
  var ElementProto = W.Element.prototype;
  wrap(ElementProto, "setAttribute", function (native) {
    return function setAttribute(name, value) {
      var text = toStr(name);
      attribute(text);
      return apply(native, this, [text, value]);
    };
  });
  wrap(ElementProto, "setAttributeNS", function (native) {
    return function setAttributeNS(namespace, name, value) {
      var text = toStr(name);
      attribute(text);
      return apply(native, this, [namespace, text, value]);
    };
  });
  wrap(ElementProto, "toggleAttribute", function (native) {
    return function toggleAttribute(name, force) {
      var text = toStr(name);
      attribute(text);
      return apply(native, this, arguments.length > 1 ? [text, force] : [text]);
    };
  });
  var pingSetter = function () { return function () { throw refuse("the ping attribute"); }; };
  wrap(W.HTMLAnchorElement && W.HTMLAnchorElement.prototype, "ping", pingSetter);
  wrap(W.HTMLAreaElement && W.HTMLAreaElement.prototype, "ping", pingSetter);

  // The string parsers: Trusted Types routes every HTML sink (innerHTML,
  // outerHTML, insertAdjacentHTML, setHTMLUnsafe, document.write, DOMParser,
  // createContextualFragment, parseHTMLUnsafe, srcdoc, execCommand) through a
  // policy. The default policy checks the markup; policies the app creates are
  // wrapped so their output is checked too. `createScript` and
  // `createScriptURL` are left to the app: the CSP's exact hashes block every
  // script those could make.
  var tt = W.trustedTypes;
  if (tt && typeof tt.createPolicy === "function") {
    var factory = getPrototypeOf(tt), nativeCreatePolicy = factory.createPolicy;
    apply(nativeCreatePolicy, tt, ["default", { createHTML: function (input) { return markup(input); } }]);
    lock(factory, "createPolicy", function createPolicy(name, options) {
      var given = options === null || options === undefined ? {} : options;
      var html = given.createHTML, script = given.createScript, url = given.createScriptURL;
      var checked = {};
      if (typeof html === "function") {
        checked.createHTML = function () { return markup(apply(html, this, arguments)); };
      }
      if (typeof script === "function") checked.createScript = script;
      if (typeof url === "function") checked.createScriptURL = url;
      return apply(nativeCreatePolicy, this, [toStr(name), checked]);
    });
    var literal = ["TrustedHTML", "TrustedScript", "TrustedScriptURL"];
    for (var j = 0; j < literal.length; j++) {
      if (W[literal[j]]) lock(W[literal[j]], "fromLiteral", undefined);
    }
  }
  // The Sanitizer API's safe methods are no Trusted Types sinks: they drop
  // frames and scripts themselves, but keep <link> and ping.
  var safe = function (native) {
    return function (html, options) {
      return apply(native, this, [markup(html), options]);
    };
  };
  wrap(ElementProto, "setHTML", safe);
  wrap(W.ShadowRoot && W.ShadowRoot.prototype, "setHTML", safe);
  wrap(W.Document, "parseHTML", safe);
})();
