// otelprof serve: the butterfly view (/callers?function=GLOB&<selection>), what `otelprof
// callers GLOB` and `otelprof callees GLOB` print for the same selection and focus: for each
// matching function, the paths into it and the tree below it, each path with its share of the
// function's total. The server computes the trees (/api/butterfly); this file draws them. A
// function's name is a link that re-centres the view on it (Tab to it, Enter); Escape goes
// back to the flame graph of the selection.
(function () {
  "use strict";
  var el = window.OtelprofDom.el;
  var fmt = window.OtelprofFlame.fmt;
  // The parameters that make the selection (the CLI's selection flags), carried into and out
  // of the view; everything else (search, by, a view's own flags) stays behind.
  var SELECTION = ["where", "type", "value", "from", "to", "trace_id", "span_id", "lines", "include", "exclude", "hide"];

  function selection(p) {
    var q = new URLSearchParams();
    SELECTION.forEach(function (k) { p.getAll(k).forEach(function (v) { q.append(k, v); }); });
    return q;
  }

  // The view's URL for the function of frame `name` over the selection of `p`. Frames are
  // shown with their source file (`pkg.Class.method (Class.java)`); the function is the name
  // before it, as the CLI's pattern matches it.
  function link(p, name) {
    var q = selection(p);
    q.set("function", name.replace(/ \([^()]*\)$/, ""));
    ["depth", "min"].forEach(function (k) { if (p.get(k)) q.set(k, p.get(k)); });
    return "/callers?" + q.toString();
  }

  function share(x) { return x.toFixed(2) + "%"; }

  // One half: the paths below `fn`, indented by level, largest first, as the CLI lists them.
  function half(app, p, fn, word, min) {
    var list = el("ol", { class: "paths", "data-half": word, "aria-label": word + " of " + fn.name });
    function rows(branch, level) {
      branch.children.forEach(function (c) {
        var a = el("a", { href: link(p, c.name), text: c.name, title: "re-centre on " + c.name });
        a.addEventListener("click", function (ev) {
          if (ev.ctrlKey || ev.metaKey || ev.shiftKey) return;
          ev.preventDefault(); app.go(a.getAttribute("href"));
        });
        var li = el("li", { "data-level": String(level) }, [el("span", { class: "share", text: share(c.share) }), a]);
        li.style.paddingLeft = (1.2 * (level - 1)) + "em";
        list.appendChild(li);
        rows(c, level + 1);
      });
      if (branch.left_out) {
        var more = el("li", { class: "more", "data-level": String(level) }, [el("span", { class: "share", text: share(branch.left_out.share) }),
          "(" + branch.left_out.count + " more under " + min + "%)"]);
        more.style.paddingLeft = (1.2 * (level - 1)) + "em";
        list.appendChild(more);
      }
    }
    rows(fn, 1);
    var title = word === "callers" ? "Callers (paths into it, innermost first)" : "Callees (what it calls)";
    return el("section", { class: "half" }, [el("h3", { text: title }), list]);
  }

  function byName(list) {
    var out = {};
    list.forEach(function (f) { out[f.name] = f; });
    return out;
  }

  // The view in `main`: `app` is the page's {api, go, fail}.
  function show(main, p, app) {
    var box = el("div", { id: "butterfly" }); main.appendChild(box);
    var fn = p.get("function") || "";
    box.appendChild(el("h2", { text: "Callers and callees of " + fn }));
    var form = el("form", { class: "controls", "aria-label": "butterfly" });
    var input = el("input", { name: "function", value: fn, placeholder: "*.findProduct", size: "40", "aria-label": "function (pattern)" });
    form.appendChild(el("label", {}, ["function", input]));
    window.OtelprofFocus.fields(form, p);
    form.appendChild(el("button", { type: "submit", text: "Show" }));
    var back = el("a", { href: "/?" + selection(p).toString(), class: "back", text: "flame graph of this selection (Escape)" });
    form.appendChild(back);
    form.addEventListener("submit", function (ev) {
      ev.preventDefault();
      var q = window.OtelprofFocus.read(form, new URLSearchParams(p));
      q.set("function", input.value.trim());
      app.go("/callers?" + q.toString());
    });
    back.addEventListener("click", function (ev) { ev.preventDefault(); app.go(back.getAttribute("href")); });
    box.appendChild(form);
    if (!fn) { box.appendChild(el("p", { class: "meta", text: "Name a function, or right-click a frame of a flame graph (or press c on it)." })); return; }
    var q = new URLSearchParams(p); q.delete("search");
    app.api("butterfly", q).then(function (d) {
      box.appendChild(el("p", { class: "meta", text: d.header.text }));
      var callees = byName(d.callees);
      d.callers.forEach(function (f) {
        var section = el("section", { class: "function", "data-function": f.name }, [
          el("h2", { text: f.name + "  " + fmt(f.value, d.header.unit) + " (" + share(f.share) + " of all)" }),
          el("div", { class: "butterfly" }, [half(app, p, f, "callers", d.min), half(app, p, callees[f.name] || { children: [] }, "callees", d.min)])
        ]);
        box.appendChild(section);
      });
      var first = box.querySelector("ol.paths a");
      if (first && document.activeElement === document.body) first.focus();
    }).catch(function (e) { app.fail(box, e); });
  }

  // Escape anywhere on the view but in a field: back to the flame graph of the selection.
  document.addEventListener("keydown", function (ev) {
    var back = document.querySelector("#butterfly a.back");
    if (ev.key !== "Escape" || !back || /^(INPUT|SELECT|TEXTAREA)$/.test(ev.target.tagName)) return;
    ev.preventDefault(); back.click();
  });

  window.OtelprofButterfly = { show: show, link: link };
})();
