// otelprof serve: the focus fields every reading view shows. Include, Exclude and Hide each
// hold patterns (`*` for any run, matched against the whole pkg.Class.method), separated by
// spaces or commas; in the URL each pattern is one parameter (include=a&include=b), as each is
// one flag of the CLI (--include a --include b). The server applies them (the store's focus,
// the CLI's rules and errors); this file only reads and writes them.
(function () {
  "use strict";
  var el = window.OtelprofDom.el;
  var KEYS = [
    ["include", "keep only stacks with a matching frame", "com.shop.*"],
    ["exclude", "drop stacks with a matching frame", "*.Logger.*"],
    ["hide", "remove matching frames from stacks", "java.*"]
  ];

  function split(text) { return text.split(/[\s,]+/).filter(function (g) { return g !== ""; }); }

  // The three fields, filled from `p`, as labels appended to `form`. Escape in a field puts
  // back what the URL says; Enter submits the form as in any other field.
  function fields(form, p) {
    var set = el("fieldset", { class: "focus" }, [el("legend", { text: "focus" })]);
    KEYS.forEach(function (k) {
      var shown = p.getAll(k[0]).join(" ");
      var input = el("input", { name: k[0], value: shown, placeholder: k[2], size: "18", title: k[1] + "; several: separate by spaces", "aria-label": k[0] + ": " + k[1] });
      input.addEventListener("keydown", function (ev) { if (ev.key === "Escape") { input.value = shown; ev.stopPropagation(); } });
      set.appendChild(el("label", {}, [k[0], input]));
    });
    form.appendChild(set);
    return set;
  }

  // `q` with the focus the fields of `form` hold (replacing any it had).
  function read(form, q) {
    KEYS.forEach(function (k) {
      q.delete(k[0]);
      split(form.elements[k[0]].value).forEach(function (g) { q.append(k[0], g); });
    });
    return q;
  }

  // `q` with the focus of `p`: moving between views keeps it.
  function carry(p, q) {
    KEYS.forEach(function (k) {
      q.delete(k[0]);
      p.getAll(k[0]).forEach(function (g) { q.append(k[0], g); });
    });
    return q;
  }

  // A form of its own for views without a selection form (a trace): the fields and a button;
  // `submit(q)` gets `p` with the new focus.
  function form(p, submit) {
    var f = el("form", { class: "controls", "aria-label": "focus" });
    fields(f, p);
    f.appendChild(el("button", { type: "submit", text: "Apply" }));
    f.addEventListener("submit", function (ev) { ev.preventDefault(); submit(read(f, new URLSearchParams(p))); });
    return f;
  }

  window.OtelprofFocus = { fields: fields, read: read, carry: carry, form: form };
})();
