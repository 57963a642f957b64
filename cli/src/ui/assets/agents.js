// otelprof serve: the agents connected over OpAMP, in the Instances view. Lists what each
// agent reported (GET /api/agents) and starts a capture on one with one click (POST
// /api/agents/capture with the types and duration of the form above the table), or sends it
// the form's continuous settings (POST /api/agents/settings); the capture's state and the
// settings' fate follow in its row. Everything is a button or a form field: keyboard-usable.
(function () {
  "use strict";
  var TOKEN_KEY = "otelprof-token";
  var TYPES = ["cpu", "wall", "alloc", "lock"];
  var el = window.OtelprofDom.el;

  function call(method, path, body) {
    var headers = {};
    var token = sessionStorage.getItem(TOKEN_KEY);
    if (token) headers.Authorization = "Bearer " + token;
    if (body) headers["Content-Type"] = "application/json";
    return fetch(path, { method: method, headers: headers, body: body ? JSON.stringify(body) : undefined }).then(function (r) {
      return r.json().then(function (j) { if (!r.ok) throw new Error(j.error || r.statusText); return j; });
    });
  }
  function clock(unixSeconds) { return new Date(unixSeconds * 1000).toISOString().slice(11, 19) + "Z"; }
  function ago(ns, now) { var s = Math.max(0, Math.round((now - ns) / 1e9)); return s + " s ago"; }
  function captureText(c) {
    if (!c) return "-";
    var s = c.id + " (" + c.request + ", " + c.seconds + " s): " + c.state;
    if (c.state === "running" && c.ends) s += " until " + clock(c.ends);
    if (c.reason) s += ": " + c.reason;
    return s;
  }

  function mount(box) {
    box.appendChild(el("h2", { text: "Connected agents (OpAMP)" }));
    var form = el("form", { class: "controls", "aria-label": "capture" });
    var inputs = {};
    var defaults = { wall: "20ms", seconds: "60" };
    TYPES.concat(["seconds"]).forEach(function (k) {
      inputs[k] = el("input", { name: "capture-" + k, value: defaults[k] || "", placeholder: k === "seconds" ? "60" : k === "alloc" ? "256k" : "10ms", size: "7" });
      form.appendChild(el("label", {}, [k === "seconds" ? "seconds" : k + " interval", inputs[k]]));
    });
    var settingsInput = el("input", { name: "settings", placeholder: "wall=50ms,alloc=off", size: "28" });
    form.appendChild(el("label", {}, ["continuous settings (empty: the agent's own)", settingsInput]));
    form.addEventListener("submit", function (ev) { ev.preventDefault(); });
    var bounds = el("p", { class: "meta" });
    var status = el("p", { id: "capture-status", class: "meta", role: "status", "aria-live": "polite" });
    var list = el("div");
    box.appendChild(el("p", { class: "meta", text: "A capture runs the types given (empty: not asked) for the seconds given, on top of what the agent profiles all the time; its profiles carry otelprof.capture.id." }));
    box.appendChild(form);
    box.appendChild(bounds);
    box.appendChild(status);
    box.appendChild(list);

    function start(agent, button) {
      var body = { instance: agent.instance_uid, seconds: Number(inputs.seconds.value) };
      TYPES.forEach(function (k) { if (inputs[k].value.trim()) body[k] = inputs[k].value.trim(); });
      button.disabled = true;
      call("POST", "/api/agents/capture", body).then(function (r) {
        status.textContent = "capture " + r.id + " queued for " + r.instance_uid + "; the agent takes it at its next poll";
        status.setAttribute("data-capture", r.id);
        refresh();
      }, function (e) {
        status.textContent = "refused: " + e.message;
        status.removeAttribute("data-capture");
      }).then(function () { button.disabled = false; });
    }

    function applySettings(agent, button) {
      button.disabled = true;
      call("POST", "/api/agents/settings", { instance: agent.instance_uid, settings: settingsInput.value.trim() }).then(function (r) {
        status.textContent = "settings queued for " + r.instance_uid + "; the agent takes them at its next poll";
        status.removeAttribute("data-capture");
        refresh();
      }, function (e) {
        status.textContent = "refused: " + e.message;
        status.removeAttribute("data-capture");
      }).then(function () { button.disabled = false; });
    }

    function render(d) {
      var m = d.bounds.min;
      bounds.textContent = "bounds: at most " + d.bounds.max_seconds + " s; intervals of at least cpu " + m.cpu + ", wall " + m.wall + ", alloc " + m.alloc + ", lock " + m.lock;
      list.textContent = "";
      if (!d.agents.length) {
        list.appendChild(el("p", { class: "meta", id: "no-agents", text: "No agent is connected. Agents connect with the option opamp=" + location.origin + "/v1/opamp (or OTELPROF_OPAMP_ENDPOINT)." }));
        return;
      }
      var t = el("table", { id: "agents-table" });
      var head = el("tr");
      ["service", "service.instance.id", "host", "pid", "runtime", "health", "settings in force", "last seen", "capture", "latest capture"].forEach(function (h, i) {
        head.appendChild(el("th", { scope: "col", class: i === 6 || i === 9 ? "name" : "", text: h }));
      });
      t.appendChild(el("thead", {}, [head]));
      var body = el("tbody");
      d.agents.forEach(function (a) {
        var attr = function (k) { return a.identifying[k] || a.non_identifying[k] || "-"; };
        var health = a.health ? (a.health.healthy ? "healthy" : "unhealthy") + (a.health.status ? ": " + a.health.status : "") + (a.health.last_error ? " (" + a.health.last_error + ")" : "") : "-";
        var settings = Object.keys(a.effective_config).map(function (k) { return a.effective_config[k]; }).join("; ") || "-";
        if (a.desired_settings !== null) {
          var rc = a.remote_config || { status: "sent", error: "" };
          settings += " (asked: " + (a.desired_settings || "the agent's own") + ", " + rc.status + (rc.error ? ": " + rc.error : "") + ")";
        }
        var button = el("button", { type: "button", class: "capture", "data-instance": a.instance_uid, text: "Start capture" });
        if (!a.accepts_captures) { button.disabled = true; button.title = "this agent does not accept captures"; }
        button.addEventListener("click", function () { start(a, button); });
        var apply = el("button", { type: "button", class: "settings", "data-instance": a.instance_uid, text: "Apply settings" });
        if (!a.accepts_settings) { apply.disabled = true; apply.title = "this agent does not accept remote configuration"; }
        apply.addEventListener("click", function () { applySettings(a, apply); });
        var latest = a.captures[0];
        var row = el("tr", { "data-instance": a.instance_uid }, [
          el("td", { text: attr("service.name") }),
          el("td", { text: attr("service.instance.id"), title: "instance uid " + a.instance_uid }),
          el("td", { text: attr("host.name") }),
          el("td", { text: attr("process.pid") }),
          el("td", { text: ((a.non_identifying["process.runtime.name"] || "") + " " + (a.non_identifying["process.runtime.version"] || "")).trim() || "-" }),
          el("td", { text: health }),
          el("td", { class: "name", text: settings }),
          el("td", { text: ago(a.last_seen, d.now) }),
          el("td", {}, [button, " ", apply]),
          el("td", { class: "name latest", "data-state": latest ? latest.state : "", "data-capture": latest ? latest.id : "", text: captureText(latest) })
        ]);
        body.appendChild(row);
      });
      t.appendChild(body);
      list.appendChild(el("div", { class: "tablebox" }, [t]));
    }

    var timer = null;
    function refresh() {
      if (!box.isConnected && timer !== null) { clearInterval(timer); return; }
      // Keep the focus on the button that had it: a keyboard user's place survives a refresh.
      var focused = document.activeElement && document.activeElement.getAttribute("data-instance");
      var focusedClass = focused ? document.activeElement.className : "";
      call("GET", "/api/agents").then(function (d) {
        render(d);
        if (focused) {
          var b = list.querySelector("button." + focusedClass + '[data-instance="' + focused + '"]');
          if (b) b.focus();
        }
      }, function (e) {
        list.textContent = "";
        list.appendChild(el("p", { class: "error", role: "alert", text: String(e.message || e) }));
      });
    }
    refresh();
    timer = setInterval(refresh, 2000);
  }

  window.OtelprofAgents = { mount: mount };
})();
