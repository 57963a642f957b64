// otelprof serve: a function's trend under Explore's timeline (`otelprof top --trend GLOB`).
// One bar per bucket of the timeline (the same edges, so each bar sits under its bucket): the
// share of the selection that the functions matching the pattern take in it, or their time
// per request where the store has request counts. OtelprofTrend.mount(box, pattern, params,
// api, onClear) asks /api/trend and draws; onClear is called by the "clear" button (and
// Escape on the chart).
(function () {
  "use strict";
  var el = window.OtelprofDom.el;
  var fmt = window.OtelprofFlame.fmt;
  var NS = "http://www.w3.org/2000/svg";

  function pct(x) { return x == null ? "-" : (100 * x).toFixed(2) + "%"; }
  function time(ns) { return new Date(ns / 1e6).toISOString().replace(".000Z", "Z"); }

  // The bars of `values` (one per bucket, null where the bucket had no data) in an SVG whose
  // x axis is the buckets, as the timeline's is.
  function bars(values, label, times) {
    var n = values.length, max = 0;
    values.forEach(function (v) { if (v != null && v > max) max = v; });
    var svg = document.createElementNS(NS, "svg");
    svg.setAttribute("viewBox", "0 0 " + n + " 100"); svg.setAttribute("preserveAspectRatio", "none");
    values.forEach(function (v, i) {
      var h = v == null || max === 0 ? 0 : 100 * v / max;
      var r = document.createElementNS(NS, "rect");
      r.setAttribute("x", String(i + 0.05)); r.setAttribute("width", "0.9");
      r.setAttribute("y", String(100 - h)); r.setAttribute("height", String(h));
      r.setAttribute("data-value", v == null ? "" : String(v));
      var t = document.createElementNS(NS, "title"); t.textContent = time(times[i]) + ": " + label(v); r.appendChild(t);
      svg.appendChild(r);
    });
    return { svg: svg, max: max };
  }

  function draw(box, data, onClear) {
    box.textContent = "";
    var perRequest = false;
    var names = data.functions.slice(0, 3).map(function (f) { return f.name; }).join(", ") +
      (data.functions.length > 3 ? " and " + (data.functions.length - 3) + " more" : "");
    var heading = el("span", { class: "trendtitle" });
    var clear = el("button", { type: "button", id: "trend-clear", text: "clear trend", onclick: onClear });
    var bar = el("div", { class: "trendbar" }, [heading]);
    var toggle = null;
    if (data.requests) {
      toggle = el("button", { type: "button", id: "trend-toggle", "aria-pressed": "false", text: "per request", onclick: function () {
        perRequest = !perRequest; toggle.setAttribute("aria-pressed", String(perRequest)); render();
      } });
      bar.appendChild(toggle);
    }
    bar.appendChild(clear);
    var chart = el("div", { id: "trend", role: "img", tabindex: "0" });
    chart.addEventListener("keydown", function (ev) { if (ev.key === "Escape") onClear(); });
    var scale = el("div", { class: "meta" });
    box.appendChild(bar); box.appendChild(chart); box.appendChild(scale);
    function render() {
      var values = data.points.map(function (p) { return perRequest ? p.per_request : p.share; });
      var label = perRequest ? function (v) { return v == null ? "-" : fmt(v, data.unit) + " per request"; } : pct;
      var b = bars(values, label, data.times);
      chart.textContent = ""; chart.appendChild(b.svg);
      chart.setAttribute("data-measure", perRequest ? "per_request" : "share");
      var what = perRequest ? "time per request" : "share of the selection";
      heading.textContent = "Trend of " + data.pattern + " (" + what + "): " + names;
      chart.setAttribute("aria-label", "trend of " + data.pattern + ", " + what + " per time bucket, at most " + label(b.max) +
        "; Escape clears it");
      scale.textContent = "top of the bars: " + label(b.max) + "; " + data.points.length + " buckets, as the timeline above";
    }
    render();
  }

  function mount(box, pattern, params, api, onClear) {
    box.textContent = "";
    var q = new URLSearchParams(params); q.set("trend", pattern);
    api("trend", q).then(function (data) { draw(box, data, onClear); }, function (e) {
      box.textContent = "";
      box.appendChild(el("p", { class: "error", role: "alert", text: String(e.message || e) }));
      box.appendChild(el("button", { type: "button", id: "trend-clear", text: "clear trend", onclick: onClear }));
    });
  }

  window.OtelprofTrend = { mount: mount };
})();
