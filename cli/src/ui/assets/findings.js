// otelprof serve: the Findings panel of Explore. It shows what `otelprof findings --format
// json` answers for the view's selection (/api/findings: the same engine call and the same
// JSON), in the command's order: severity, title, cost, cost per request, the responsible
// method with file:line, why it fired, the fix, the endpoints it costs most in, and its
// evidence stacks (at most 3). Each stack links to Explore focused on it: the finding's
// profile type, `include=` the responsible method when the stack holds it (else the stack's
// leaf frame), and the search box set to the leaf frame, so that the evidence is what the
// flame graph shows. OtelprofFindings.mount(box, params, api, go).
(function () {
  "use strict";
  var el = window.OtelprofDom.el;
  var fmt = window.OtelprofFlame.fmt;
  // Explore parameters that are no flag of `otelprof findings`: the flame graph's search and
  // colour, the trend, the timeline's grouping; findings reads each type's own value, by
  // function (the CLI refuses --value and --lines).
  var NOT_FLAGS = ["search", "color", "trend", "by", "limit", "lines", "value"];
  // Frames of a stack shown in its link, from the leaf (all of them are in its tooltip).
  var SHOWN_FRAMES = 8;

  function selection(p) {
    var q = new URLSearchParams(p);
    NOT_FLAGS.forEach(function (k) { q.delete(k); });
    return q;
  }

  function share(x) { return (100 * x).toFixed(1) + " %"; }

  // The cost as the command prints it: share of what, and the value in its unit.
  function cost(f) { return share(f.share) + " of " + f.of + " (" + fmt(f.value, f.unit) + ")"; }

  // The frame a stack's link focuses on: the finding's method when the stack holds it, else
  // the stack's leaf.
  function anchor(f, s) {
    return f.method && s.frames.indexOf(f.method) >= 0 ? f.method : s.frames[s.frames.length - 1];
  }

  // Explore of the selection `p` focused on stack `s` of finding `f`.
  function stackQuery(p, f, s) {
    var q = new URLSearchParams(p);
    ["include", "search", "trend", "type", "lines", "value", "color", "new_against"].forEach(function (k) { q.delete(k); });
    q.set("type", f.type);
    q.append("include", anchor(f, s));
    q.set("search", s.frames[s.frames.length - 1]);
    return q;
  }

  function stackItem(p, f, s, n, go) {
    var leafFirst = s.frames.slice().reverse();
    var top = anchor(f, s), upTo = top === f.method ? leafFirst.indexOf(top) : -1;
    var q = stackQuery(p, f, s);
    var a = el("a", { class: "evidence", href: "/?" + q.toString(), "data-stack": String(n),
      title: "Explore focused on this stack (include " + top + "):\n" + leafFirst.join("\n") });
    a.appendChild(el("span", { class: "stackvalue", text: "stack " + (n + 1) + " · " + fmt(s.value, f.unit) }));
    function frames(list) { list.forEach(function (frame) { a.appendChild(el("span", { class: "stackframe", text: frame })); }); }
    function more(k) { if (k > 0) a.appendChild(el("span", { class: "stackframe more", text: "… " + k + " more" })); }
    // The leaf side up to the finding's method (its frames beyond SHOWN_FRAMES elided), or
    // the SHOWN_FRAMES nearest the leaf when the stack does not hold it, then how many frames
    // lie above.
    var end = upTo >= 0 ? upTo + 1 : Math.min(SHOWN_FRAMES, leafFirst.length);
    if (end > SHOWN_FRAMES) {
      frames(leafFirst.slice(0, SHOWN_FRAMES - 1));
      more(end - SHOWN_FRAMES);
      frames([leafFirst[end - 1]]);
    } else {
      frames(leafFirst.slice(0, end));
    }
    more(leafFirst.length - end);
    a.addEventListener("click", function (ev) {
      if (ev.ctrlKey || ev.metaKey || ev.shiftKey) return;
      ev.preventDefault();
      go("/", q);
    });
    return el("li", {}, [a]);
  }

  function field(label, cls, text) {
    return el("div", { class: "field " + cls }, [el("span", { class: "label", text: label + ": " }), el("span", { class: "text", text: text })]);
  }

  function finding(p, f, i, go) {
    var li = el("li", { class: "finding", "data-rule": f.rule, "data-severity": f.severity });
    // Against a baseline (`new_against=`, the CLI's --new-against): new, or also there.
    var age = f.new === true ? "new" : f.new === false ? "also in the baseline" : null;
    li.appendChild(el("h3", {}, [
      el("span", { class: "severity " + f.severity, text: f.severity }),
      age ? el("span", { class: "age" + (f.new ? " new" : ""), text: age }) : null,
      el("span", { class: "title", text: f.title })
    ]));
    var c = field("cost", "cost", cost(f));
    if (f.per_request != null) c.appendChild(el("span", { class: "perrequest", text: ", " + fmt(f.per_request, f.unit) + " per request" }));
    li.appendChild(c);
    if (f.method) li.appendChild(field("method", "method", f.method + (f.file ? " (" + f.file + ")" : "")));
    li.appendChild(field("why", "why", f.why));
    li.appendChild(field("fix", "fix", f.fix));
    if (f.endpoints.length) {
      li.appendChild(field("endpoints", "endpoints", f.endpoints.map(function (e) {
        return e.endpoint + " (" + fmt(e.value, f.unit) + ")";
      }).join(", ")));
    }
    if (f.traces && f.traces.length) {
      // The traces with the most of it: each a link to the trace's view.
      var tr = field("traces", "traces", "");
      f.traces.forEach(function (t, k) {
        if (k) tr.appendChild(document.createTextNode(", "));
        tr.appendChild(el("a", { href: "/trace/" + t.trace_id, text: t.trace_id.slice(0, 16) + "… (" + fmt(t.value, f.unit) + ")" }));
      });
      li.appendChild(tr);
    }
    var stacks = el("ol", { class: "stacks", "aria-label": "evidence stacks of finding " + (i + 1) });
    f.stacks.forEach(function (s, n) { stacks.appendChild(stackItem(p, f, s, n, go)); });
    li.appendChild(stacks);
    return li;
  }

  function draw(box, p, d, go) {
    var n = d.findings.length;
    var details = el("details", { open: "" });
    details.appendChild(el("summary", {}, [
      el("h2", { text: n ? "Findings: " + n : "Findings" }),
      el("span", { class: "examined", text: " (" + d.examined + ")" })
    ]));
    if (n === 0) {
      details.appendChild(el("p", { id: "no-findings", text: "No findings in this selection (" + d.examined +
        "): none of the known patterns (docs/findings.md) passes its threshold." }));
    } else {
      var list = el("ol", { class: "findings" });
      d.findings.forEach(function (f, i) { list.appendChild(finding(p, f, i, go)); });
      details.appendChild(list);
    }
    box.appendChild(details);
  }

  function mount(box, p, api, go) {
    box.textContent = "";
    box.setAttribute("data-state", "loading");
    var q = selection(p);
    api("findings", q).then(function (d) {
      draw(box, q, d, go);
      box.setAttribute("data-state", "done");
    }, function (e) {
      // The CLI's error as it says it (the panel is the context), as every view shows errors.
      box.appendChild(el("p", { class: "error", role: "alert", text: String(e.message || e) }));
      box.setAttribute("data-state", "error");
    });
  }

  window.OtelprofFindings = { mount: mount, query: stackQuery };
})();
