// The flame graph of otelprof serve: the viewer of `otelprof flame`'s HTML (cli/src/flame/
// flame.js) as a component. Data: frame names and the call tree in preorder as parallel arrays
// (name index, depth, value, self, and for diffs the base scaled to the head's total). Click or
// Enter on a frame to focus it, Escape to reset, type in the search box to see the matched
// share; tooltips show file:line (frames carry it with lines=1) and self/total.
(function () {
  "use strict";
  var ROW = 18, MIN_PCT = 0.05;

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
  function hash(s) {
    var h = 2166136261;
    for (var k = 0; k < s.length; k++) { h ^= s.charCodeAt(k); h = Math.imul(h, 16777619); }
    return (h >>> 0) / 4294967296;
  }

  // Draws `D` into `root` (an element); returns {search(q), reset()}.
  function mount(root, D, opts) {
    opts = opts || {};
    var n = D.name.length;
    var parent = new Int32Array(n), x = new Float64Array(n), end = new Int32Array(n);
    var stack = [], cursor = [];
    for (var i = 0; i < n; i++) {
      var d = D.depth[i];
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
    var maxDepth = 0;
    for (i = 0; i < n; i++) if (D.depth[i] > maxDepth) maxDepth = D.depth[i];

    root.textContent = "";
    var bar = document.createElement("div"); bar.className = "flamebar";
    var search = document.createElement("input");
    search.type = "search"; search.placeholder = "search frames (text or /regex/), press /";
    search.setAttribute("aria-label", "search frames");
    search.className = "flamesearch";
    var reset = document.createElement("button"); reset.type = "button"; reset.textContent = "reset zoom";
    var status = document.createElement("span"); status.className = "flamestatus"; status.setAttribute("aria-live", "polite");
    var legend = document.createElement("span"); legend.className = "meta";
    legend.textContent = D.base ? "red: larger share than in the base, blue: smaller" : "orange: application, yellow: JDK";
    bar.appendChild(search); bar.appendChild(reset); bar.appendChild(status); bar.appendChild(legend);
    var chart = document.createElement("div"); chart.className = "chart";
    chart.style.height = ((maxDepth + 1) * ROW + 4) + "px";
    root.appendChild(bar); root.appendChild(chart);
    var tip = document.getElementById("tip");

    function color(i) {
      var name = D.names[D.name[i]];
      if (D.base) {
        var delta = (D.value[i] - D.base[i]) / (D.value[0] || 1);
        if (Math.abs(delta) < 0.0005) return "rgb(225,225,225)";
        var c = Math.round(225 - 170 * Math.min(1, Math.abs(delta) * 20));
        return delta > 0 ? "rgb(255," + c + "," + c + ")" : "rgb(" + c + "," + c + ",255)";
      }
      var r = hash(name);
      if (/^\[/.test(name)) return "rgb(200,200,200)";
      if (/^(java|javax|jdk|sun|com\.sun)\./.test(name)) return "rgb(" + Math.round(205 + 40 * r) + "," + Math.round(165 + 50 * r) + ",60)";
      return "rgb(" + Math.round(230 + 25 * r) + "," + Math.round(90 + 80 * r) + ",50)";
    }
    var zoom = 0, matcher = null;
    function matches(i) { return matcher !== null && matcher(D.names[D.name[i]]); }
    function box(i, left, width, dim) {
      var e = document.createElement("div");
      e.className = "frame" + (dim ? " dim" : "") + (matches(i) ? " match" : "");
      e.style.left = left + "%"; e.style.width = width + "%"; e.style.top = (D.depth[i] * ROW) + "px";
      e.style.background = color(i);
      e.textContent = D.names[D.name[i]];
      e.setAttribute("data-node", String(i));
      e.tabIndex = 0;
      e.setAttribute("role", "button");
      return e;
    }
    function render() {
      var frag = document.createDocumentFragment();
      var z0 = x[zoom], zw = D.value[zoom] || 1, drawn = 0;
      for (var a = parent[zoom]; a >= 0; a = parent[a]) frag.appendChild(box(a, 0, 100, true));
      for (var i = zoom; i < end[zoom]; i++) {
        var w = 100 * D.value[i] / zw;
        if (w < MIN_PCT) { i = end[i] - 1; continue; }
        frag.appendChild(box(i, 100 * (x[i] - z0) / zw, w, false));
        drawn++;
      }
      chart.textContent = ""; chart.appendChild(frag);
      chart.setAttribute("data-drawn", String(drawn));
      var text = "";
      if (matcher !== null) {
        var total = 0, count = 0;
        for (i = 0; i < n; i++) {
          if (!matches(i)) continue;
          count++;
          var nested = false;
          for (a = parent[i]; a >= 0; a = parent[a]) if (matches(a)) { nested = true; break; }
          if (!nested) total += D.value[i];
        }
        text = "matched " + count + " frames, " + fmt(total, D.unit) + " (" + (D.value[0] > 0 ? (100 * total / D.value[0]).toFixed(2) : "0") + "% of all)";
        status.setAttribute("data-matched", String(count));
      } else status.removeAttribute("data-matched");
      if (zoom !== 0) text += (text ? " · " : "") + "focused on " + D.names[D.name[zoom]];
      status.textContent = text;
    }
    function setSearch(q) {
      if (!q) matcher = null;
      else if (q.length > 2 && q[0] === "/" && q[q.length - 1] === "/") {
        try { var re = new RegExp(q.slice(1, -1)); matcher = function (s) { return re.test(s); }; }
        catch (e) { matcher = function () { return false; }; }
      } else {
        var lower = q.toLowerCase();
        matcher = function (s) { return s.toLowerCase().indexOf(lower) >= 0; };
      }
      render();
      if (opts.onSearch) opts.onSearch(q);
    }
    function focusNode(i) { zoom = i; render(); }
    chart.addEventListener("click", function (ev) {
      var t = ev.target.closest(".frame"); if (t) focusNode(Number(t.getAttribute("data-node")));
    });
    chart.addEventListener("keydown", function (ev) {
      var t = ev.target.closest(".frame");
      if (t && (ev.key === "Enter" || ev.key === " ")) { ev.preventDefault(); focusNode(Number(t.getAttribute("data-node"))); }
    });
    reset.addEventListener("click", function () { focusNode(0); });
    root.addEventListener("keydown", function (ev) { if (ev.key === "Escape") focusNode(0); });
    search.addEventListener("input", function () { setSearch(search.value); });
    chart.addEventListener("mousemove", function (ev) {
      var t = ev.target.closest(".frame");
      if (!t) { tip.style.display = "none"; return; }
      var i = Number(t.getAttribute("data-node")), all = D.value[0] || 1;
      var lines = [D.names[D.name[i]],
        "total " + fmt(D.value[i], D.unit) + " (" + (100 * D.value[i] / all).toFixed(2) + "%)",
        "self " + fmt(D.self[i], D.unit) + " (" + (100 * D.self[i] / all).toFixed(2) + "%)"];
      if (D.base) lines.push("base " + (100 * D.base[i] / all).toFixed(2) + "% → head " + (100 * D.value[i] / all).toFixed(2) + "%");
      tip.textContent = lines.join("\n"); tip.style.display = "block";
      var px = ev.clientX + 14;
      if (px + tip.offsetWidth > window.innerWidth) px = ev.clientX - tip.offsetWidth - 8;
      tip.style.left = px + "px"; tip.style.top = (ev.clientY + 14) + "px";
    });
    chart.addEventListener("mouseleave", function () { tip.style.display = "none"; });
    if (opts.search) { search.value = opts.search; setSearch(opts.search); } else render();
    return { search: function (q) { search.value = q; setSearch(q); }, reset: function () { focusNode(0); }, input: search };
  }
  window.OtelprofFlame = { mount: mount, fmt: fmt };
})();
