// otelprof's flame graph viewer, the one of the self-contained HTML files (`otelprof flame`,
// `otelprof diff`: page) and of the web UI (`otelprof serve`: mount). No dependencies, no
// network. Data: frame names, and the call tree in preorder as parallel arrays (name index,
// depth, total value, self value, and for diffs the base value scaled to the head's total).
// Root on top; click a frame (or Enter on it) to zoom to it, Escape or "reset zoom" to zoom
// out, type to search (plain text, case-insensitive; /regex/ for a regular expression) and see
// the matched share (Enter there moves to the first matched frame); hover for details (frames
// carry file:line when asked for lines). Given opts.onFrame (the web UI), a frame's context
// action (right click, or c on the focused frame) hands its name over.
(function () {
  "use strict";
  var ROW = 18;
  var MIN_PCT = 0.02; // frames narrower than this share of the view are not drawn

  function fmt(v, u) {
    var a = Math.abs(v);
    if (u === "nanoseconds") {
      if (a >= 60e9) return (v / 60e9).toFixed(2) + " min";
      if (a >= 1e9) return (v / 1e9).toFixed(2) + " s";
      if (a >= 1e6) return (v / 1e6).toFixed(1) + " ms";
      if (a >= 1e3) return (v / 1e3).toFixed(1) + " us";
      return Math.round(v) + " ns";
    }
    if (u === "bytes") {
      var units = ["B", "KiB", "MiB", "GiB", "TiB"], k = 0;
      while (a >= 1024 && k < units.length - 1) { a /= 1024; k++; }
      return (v < 0 ? "-" : "") + a.toFixed(k ? 1 : 0) + " " + units[k];
    }
    return Math.round(v) + (u && u !== "count" ? " " + u : "");
  }
  function pct(v, of) { return of > 0 ? (100 * v / of).toFixed(2) + "%" : "0%"; }

  function hash(s) {
    var h = 2166136261;
    for (var k = 0; k < s.length; k++) { h ^= s.charCodeAt(k); h = Math.imul(h, 16777619); }
    return (h >>> 0) / 4294967296;
  }

  // The tree rebuilt from the preorder: each node's parent, start offset (in value units)
  // and the end of its subtree, and the deepest depth.
  function layout(D) {
    var n = D.name.length;
    var parent = new Int32Array(n), x = new Float64Array(n), end = new Int32Array(n);
    var stack = [], cursor = [], maxDepth = 0;
    for (var i = 0; i < n; i++) {
      var d = D.depth[i];
      if (d > maxDepth) maxDepth = d;
      while (stack.length > d) { end[stack.pop()] = i; cursor.pop(); }
      if (stack.length === 0) { parent[i] = -1; x[i] = 0; }
      else {
        parent[i] = stack[stack.length - 1];
        x[i] = cursor[cursor.length - 1];
        cursor[cursor.length - 1] += D.value[i];
      }
      stack.push(i); cursor.push(x[i]);
    }
    while (stack.length) end[stack.pop()] = n;
    return { n: n, parent: parent, x: x, end: end, maxDepth: maxDepth };
  }

  // A diff: red for a larger share of the whole than in the base, blue for a smaller one.
  // Otherwise: grey for role frames ([GC]), yellow for the JDK, orange for the application,
  // pink for native code, teal for the kernel.
  function color(D, i) {
    var name = D.names[D.name[i]];
    if (D.base) {
      var delta = (D.value[i] - D.base[i]) / (D.value[0] || 1);
      if (Math.abs(delta) < 0.0005) return "rgb(225,225,225)";
      var c = Math.round(225 - 170 * Math.min(1, Math.abs(delta) * 20));
      return delta > 0 ? "rgb(255," + c + "," + c + ")" : "rgb(" + c + "," + c + ",255)";
    }
    var r = hash(name);
    if (/^\[/.test(name)) return "rgb(200,200,200)";
    // Native and kernel code: their file is the binary they are in.
    if (/ \(\[kernel\.kallsyms\]\)$/.test(name)) return "rgb(" + Math.round(80 + 30 * r) + "," + Math.round(170 + 30 * r) + ",170)";
    if (/ \([^()]*\.so(\.[\w.]+)?\)$|\[vdso\]\)$/.test(name)) return "rgb(" + Math.round(225 + 25 * r) + "," + Math.round(120 + 40 * r) + ",170)";
    if (/^(java|javax|jdk|sun|com\.sun)\./.test(name)) {
      return "rgb(" + Math.round(205 + 40 * r) + "," + Math.round(165 + 50 * r) + ",60)";
    }
    return "rgb(" + Math.round(230 + 25 * r) + "," + Math.round(90 + 80 * r) + ",50)";
  }

  // Thread states (wall profiles): a colour each, and a frame coloured by the state most of
  // its time is in, paler the less that state dominates.
  var STATE_COLORS = {
    RUNNABLE: [44, 160, 44], NATIVE: [148, 103, 189], BLOCKED: [214, 39, 40], WAITING: [31, 119, 180],
    TIMED_WAITING: [120, 180, 230], GC_PAUSE: [90, 90, 90], UNKNOWN: [190, 190, 190]
  };
  function stateColor(D, i) {
    var k = D.states.length, best = -1, bestValue = 0, sum = 0;
    for (var s = 0; s < k; s++) {
      var v = D.state[i * k + s]; sum += v;
      if (v > bestValue) { bestValue = v; best = s; }
    }
    if (best < 0) return "rgb(235,235,235)";
    var c = STATE_COLORS[D.states[best]] || STATE_COLORS.UNKNOWN, mix = 0.6 * (1 - bestValue / sum);
    return "rgb(" + c.map(function (x) { return Math.round(x + (255 - x) * mix); }).join(",") + ")";
  }
  function stateLines(D, i) {
    var k = D.states.length, lines = [];
    for (var s = 0; s < k; s++) {
      var v = D.state[i * k + s];
      if (v > 0) lines.push("  " + D.states[s] + " " + fmt(v, D.unit) + " (" + pct(v, D.value[i]) + ")");
    }
    return lines;
  }

  function matcherOf(q) {
    if (!q) return null;
    if (q.length > 2 && q[0] === "/" && q[q.length - 1] === "/") {
      try { var re = new RegExp(q.slice(1, -1)); return function (s) { return re.test(s); }; }
      catch (e) { return function () { return false; }; }
    }
    var lower = q.toLowerCase();
    return function (s) { return s.toLowerCase().indexOf(lower) >= 0; };
  }

  // Draws `D` into the elements of `ui`: chart, search (an input), reset (a button), status,
  // tip, and keys (where Escape zooms out). opts.search: the first search; opts.onSearch(q):
  // told of every search; opts.onFrame(name): a frame's context action. Returns
  // {search(q), zoomTo(i)}.
  function view(ui, D, opts) {
    var t = layout(D), zoom = 0, matcher = null, byState = false;
    var chart = ui.chart, status = ui.status, tip = ui.tip;
    if (D.states && D.states.length && !D.base) {
      // Colour by thread state, or by kind of code: a picker beside the reset button.
      var picker = document.createElement("select");
      picker.className = "flamecolor";
      picker.setAttribute("aria-label", "colour frames by");
      [["code", "colour: code"], ["state", "colour: thread state"]].forEach(function (o) {
        var opt = document.createElement("option"); opt.value = o[0]; opt.textContent = o[1]; picker.appendChild(opt);
      });
      byState = opts.colorBy === "state"; picker.value = byState ? "state" : "code";
      picker.addEventListener("change", function () {
        byState = picker.value === "state"; render();
        if (opts.onColorBy) opts.onColorBy(picker.value);
      });
      ui.reset.parentNode.insertBefore(picker, ui.reset.nextSibling);
    }
    chart.style.height = ((t.maxDepth + 1) * ROW + 4) + "px";
    function name(i) { return D.names[D.name[i]]; }
    function matches(i) { return matcher !== null && matcher(name(i)); }

    function box(i, left, width, dim) {
      var e = document.createElement("div");
      e.className = "frame" + (dim ? " dim" : "") + (matches(i) ? " match" : "");
      e.style.left = left + "%"; e.style.width = width + "%"; e.style.top = (D.depth[i] * ROW) + "px";
      if (!matches(i)) e.style.background = byState ? stateColor(D, i) : color(D, i);
      if (byState) e.setAttribute("data-state-color", e.style.background);
      e.textContent = name(i);
      e.setAttribute("data-node", String(i));
      e.tabIndex = 0;
      e.setAttribute("role", "button");
      return e;
    }
    function render() {
      var frag = document.createDocumentFragment();
      var z0 = t.x[zoom], zw = D.value[zoom] || 1, drawn = 0;
      // Ancestors of the zoomed node, full width, dimmed.
      for (var a = t.parent[zoom]; a >= 0; a = t.parent[a]) frag.appendChild(box(a, 0, 100, true));
      for (var i = zoom; i < t.end[zoom]; i++) {
        var w = 100 * D.value[i] / zw;
        if (w < MIN_PCT) { i = t.end[i] - 1; continue; } // skip the whole (narrower) subtree
        frag.appendChild(box(i, 100 * (t.x[i] - z0) / zw, w, false));
        drawn++;
      }
      chart.textContent = ""; chart.appendChild(frag);
      chart.setAttribute("data-drawn", String(drawn));
      updateStatus();
    }
    function updateStatus() {
      var text = "";
      if (matcher !== null) {
        // Matched total without counting nested matches twice.
        var total = 0, count = 0;
        for (var i = 0; i < t.n; i++) {
          if (!matches(i)) continue;
          count++;
          var nested = false;
          for (var a = t.parent[i]; a >= 0; a = t.parent[a]) if (matches(a)) { nested = true; break; }
          if (!nested) total += D.value[i];
        }
        text = "matched " + count + " frames, " + fmt(total, D.unit) + " (" + pct(total, D.value[0]) + " of all)";
        status.setAttribute("data-matched", String(count));
      } else status.removeAttribute("data-matched");
      if (zoom !== 0) text += (text ? " · " : "") + "zoomed to " + name(zoom);
      status.textContent = text;
    }
    function setSearch(q) {
      matcher = matcherOf(q);
      render();
      if (opts.onSearch) opts.onSearch(q);
    }
    function zoomTo(i) { zoom = i; render(); }
    function showTip(ev) {
      var f = ev.target.closest(".frame");
      if (!f) { tip.style.display = "none"; return; }
      var i = Number(f.getAttribute("data-node")), all = D.value[0];
      var lines = [name(i),
        "total " + fmt(D.value[i], D.unit) + " (" + pct(D.value[i], all) + ")",
        "self " + fmt(D.self[i], D.unit) + " (" + pct(D.self[i], all) + ")"];
      if (opts.onFrame && i !== 0) lines.push("right click or c: callers and callees");
      if (D.base) {
        var change = D.value[i] - D.base[i];
        lines.push("base " + pct(D.base[i], all) + " → head " + pct(D.value[i], all) +
          " (" + (change >= 0 ? "+" : "") + (100 * change / (all || 1)).toFixed(2) + " pp)");
      }
      if (D.states && D.states.length) lines = lines.concat(["by thread state:"], stateLines(D, i));
      tip.textContent = lines.join("\n"); tip.style.display = "block";
      var px = ev.clientX + 14;
      if (px + tip.offsetWidth > window.innerWidth) px = ev.clientX - tip.offsetWidth - 8;
      tip.style.left = px + "px"; tip.style.top = (ev.clientY + 14) + "px";
    }

    chart.addEventListener("click", function (ev) {
      var f = ev.target.closest(".frame"); if (f) zoomTo(Number(f.getAttribute("data-node")));
    });
    // The context action on frame element `f` (never on the root, which is no function).
    function act(ev, f) {
      var i = f ? Number(f.getAttribute("data-node")) : 0;
      if (!opts.onFrame || i === 0) return;
      ev.preventDefault(); tip.style.display = "none"; opts.onFrame(name(i));
    }
    chart.addEventListener("keydown", function (ev) {
      var f = ev.target.closest(".frame");
      if (f && (ev.key === "Enter" || ev.key === " ")) { ev.preventDefault(); zoomTo(Number(f.getAttribute("data-node"))); }
      else if (ev.key === "c" && !ev.ctrlKey && !ev.metaKey && !ev.altKey) act(ev, f);
    });
    chart.addEventListener("contextmenu", function (ev) { act(ev, ev.target.closest(".frame")); });
    ui.search.addEventListener("keydown", function (ev) {
      var first = ev.key === "Enter" && chart.querySelector(".frame.match");
      if (first) { ev.preventDefault(); first.focus(); }
    });
    ui.reset.addEventListener("click", function () { zoomTo(0); });
    ui.keys.addEventListener("keydown", function (ev) { if (ev.key === "Escape") zoomTo(0); });
    ui.search.addEventListener("input", function () { setSearch(ui.search.value); });
    chart.addEventListener("mousemove", showTip);
    chart.addEventListener("mouseleave", function () { tip.style.display = "none"; });
    if (opts.search) { ui.search.value = opts.search; setSearch(opts.search); } else render();
    return { search: function (q) { ui.search.value = q; setSearch(q); }, zoomTo: zoomTo };
  }

  // The web UI's flame graph: a bar (search, reset, status, legend) and the chart, made in
  // `root`. Returns {search(q), reset(), input}.
  function mount(root, D, opts) {
    function make(tag, className, text) {
      var e = document.createElement(tag);
      if (className) e.className = className;
      if (text) e.textContent = text;
      return e;
    }
    root.textContent = "";
    var bar = make("div", "flamebar");
    var search = make("input", "flamesearch");
    search.type = "search"; search.placeholder = "search frames (text or /regex/), press /";
    search.setAttribute("aria-label", "search frames");
    var reset = make("button", "", "reset zoom"); reset.type = "button";
    var status = make("span", "flamestatus"); status.setAttribute("aria-live", "polite");
    var legend = make("span", "meta", (D.base ? "red: larger share than in the base, blue: smaller" : "orange: application, yellow: JDK, pink: native, teal: kernel") +
      (opts && opts.onFrame ? "; right click or c on a frame: its callers and callees" : ""));
    if (D.states && D.states.length && !D.base) {
      legend.textContent += "; by state: " + D.states.map(function (s) {
        return s + " " + ({ RUNNABLE: "green", NATIVE: "purple", BLOCKED: "red", WAITING: "blue", TIMED_WAITING: "light blue", GC_PAUSE: "dark grey" }[s] || "grey");
      }).join(", ");
    }
    bar.appendChild(search); bar.appendChild(reset); bar.appendChild(status); bar.appendChild(legend);
    var chart = make("div", "chart");
    root.appendChild(bar); root.appendChild(chart);
    var v = view({ chart: chart, search: search, reset: reset, status: status, tip: document.getElementById("tip"), keys: root },
      D, opts || {});
    return { search: v.search, reset: function () { v.zoomTo(0); }, input: search };
  }

  // A self-contained page: its elements by id, the first search from the URL's #search=,
  // Ctrl-F to the search box; window.otelprofFlame to drive it from a script.
  function page(D) {
    function byId(id) { return document.getElementById(id); }
    var search = byId("search");
    var hashQuery = /[#&]search=([^&]*)/.exec(window.location.hash);
    var v = view({ chart: byId("chart"), search: search, reset: byId("reset"), status: byId("status"), tip: byId("tip"), keys: document },
      D, { search: hashQuery ? decodeURIComponent(hashQuery[1]) : "" });
    document.addEventListener("keydown", function (ev) {
      if ((ev.ctrlKey || ev.metaKey) && ev.key === "f") { ev.preventDefault(); search.focus(); }
    });
    window.otelprofFlame = v;
  }

  window.OtelprofFlame = { mount: mount, page: page, fmt: fmt };
})();
