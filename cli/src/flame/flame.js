// otelprof flame graph viewer: no dependencies, no network. Reads the DATA object that
// otelprof embeds in the page: frame names, and the call tree in preorder as parallel arrays
// (name index, depth, total value, self value, and for diffs the base value scaled to the
// head's total). Root on top; click to zoom, Escape or "reset" to zoom out, type to search
// (plain text, case-insensitive; /regex/ for a regular expression); hover for details.
(function () {
  "use strict";
  var D = window.OTELPROF_FLAME;
  var n = D.name.length;
  var ROW = 18;
  var MIN_PCT = 0.02; // frames narrower than this share of the view are not drawn

  // Rebuild the tree: parent, start offset (in value units) and end of each subtree.
  var parent = new Int32Array(n), x = new Float64Array(n), end = new Int32Array(n);
  var stack = [], cursor = [];
  for (var i = 0; i < n; i++) {
    var d = D.depth[i];
    while (stack.length > d) { var j = stack.pop(); end[j] = i; cursor.pop(); }
    if (stack.length === 0) { parent[i] = -1; x[i] = 0; }
    else {
      var p = stack[stack.length - 1];
      parent[i] = p;
      x[i] = cursor[cursor.length - 1];
      cursor[cursor.length - 1] += D.value[i];
    }
    stack.push(i); cursor.push(x[i]);
  }
  while (stack.length) { end[stack.pop()] = n; }
  var maxDepth = 0;
  for (i = 0; i < n; i++) if (D.depth[i] > maxDepth) maxDepth = D.depth[i];

  var chart = document.getElementById("chart");
  var tip = document.getElementById("tip");
  var status = document.getElementById("status");
  var search = document.getElementById("search");
  chart.style.height = ((maxDepth + 1) * ROW + 4) + "px";

  function fmt(v) {
    var u = D.unit;
    if (u === "nanoseconds") {
      var a = Math.abs(v);
      if (a >= 60e9) return (v / 60e9).toFixed(2) + " min";
      if (a >= 1e9) return (v / 1e9).toFixed(2) + " s";
      if (a >= 1e6) return (v / 1e6).toFixed(1) + " ms";
      if (a >= 1e3) return (v / 1e3).toFixed(1) + " us";
      return Math.round(v) + " ns";
    }
    if (u === "bytes") {
      var units = ["B", "KiB", "MiB", "GiB", "TiB"], k = 0, b = Math.abs(v);
      while (b >= 1024 && k < units.length - 1) { b /= 1024; k++; }
      return (v < 0 ? "-" : "") + b.toFixed(k ? 1 : 0) + " " + units[k];
    }
    return Math.round(v) + (u && u !== "count" ? " " + u : "");
  }
  function pct(v, of) { return of > 0 ? (100 * v / of).toFixed(2) + "%" : "0%"; }

  function hash(s) {
    var h = 2166136261;
    for (var k = 0; k < s.length; k++) { h ^= s.charCodeAt(k); h = Math.imul(h, 16777619); }
    return (h >>> 0) / 4294967296;
  }
  function color(i) {
    var name = D.names[D.name[i]];
    if (D.base) {
      // Share of own total, head vs base (base already scaled to the head's total).
      var v = D.value[i], b = D.base[i], tot = D.value[0] || 1;
      var delta = (v - b) / tot; // change in share of the whole
      var s = Math.min(1, Math.abs(delta) * 20);
      if (Math.abs(delta) < 0.0005) return "rgb(225,225,225)";
      var c = Math.round(225 - 170 * s);
      return delta > 0 ? "rgb(255," + c + "," + c + ")" : "rgb(" + c + "," + c + ",255)";
    }
    var r = hash(name);
    if (/^\[/.test(name)) return "rgb(200,200,200)";
    if (/^(java|javax|jdk|sun|com\.sun)\./.test(name)) {
      return "rgb(" + Math.round(205 + 40 * r) + "," + Math.round(165 + 50 * r) + ",60)";
    }
    return "rgb(" + Math.round(230 + 25 * r) + "," + Math.round(90 + 80 * r) + ",50)";
  }

  var zoom = 0; // node shown at full width
  var matcher = null;

  function matches(i) { return matcher !== null && matcher(D.names[D.name[i]]); }

  function render() {
    var frag = document.createDocumentFragment();
    var z0 = x[zoom], zw = D.value[zoom] || 1, zd = D.depth[zoom];
    var drawn = 0;
    // Ancestors of the zoomed node, full width, dimmed.
    for (var a = parent[zoom]; a >= 0; a = parent[a]) frag.appendChild(box(a, 0, 100, true));
    for (var i = zoom; i < end[zoom]; i++) {
      var w = 100 * D.value[i] / zw;
      if (w < MIN_PCT) { i = end[i] - 1; continue; } // skip the whole (narrower) subtree
      frag.appendChild(box(i, 100 * (x[i] - z0) / zw, w, false));
      drawn++;
    }
    chart.textContent = "";
    chart.appendChild(frag);
    chart.setAttribute("data-drawn", String(drawn));
    updateStatus();
  }

  function box(i, left, width, dim) {
    var e = document.createElement("div");
    e.className = "frame" + (dim ? " dim" : "") + (matches(i) ? " match" : "");
    e.style.left = left + "%";
    e.style.width = width + "%";
    e.style.top = (D.depth[i] * ROW) + "px";
    if (!(matches(i))) e.style.background = color(i);
    e.textContent = D.names[D.name[i]];
    e.setAttribute("data-node", String(i));
    return e;
  }

  function updateStatus() {
    var text = "";
    if (matcher !== null) {
      // Matched total without counting nested matches twice.
      var total = 0, count = 0;
      for (var i = 0; i < n; i++) {
        if (!matches(i)) continue;
        count++;
        var nested = false;
        for (var a = parent[i]; a >= 0; a = parent[a]) if (matches(a)) { nested = true; break; }
        if (!nested) total += D.value[i];
      }
      text = "matched " + count + " frames, " + fmt(total) + " (" + pct(total, D.value[0]) + " of all)";
      status.setAttribute("data-matched", String(count));
    } else {
      status.removeAttribute("data-matched");
    }
    if (zoom !== 0) text += (text ? " · " : "") + "zoomed to " + D.names[D.name[zoom]];
    status.textContent = text;
  }

  function setSearch(q) {
    if (!q) { matcher = null; }
    else if (q.length > 2 && q[0] === "/" && q[q.length - 1] === "/") {
      try { var re = new RegExp(q.slice(1, -1)); matcher = function (s) { return re.test(s); }; }
      catch (e) { matcher = function () { return false; }; }
    } else {
      var lower = q.toLowerCase();
      matcher = function (s) { return s.toLowerCase().indexOf(lower) >= 0; };
    }
    render();
  }

  chart.addEventListener("click", function (ev) {
    var t = ev.target.closest(".frame");
    if (!t) return;
    zoom = Number(t.getAttribute("data-node"));
    render();
  });
  document.getElementById("reset").addEventListener("click", function () { zoom = 0; render(); });
  document.addEventListener("keydown", function (ev) {
    if (ev.key === "Escape") { zoom = 0; render(); }
    if ((ev.ctrlKey || ev.metaKey) && ev.key === "f") { ev.preventDefault(); search.focus(); }
  });
  search.addEventListener("input", function () { setSearch(search.value); });

  chart.addEventListener("mousemove", function (ev) {
    var t = ev.target.closest(".frame");
    if (!t) { tip.style.display = "none"; return; }
    var i = Number(t.getAttribute("data-node"));
    var all = D.value[0];
    var lines = [D.names[D.name[i]],
      "total " + fmt(D.value[i]) + " (" + pct(D.value[i], all) + ")",
      "self " + fmt(D.self[i]) + " (" + pct(D.self[i], all) + ")"];
    if (D.base) {
      lines.push("base " + pct(D.base[i], all) + " → head " + pct(D.value[i], all) +
        " (" + ((D.value[i] - D.base[i]) >= 0 ? "+" : "") + (100 * (D.value[i] - D.base[i]) / (all || 1)).toFixed(2) + " pp)");
    }
    tip.textContent = lines.join("\n");
    tip.style.display = "block";
    var px = ev.clientX + 14, py = ev.clientY + 14;
    if (px + tip.offsetWidth > window.innerWidth) px = ev.clientX - tip.offsetWidth - 8;
    tip.style.left = px + "px";
    tip.style.top = py + "px";
  });
  chart.addEventListener("mouseleave", function () { tip.style.display = "none"; });

  var hashQuery = /[#&]search=([^&]*)/.exec(window.location.hash);
  if (hashQuery) { search.value = decodeURIComponent(hashQuery[1]); setSearch(search.value); }
  else render();
  window.otelprofFlame = { search: setSearch, zoomTo: function (i) { zoom = i; render(); } };
})();
