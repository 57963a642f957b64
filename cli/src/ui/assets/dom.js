// otelprof serve: the one helper the page's scripts build their elements with.
// el("a", {href: "/", class: "x", text: "go", onclick: f}, [child, "text", null]).
(function () {
  "use strict";
  function el(tag, attrs, children) {
    var e = document.createElement(tag);
    for (var k in attrs || {}) {
      if (k === "text") e.textContent = attrs[k];
      else if (k === "class") e.className = attrs[k];
      else if (k.slice(0, 2) === "on") e.addEventListener(k.slice(2), attrs[k]);
      else e.setAttribute(k, attrs[k]);
    }
    (children || []).forEach(function (c) { if (c) e.appendChild(typeof c === "string" ? document.createTextNode(c) : c); });
    return e;
  }
  window.OtelprofDom = { el: el };
})();
