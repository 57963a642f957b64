// otelprof serve: one page, six views, each a URL whose query parameters are the CLI's
// flags (where, type, from, to, trace_id, span_id, base, head, by, lines, and the focus:
// include, exclude, hide, focus.js). The page asks /api/<view> with the same parameters;
// everything shown is the CLI's answer. The butterfly view (/callers) is butterfly.js, the
// Findings panel of Explore findings.js.
(function () {
  "use strict";
  var main = document.getElementById("main");
  var busy = document.getElementById("busy");
  var fmt = window.OtelprofFlame.fmt;
  var el = window.OtelprofDom.el;
  var TOKEN_KEY = "otelprof-token";

  function pct(x) { return (100 * x).toFixed(2) + "%"; }
  function pp(x) { return (x >= 0 ? "+" : "") + (100 * x).toFixed(2); }
  function time(ns) { return ns == null ? "-" : new Date(ns / 1e6).toISOString().replace(".000Z", "Z"); }
  function params() { return new URLSearchParams(location.search); }
  function go(path, p, replace) {
    var q = p ? p.toString() : "";
    var url = path + (q ? "?" + q : "");
    if (replace) history.replaceState(null, "", url); else history.pushState(null, "", url);
    route();
  }

  function api(path, p) {
    var headers = {};
    var token = sessionStorage.getItem(TOKEN_KEY);
    if (token) headers.Authorization = "Bearer " + token;
    busy.textContent = "loading…";
    return fetch("/api/" + path + (p && p.toString() ? "?" + p.toString() : ""), { headers: headers }).then(function (r) {
      busy.textContent = "";
      if (r.status === 401) { askToken(); throw new Error("this otelprof needs its token"); }
      var type = r.headers.get("content-type") || "";
      if (type.indexOf("application/json") === 0) {
        return r.json().then(function (j) { if (!r.ok) throw new Error(j.error || r.statusText); return j; });
      }
      if (!r.ok) throw new Error(r.statusText);
      return r.blob().then(function (b) {
        var cd = r.headers.get("content-disposition") || "";
        var m = /filename="([^"]+)"/.exec(cd);
        return { blob: b, name: m ? m[1] : "otelprof" };
      });
    });
  }
  function askToken() {
    var form = document.getElementById("token");
    form.hidden = false;
    document.getElementById("token-input").focus();
  }
  document.getElementById("token").addEventListener("submit", function (ev) {
    ev.preventDefault();
    sessionStorage.setItem(TOKEN_KEY, document.getElementById("token-input").value);
    ev.target.hidden = true;
    route();
  });
  function fail(box, e) { box.appendChild(el("p", { class: "error", role: "alert", text: String(e.message || e) })); }

  // Downloads of what a view shows: pprof, collapsed stacks, SVG (through fetch, so that the
  // token goes in a header, never in a URL).
  function exports(view, p, extra) {
    var box = el("div", { class: "exports" }, [el("span", { class: "meta", text: "export:" })]);
    (extra || [["pprof", "pprof"], ["collapsed", "collapsed"], ["svg", "SVG"]]).forEach(function (f) {
      box.appendChild(el("button", { type: "button", "data-format": f[0] + (f[2] ? "-" + f[2] : ""), text: f[1], onclick: function () {
        var q = new URLSearchParams(p); q.set("format", f[0]); if (f[2]) q.set("side", f[2]);
        api("export/" + view, q).then(function (d) {
          var a = el("a", { href: URL.createObjectURL(d.blob), download: d.name });
          document.body.appendChild(a); a.click(); a.remove();
        }, function (e) { fail(box, e); });
      } }));
    });
    return box;
  }

  // A sortable table: columns [{key, label, fmt, name}], rows; Enter or click on a row calls onRow.
  function table(cols, rows, onRow, id) {
    var sortKey = null, desc = true;
    var t = el("table", id ? { id: id } : {});
    var thead = el("thead"), tbody = el("tbody");
    t.appendChild(thead); t.appendChild(tbody);
    var tr = el("tr");
    cols.forEach(function (c) {
      var th = el("th", { class: c.name ? "name" : "", scope: "col", tabindex: "0", "aria-sort": "none", text: c.label });
      function sort() {
        desc = sortKey === c.key ? !desc : true; sortKey = c.key;
        rows.sort(function (a, b) { var x = a[c.key], y = b[c.key]; return (x < y ? -1 : x > y ? 1 : 0) * (desc ? -1 : 1); });
        Array.prototype.forEach.call(tr.children, function (h) { h.setAttribute("aria-sort", "none"); });
        th.setAttribute("aria-sort", desc ? "descending" : "ascending");
        body();
      }
      th.addEventListener("click", sort);
      th.addEventListener("keydown", function (ev) { if (ev.key === "Enter") sort(); });
      tr.appendChild(th);
    });
    thead.appendChild(tr);
    function body() {
      tbody.textContent = "";
      rows.slice(0, 500).forEach(function (r) {
        var row = el("tr", onRow ? { class: "clickable", tabindex: "0" } : {});
        cols.forEach(function (c) {
          var v = r[c.key];
          row.appendChild(el("td", { class: (c.name ? "name" : "") + (c.sig && c.sig(r) ? " sig" : ""), text: c.fmt ? c.fmt(v, r) : (v == null ? "-" : String(v)) }));
        });
        if (onRow) {
          row.addEventListener("click", function () { onRow(r); });
          row.addEventListener("keydown", function (ev) { if (ev.key === "Enter") onRow(r); });
        }
        tbody.appendChild(row);
      });
    }
    body();
    return el("div", { class: "tablebox" }, [t]);
  }

  // The selection form of the Explore and Traces views: pickers from the store's values.
  var PICKERS = [["service.name", "service"], ["service.version", "version"], ["deployment.environment.name", "environment"], ["span_name", "endpoint"], ["thread.pool", "thread pool"], ["thread.state", "thread state"]];
  function conditions(p) {
    var out = {};
    p.getAll("where").forEach(function (w) { var i = w.indexOf("="); if (i > 0 && w[i - 1] !== "!") out[w.slice(0, i)] = w.slice(i + 1); });
    return out;
  }
  function selectionForm(path, p, values, withBy) {
    var form = el("form", { class: "controls", "aria-label": "selection" });
    var current = conditions(p);
    PICKERS.forEach(function (k) {
      var s = el("select", { name: k[0], "aria-label": k[1] }, [el("option", { value: "", text: "all" })]);
      (values.keys[k[0]] || []).forEach(function (v) { s.appendChild(el("option", { value: v, text: v })); });
      s.value = current[k[0]] || "";
      form.appendChild(el("label", {}, [k[1], s]));
    });
    var ty = el("select", { name: "type", "aria-label": "profile type" }, [el("option", { value: "", text: "default" })]);
    (values.types || []).forEach(function (t) { ty.appendChild(el("option", { value: t, text: t })); });
    ty.value = p.get("type") || "";
    form.appendChild(el("label", {}, ["type", ty]));
    var from = el("input", { name: "from", value: p.get("from") || "", placeholder: "now-1h", size: "20" });
    var to = el("input", { name: "to", value: p.get("to") || "", placeholder: "now", size: "20" });
    form.appendChild(el("label", {}, ["from", from]));
    form.appendChild(el("label", {}, ["to", to]));
    var by = null;
    if (withBy) {
      by = el("select", { name: "by", "aria-label": "timeline stacked by" });
      ["span_name", "service.version", "thread.pool", "service.instance.id"].forEach(function (b) { by.appendChild(el("option", { value: b, text: b })); });
      by.value = p.get("by") || "span_name";
      form.appendChild(el("label", {}, ["stack timeline by", by]));
    }
    var lines = el("input", { type: "checkbox", name: "lines" }); lines.checked = p.get("lines") === "1";
    form.appendChild(el("label", {}, ["lines", lines]));
    window.OtelprofFocus.fields(form, p);
    form.appendChild(el("button", { type: "submit", text: "Show" }));
    function submit(ev) {
      if (ev) ev.preventDefault();
      var q = new URLSearchParams();
      p.getAll("where").forEach(function (w) { var k = w.split(/!?=/)[0]; if (!PICKERS.some(function (x) { return x[0] === k; })) q.append("where", w); });
      PICKERS.forEach(function (k) { var v = form.elements[k[0]].value; if (v) q.append("where", k[0] + "=" + v); });
      ["trace_id", "span_id"].forEach(function (k) { p.getAll(k).forEach(function (v) { q.append(k, v); }); });
      if (ty.value) q.set("type", ty.value);
      if (from.value) q.set("from", from.value);
      if (to.value) q.set("to", to.value);
      if (by && by.value !== "span_name") q.set("by", by.value);
      if (lines.checked) q.set("lines", "1");
      window.OtelprofFocus.read(form, q);
      // The search, the colouring and the trend change the URL in place: read them from it.
      var now = new URLSearchParams(location.search);
      ["search", "color", "trend"].forEach(function (k) { if (now.get(k)) q.set(k, now.get(k)); });
      go(path, q);
    }
    form.addEventListener("submit", submit);
    form.addEventListener("change", function (ev) { if (ev.target.tagName === "SELECT" || ev.target.type === "checkbox") submit(); });
    return form;
  }
  // The query without UI-only parameters, for the API.
  function apiParams(p, drop) {
    var q = new URLSearchParams(p);
    (drop || []).forEach(function (k) { q.delete(k); });
    return q;
  }

  // A stacked area chart of the timeline; dragging across it sets from/to.
  var COLORS = ["#e6550d", "#3182bd", "#31a354", "#756bb1", "#fd8d3c", "#6baed6", "#74c476", "#9e9ac8", "#e377c2", "#8c564b", "#bcbd22", "#17becf"];
  function timeline(data, onRange) {
    var box = el("div", { id: "timeline", role: "img", "aria-label": "value over time, stacked by " + data.by + "; drag to select a time range (or type it in from/to)" });
    var legend = el("div", { class: "legend" });
    var n = data.times.length - 1;
    if (n < 1) return el("div", { class: "meta", text: "no data over time" });
    var series = data.series.slice(0, 11);
    if (data.series.length > 11) {
      var rest = new Array(n).fill(0);
      data.series.slice(11).forEach(function (s) { s.values.forEach(function (v, i) { rest[i] += v; }); });
      series.push({ name: "(" + (data.series.length - 11) + " more)", values: rest });
    }
    var max = 0, sums = new Array(n).fill(0);
    series.forEach(function (s) { s.values.forEach(function (v, i) { sums[i] += v; }); });
    sums.forEach(function (v) { if (v > max) max = v; });
    var NS = "http://www.w3.org/2000/svg";
    var svg = document.createElementNS(NS, "svg");
    svg.setAttribute("viewBox", "0 0 " + n + " 100"); svg.setAttribute("preserveAspectRatio", "none");
    var base = new Array(n).fill(0);
    series.forEach(function (s, k) {
      var top = [], bottom = [];
      for (var i = 0; i < n; i++) {
        var y0 = 100 - 100 * base[i] / (max || 1), y1 = 100 - 100 * (base[i] + s.values[i]) / (max || 1);
        top.push(i + "," + y1, (i + 1) + "," + y1); bottom.unshift(i + "," + y0, (i + 1) + "," + y0);
        base[i] += s.values[i];
      }
      var poly = document.createElementNS(NS, "polygon");
      poly.setAttribute("points", top.concat(bottom).join(" "));
      poly.setAttribute("fill", COLORS[k % COLORS.length]);
      var title = document.createElementNS(NS, "title"); title.textContent = s.name; poly.appendChild(title);
      svg.appendChild(poly);
      legend.appendChild(el("span", {}, [el("i"), s.name]));
      legend.lastChild.firstChild.style.background = COLORS[k % COLORS.length];
    });
    memoryLine(data.memory, n, svg, legend);
    box.appendChild(svg);
    var sel = el("div", { class: "sel" }); sel.style.display = "none"; box.appendChild(sel);
    var start = null;
    function at(ev) { var r = box.getBoundingClientRect(); return Math.min(1, Math.max(0, (ev.clientX - r.left) / r.width)); }
    box.addEventListener("mousedown", function (ev) { start = at(ev); sel.style.display = "block"; sel.style.left = (100 * start) + "%"; sel.style.width = "0"; ev.preventDefault(); });
    window.addEventListener("mousemove", function (ev) {
      if (start === null) return;
      var x = at(ev); sel.style.left = (100 * Math.min(x, start)) + "%"; sel.style.width = (100 * Math.abs(x - start)) + "%";
    });
    window.addEventListener("mouseup", function (ev) {
      if (start === null) return;
      var x = at(ev), a = Math.min(x, start), b = Math.max(x, start); start = null;
      if (b - a < 0.005) { sel.style.display = "none"; return; }
      var t0 = data.times[0], t1 = data.times[n];
      onRange(new Date((t0 + a * (t1 - t0)) / 1e6).toISOString(), new Date((t0 + b * (t1 - t0)) / 1e6).toISOString());
    });
    return el("div", {}, [box, legend, el("div", { class: "meta", text: time(data.times[0]) + " … " + time(data.times[n]) + "  (drag to zoom in time)" })]);
  }

  // The heap in use after garbage collection, as a stepped line over the timeline on a scale
  // of its own (the agent's metrics, in the same buckets), and the pause time in its legend.
  function memoryLine(memory, n, svg, legend) {
    if (!memory) return;
    var NS = "http://www.w3.org/2000/svg", heap = memory.heap_after_gc, max = 0, points = [];
    heap.forEach(function (v) { if (v != null && v > max) max = v; });
    // Steps: the figure holds from one collection to the next, so each bucket's is flat across it.
    heap.forEach(function (v, i) { if (v != null) { var y = 100 - 90 * v / (max || 1); points.push(i + "," + y, (i + 1) + "," + y); } });
    var paused = 0;
    (memory.gc_pause_seconds || []).forEach(function (v) { if (v != null) paused += v; });
    if (points.length) {
      var line = document.createElementNS(NS, "polyline");
      line.setAttribute("id", "heap-line");
      line.setAttribute("points", points.join(" "));
      line.setAttribute("fill", "none"); line.setAttribute("stroke", "#222"); line.setAttribute("stroke-width", "2");
      line.setAttribute("vector-effect", "non-scaling-stroke");
      var title = document.createElementNS(NS, "title"); title.textContent = "heap used after GC"; line.appendChild(title);
      svg.appendChild(line);
    }
    legend.appendChild(el("span", { id: "memory-legend" }, [el("i"),
      (points.length ? "heap after GC (line; top = " + fmt(max, "bytes") + ")" : "no heap figure") +
      "; GC pauses " + paused.toFixed(3) + " s in this range"]));
    legend.lastChild.firstChild.style.background = "#222";
  }

  // The function table; `states` (wall profiles): a column per thread state with each
  // function's total in it; `onRow`: what choosing a row does.
  function functionTable(rows, total, unit, id, states, onRow) {
    rows.forEach(function (r) { r.selfShare = total ? r.self / total : 0; r.totalShare = total ? r.total / total : 0; });
    var cols = [
      { key: "self", label: "self", fmt: function (v) { return fmt(v, unit); } },
      { key: "selfShare", label: "self%", fmt: pct },
      { key: "total", label: "total", fmt: function (v) { return fmt(v, unit); } },
      { key: "totalShare", label: "total%", fmt: pct }
    ];
    (states ? states.names : []).forEach(function (name, k) {
      rows.forEach(function (r) { r["state_" + name] = r.by_state ? r.by_state[k] : 0; });
      cols.push({ key: "state_" + name, label: name, fmt: function (v) { return v ? fmt(v, unit) : "-"; } });
    });
    cols.push({ key: "label", label: "function", name: true });
    return table(cols, rows, onRow || null, id);
  }

  function explore(p) {
    var box = el("div");
    main.appendChild(box);
    api("values").then(function (values) {
      box.appendChild(selectionForm("/", p, values, true));
      // `new_against` is the Findings panel's own (the baseline its findings are marked against).
      var q = apiParams(p, ["search", "color", "trend", "new_against"]);
      var tl = el("div"); box.appendChild(tl);
      // The trend of a function (trend.js) under the timeline: a frame clicked, a row of the
      // table chosen, or Enter in the search box picks it; kept in the URL as `trend`.
      var tr = el("div", { id: "trend-box" }); box.appendChild(tr);
      var tp = apiParams(p, ["search", "trend", "by", "lines", "new_against"]);
      function setTrend(pattern) {
        var n = new URLSearchParams(location.search);
        if (pattern) n.set("trend", pattern); else n.delete("trend");
        history.replaceState(null, "", location.pathname + (n.toString() ? "?" + n.toString() : ""));
        if (pattern) window.OtelprofTrend.mount(tr, pattern, tp, api, function () { setTrend(null); });
        else tr.textContent = "";
      }
      if (p.get("trend")) setTrend(p.get("trend"));
      // The known patterns in the selection (findings.js), between the timeline and the
      // flame graph.
      var fb = el("section", { id: "findings", "aria-label": "findings" }); box.appendChild(fb);
      window.OtelprofFindings.mount(fb, p, api, go);
      var tq = new URLSearchParams(q); tq.delete("lines"); tq.set("by", p.get("by") || "span_name");
      api("timeline", tq).then(function (data) {
        tl.appendChild(timeline(data, function (a, b) { var n = new URLSearchParams(p); n.set("from", a); n.set("to", b); go("/", n); }));
      }, function (e) { fail(tl, e); });
      var q2 = new URLSearchParams(q); q2.delete("by");
      return api("top", q2).then(function (d) {
        box.appendChild(el("p", { class: "meta", text: d.header.text }));
        box.appendChild(exports("explore", q2));
        var flame = el("div", { id: "flame" }), side = el("div");
        box.appendChild(el("div", { class: d.states ? "split wide" : "split" }, [flame, side]));
        var keep = function (key, v) {
          var n = new URLSearchParams(location.search); if (v) n.set(key, v); else n.delete(key);
          history.replaceState(null, "", location.pathname + "?" + n.toString());
        };
        window.OtelprofFlame.mount(flame, d.flame, { search: p.get("search") || "", onSearch: function (s) { keep("search", s); },
          colorBy: p.get("color") || "", onColorBy: function (c) { keep("color", c === "state" ? "state" : ""); },
          onFrame: function (name) { go(window.OtelprofButterfly.link(p, name)); } });
        side.appendChild(functionTable(d.functions, d.header.total, d.header.unit, "top-table", d.states, function (r) { setTrend(r.name); }));
        // A frame's name without its source file; the root (the whole selection) picks nothing.
        function pickFrame(ev) {
          var f = ev.target.closest(".frame");
          if (f && f.getAttribute("data-node") !== "0") setTrend(f.textContent.split(" (")[0]);
        }
        flame.addEventListener("click", pickFrame);
        flame.addEventListener("keydown", function (ev) {
          if (ev.key === "Enter") pickFrame(ev);
          var s = ev.target.closest(".flamesearch");
          if (!s || ev.key !== "Enter") return;
          var text = s.value.trim();
          // A /regex/ search is not a pattern; text is matched anywhere in the name.
          if (!text) setTrend(null);
          else if (!/^\/.*\/$/.test(text)) setTrend(text.indexOf("*") >= 0 ? text : "*" + text + "*");
        });
      });
    }).catch(function (e) { fail(box, e); });
  }

  function traces(p) {
    var box = el("div"); main.appendChild(box);
    api("values").then(function (values) {
      box.appendChild(selectionForm("/traces", p, values, false));
      return api("traces", apiParams(p, ["search", "by"])).then(function (d) {
        box.appendChild(el("p", { class: "meta", text: d.total_traces + " traces with samples; " + d.header.text }));
        d.traces.forEach(function (t) { t.endpoint = t.endpoints.join(", "); t.window = t.from ? (time(t.from) + " … " + time(t.to)) : "-"; });
        box.appendChild(table([
          { key: "value", label: "time", fmt: function (v) { return fmt(v, d.header.unit); } },
          { key: "count", label: "samples" },
          { key: "spans", label: "spans" },
          { key: "endpoint", label: "endpoint", name: true },
          { key: "window", label: "window", name: true },
          { key: "trace_id", label: "trace", name: true }
        ], d.traces, function (t) {
          var q = window.OtelprofFocus.carry(p, new URLSearchParams()); if (p.get("type")) q.set("type", p.get("type"));
          // The profiles the trace's samples are in (whole seconds around them): the
          // drilldown then reads the hour or two they lie in, not the store.
          if (t.profiles) {
            q.set("from", String(Math.floor(t.profiles[0] / 1e9)));
            q.set("to", String(Math.ceil(t.profiles[1] / 1e9)));
          }
          go("/trace/" + t.trace_id, q);
        }, "traces-table"));
      });
    }).catch(function (e) { fail(box, e); });
  }

  function trace(id, p) {
    var box = el("div"); main.appendChild(box);
    var q = apiParams(p, ["search", "color"]); q.set("trace_id", id);
    box.appendChild(el("h2", { text: "Trace " + id }));
    box.appendChild(window.OtelprofFocus.form(p, function (n) { go("/trace/" + id, n); }));
    api("trace", q).then(function (d) {
      box.appendChild(el("pre", { class: "meta", text: d.summary + d.notes.map(function (n) { return "note: " + n; }).join("\n") }));
      if (d.spans.length) {
        d.spans.forEach(function (s) { s.endpoint = s.endpoints.join(", "); });
        box.appendChild(table([
          { key: "span_id", label: "span", name: true },
          { key: "value", label: "value", fmt: function (v) { return fmt(v, d.header.unit); } },
          { key: "count", label: "samples" },
          { key: "endpoint", label: "endpoint", name: true }
        ], d.spans, function (s) { var n = new URLSearchParams(p); n.set("span_id", s.span_id); go("/trace/" + id, n); }, "spans-table"));
      }
      box.appendChild(exports("trace", q));
      var flame = el("div", { id: "flame" }), side = el("div");
      box.appendChild(el("div", { class: "split" }, [flame, side]));
      window.OtelprofFlame.mount(flame, d.flame, { search: p.get("search") || "", onFrame: function (name) { go(window.OtelprofButterfly.link(q, name)); } });
      side.appendChild(functionTable(d.functions, d.header.total, d.header.unit, "top-table"));
    }).catch(function (e) { fail(box, e); });
  }

  function compare(p) {
    var box = el("div"); main.appendChild(box);
    var form = el("form", { class: "controls", "aria-label": "sides" });
    var base = el("input", { name: "base", value: p.get("base") || "", placeholder: "service.version=1.0", size: "30" });
    var head = el("input", { name: "head", value: p.get("head") || "", placeholder: "service.version=2.0", size: "30" });
    var bf = el("input", { name: "base_from", value: p.get("base_from") || "", placeholder: "now-25h", size: "14" });
    var hf = el("input", { name: "head_from", value: p.get("head_from") || "", placeholder: "now-1h", size: "14" });
    form.appendChild(el("label", {}, ["base", base])); form.appendChild(el("label", {}, ["base from", bf]));
    form.appendChild(el("label", {}, ["head", head])); form.appendChild(el("label", {}, ["head from", hf]));
    window.OtelprofFocus.fields(form, p);
    form.appendChild(el("button", { type: "submit", text: "Compare" }));
    form.addEventListener("submit", function (ev) {
      ev.preventDefault();
      var q = new URLSearchParams(p);
      [["base", base], ["head", head], ["base_from", bf], ["head_from", hf]].forEach(function (f) { if (f[1].value) q.set(f[0], f[1].value); else q.delete(f[0]); });
      go("/diff", window.OtelprofFocus.read(form, q));
    });
    box.appendChild(form);
    api("values").then(function (values) {
      var versions = values.keys["service.version"] || [];
      if (!p.get("base") && !p.get("head") && !p.get("base_from") && !p.get("head_from")) {
        box.appendChild(el("p", { class: "meta", text: versions.length > 1 ? "Versions in the store: " + versions.join(", ") + ". Give a base and a head." : "Give a base and a head (selectors or time ranges)." }));
        if (versions.length > 1) { base.value = "service.version=" + versions[versions.length - 2]; head.value = "service.version=" + versions[versions.length - 1]; }
        return;
      }
      var q = apiParams(p, ["search"]);
      return api("diff", q).then(function (d) {
        box.appendChild(el("p", { class: "meta", text: "base: " + d.base.text }));
        box.appendChild(el("p", { class: "meta", text: "head: " + d.head.text }));
        box.appendChild(el("p", { class: "headline", id: "headline", text: d.headline }));
        if (d.group_headline) box.appendChild(el("p", { class: "meta", text: "Largest significant increase by " + d.by + ": " + d.group_headline }));
        var zf = function (t) { return t == null ? "-" : (t.z >= 0 ? "+" : "") + t.z.toFixed(1) + (t.significant ? " *" : ""); };
        var sigf = function (key) { return function (r) { return r[key] && r[key].significant; }; };
        var grew = d.grew.map(function (c) { c.zs = c.z_self ? c.z_self.z : 0; c.zt = c.z_total ? c.z_total.z : 0; return c; });
        box.appendChild(el("h2", { text: "Grew (shares of each side's own total; * significant)" }));
        box.appendChild(table([
          { key: "base_self", label: "base self", fmt: pct }, { key: "head_self", label: "head self", fmt: pct },
          { key: "delta_self", label: "Δself pp", fmt: pp }, { key: "zs", label: "z self", fmt: function (v, r) { return zf(r.z_self); }, sig: sigf("z_self") },
          { key: "base_total", label: "base total", fmt: pct }, { key: "head_total", label: "head total", fmt: pct },
          { key: "delta_total", label: "Δtotal pp", fmt: pp }, { key: "zt", label: "z total", fmt: function (v, r) { return zf(r.z_total); }, sig: sigf("z_total") },
          { key: "name", label: "function", name: true }, { key: "path", label: "via", name: true }
        ], grew, null, "grew-table"));
        box.appendChild(exports("diff", q, [["svg", "SVG"], ["collapsed", "collapsed"], ["pprof", "pprof (head)", "head"], ["pprof", "pprof (base)", "base"]]));
        var flame = el("div", { id: "flame" }); box.appendChild(flame);
        window.OtelprofFlame.mount(flame, d.flame, { search: p.get("search") || "" });
        box.appendChild(el("h2", { text: "Shrank" }));
        box.appendChild(table([
          { key: "base_self", label: "base self", fmt: pct }, { key: "head_self", label: "head self", fmt: pct },
          { key: "delta_self", label: "Δself pp", fmt: pp }, { key: "base_total", label: "base total", fmt: pct },
          { key: "head_total", label: "head total", fmt: pct }, { key: "delta_total", label: "Δtotal pp", fmt: pp },
          { key: "name", label: "function", name: true }
        ], d.shrank, null, "shrank-table"));
        if (d.noise) box.appendChild(el("p", { class: "meta", text: d.noise }));
      });
    }).catch(function (e) { fail(box, e); });
  }

  // Leak candidates (`otelprof leaks`): the sites whose live bytes grow across the live-heap
  // snapshots of the selection (where, from, to), fastest first, then the other sites.
  function leaks(p) {
    var box = el("div"); main.appendChild(box);
    var q = new URLSearchParams();
    ["where", "from", "to", "include", "exclude", "hide"].forEach(function (k) { p.getAll(k).forEach(function (v) { q.append(k, v); }); });
    box.appendChild(window.OtelprofFocus.form(p, function (n) { go("/leaks", n); }));
    api("leaks", q).then(function (d) {
      var minutes = d.window ? ((d.window[1] - d.window[0]) / 60e9).toFixed(1) : "0";
      box.appendChild(el("p", { class: "meta", text: "Live heap: " + d.snapshots + " snapshots over " + minutes +
        " min, " + d.instances + " instance(s) with enough of them; latest live " + fmt(d.latest_total, "bytes") +
        ". A site: the allocated class and the leaf-most method outside the JDK." }));
      var cols = [
        { key: "slope_per_hour", label: "slope /h", fmt: function (v) { return fmt(v, "bytes"); } },
        { key: "growth", label: "growth", fmt: function (v) { return fmt(v, "bytes"); } },
        { key: "t", label: "t", fmt: function (v) { return v.toFixed(1); } },
        { key: "latest", label: "latest", fmt: function (v) { return fmt(v, "bytes"); } },
        { key: "share", label: "share", fmt: pct },
        { key: "site", label: "site", name: true }
      ];
      if (d.candidates.length === 0) {
        box.appendChild(el("p", { id: "no-leaks", text: "No leak candidates: no site's growth passes the t-test at " +
          (100 * d.fdr) + "% FDR and exceeds the sampling noise." }));
      } else {
        box.appendChild(el("h2", { text: d.candidates.length + " leak candidate(s), fastest first" }));
        box.appendChild(table(cols, d.candidates, null, "leaks-table"));
      }
      if (d.others.length) {
        box.appendChild(el("h2", { text: "Other sites, by slope" }));
        box.appendChild(table(cols, d.others, null, "other-sites-table"));
      }
    }).catch(function (e) { fail(box, e); });
  }

  function instances() {
    var box = el("div"); main.appendChild(box);
    // Agents connected over OpAMP (agents.js), above the JVMs the store heard from.
    var agents = el("div", { id: "agents" }); box.appendChild(agents); window.OtelprofAgents.mount(agents);
    box.appendChild(el("h2", { text: "JVMs that sent profiles" }));
    api("instances").then(function (d) {
      var rows = d.instances.map(function (i) {
        var a = i.attributes;
        return { instance: i.instance, service: a["service.name"] || "-", version: a["service.version"] || "-", host: a["host.name"] || "-",
          pid: a["process.pid"] || "-", runtime: ((a["process.runtime.name"] || "") + " " + (a["process.runtime.version"] || "")).trim() || "-",
          types: i.types.join(", "), profiles: i.profiles, last: i.last };
      });
      box.appendChild(el("p", { class: "meta", text: rows.length + " JVMs sent profiles" }));
      box.appendChild(table([
        { key: "instance", label: "service.instance.id", name: true }, { key: "service", label: "service", name: true },
        { key: "version", label: "version" }, { key: "host", label: "host" }, { key: "pid", label: "pid" },
        { key: "runtime", label: "runtime", name: true }, { key: "types", label: "types" }, { key: "profiles", label: "profiles" },
        { key: "last", label: "last seen", fmt: time }
      ], rows, function (r) { go("/", new URLSearchParams([["where", "service.instance.id=" + r.instance]])); }, "instances-table"));
    }).catch(function (e) { fail(box, e); });
  }

  function route() {
    main.textContent = "";
    var path = location.pathname, p = params();
    var view = path === "/" ? "explore" : path === "/traces" ? "traces" : path.indexOf("/trace/") === 0 ? "traces" : path === "/callers" ? "explore" : path === "/diff" ? "diff" : path === "/leaks" ? "leaks" : "instances";
    Array.prototype.forEach.call(document.querySelectorAll("nav a"), function (a) {
      if (a.getAttribute("data-view") === view) a.setAttribute("aria-current", "page"); else a.removeAttribute("aria-current");
    });
    if (path === "/") { document.title = "otelprof: explore"; explore(p); }
    else if (path === "/traces") { document.title = "otelprof: traces"; traces(p); }
    else if (path.indexOf("/trace/") === 0) { var id = path.slice(7); document.title = "otelprof: trace " + id; trace(id, p); }
    else if (path === "/diff") { document.title = "otelprof: compare"; compare(p); }
    else if (path === "/leaks") { document.title = "otelprof: leaks"; leaks(p); }
    else if (path === "/callers") { document.title = "otelprof: callers and callees"; window.OtelprofButterfly.show(main, p, { api: api, go: go, fail: fail }); }
    else { document.title = "otelprof: instances"; instances(); }
  }
  document.querySelector("nav").addEventListener("click", function (ev) {
    var a = ev.target.closest("a"); if (!a || ev.ctrlKey || ev.metaKey) return;
    ev.preventDefault(); go(a.getAttribute("href"), window.OtelprofFocus.carry(params(), new URLSearchParams()));
  });
  window.addEventListener("popstate", route);
  document.addEventListener("keydown", function (ev) {
    if (ev.key === "/" && document.activeElement && ["INPUT", "SELECT", "TEXTAREA"].indexOf(document.activeElement.tagName) < 0) {
      var s = document.querySelector(".flamesearch"); if (s) { ev.preventDefault(); s.focus(); }
    }
  });
  route();
})();
