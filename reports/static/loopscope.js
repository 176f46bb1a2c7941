/* loopscope report: draws the charts. Each figure sits in a <script type="application/json"> block next to its
   chart element; this file is the only script besides plotly.js, so the page's CSP can forbid inline scripts.
   Charts inside hidden sections (single-file reports) are drawn when their section is shown. */
(function () {
  "use strict";
  var CONFIG = {
    displaylogo: false,
    responsive: true,
    modeBarButtonsToRemove: ["lasso2d", "select2d", "autoScale2d"],
    toImageButtonOptions: { format: "png", scale: 2 }
  };

  function draw(el) {
    if (el.hasAttribute("data-drawn") || el.offsetParent === null) {
      return null;
    }
    var src = document.getElementById(el.getAttribute("data-figure"));
    if (!src) {
      return null;
    }
    el.setAttribute("data-drawn", "");
    var fig = JSON.parse(src.textContent);
    return Plotly.newPlot(el, fig.data, fig.layout, CONFIG).then(function (gd) {
      linkCalls(gd, fig);
      return gd;
    });
  }

  function ready() {
    document.body.setAttribute("data-charts-ready", "");
  }

  // A click on a call in a session's timeline jumps to that call in the conversation, when the page holds it.
  function linkCalls(el, fig) {
    var meta = fig.layout && fig.layout.meta;
    if (!meta || !meta.callAnchor || !el.on) {
      return;
    }
    el.on("plotly_click", function (ev) {
      var pt = ev && ev.points && ev.points[0];
      if (!pt || typeof pt.x !== "number") {
        return;
      }
      var id = meta.callAnchor + pt.x;
      if (document.getElementById(id)) {
        location.hash = id;
      }
    });
  }

  function drawVisible() {
    var els = document.querySelectorAll(".chart");
    if (typeof Plotly === "undefined") {
      if (!els.length) {
        ready();  // a page without charts (the all-sessions index) loads no plotly.js
      }
      return;
    }
    var pending = [];
    for (var i = 0; i < els.length; i++) {
      var p = draw(els[i]);
      if (p) {
        pending.push(p);
      }
    }
    Promise.all(pending).then(ready);
  }

  // A link to something inside a collapsed episode card (or collapsed text) opens it first.
  function openTarget() {
    var id = decodeURIComponent(location.hash.slice(1));
    var el = id && document.getElementById(id);
    var opened = false;
    for (var p = el; p; p = p.parentElement) {
      if (p.tagName === "DETAILS" && !p.open) {
        p.open = true;
        opened = true;
      }
    }
    if (el && opened) {
      el.scrollIntoView();
    }
  }

  function redraw() {
    document.body.removeAttribute("data-charts-ready");
    drawVisible();
  }

  document.addEventListener("DOMContentLoaded", function () {
    openTarget();
    drawVisible();
    allSessions();
  });
  window.addEventListener("hashchange", openTarget);
  // A single-file report opened at #some-session shows that section only once the fragment is applied, which
  // can be after DOMContentLoaded: draw again then, and whenever the fragment changes.
  window.addEventListener("load", redraw);
  window.addEventListener("hashchange", redraw);

  // ---- the all-sessions index: sort, filter, search and page through rows read from a JSON block -----------------
  var PAGE = 100;

  function allSessions() {
    var src = document.getElementById("all-sessions-data");
    var table = document.getElementById("all-sessions");
    var form = document.getElementById("all-sessions-controls");
    if (!src || !table || !form) {
      return;
    }
    var data = JSON.parse(src.textContent);
    var C = {};
    data.columns.forEach(function (c, i) { C[c] = i; });
    var rows = data.rows;
    var L = data.lookups || {};
    function look(table) {
      return function (i) { return L[table] ? L[table][i] : i; };
    }
    rows.forEach(function (r) {  // values shared by many rows arrive as positions in a lookup list
      r[C.agent] = look("agent")(r[C.agent]);
      r[C.project] = look("project")(r[C.project]);
      r[C.models] = r[C.models].map(look("model"));
      r[C.tools] = r[C.tools].map(look("tool"));
    });
    // Lower-cased text each row is searched by, built once.
    var hay = rows.map(function (r) {
      return [r[C.id], r[C.project], r[C.loop], r[C.search], r[C.prompt]].join(" \u0001 ").toLowerCase();
    });
    var tbody = table.tBodies[0];
    var status = document.getElementById("all-sessions-status");
    var pager = document.getElementById("all-sessions-pager");
    var state = { key: "cost", dir: -1, page: 0, shown: [] };

    function fill(name, values) {
      var sel = form.elements[name];
      if (!sel) {
        return;
      }
      var seen = {};
      values.forEach(function (v) { if (v) { seen[v] = (seen[v] || 0) + 1; } });
      Object.keys(seen).sort().forEach(function (v) {
        var o = document.createElement("option");
        o.value = v;
        o.textContent = v + " (" + seen[v] + ")";
        sel.appendChild(o);
      });
    }
    fill("agent", rows.map(function (r) { return r[C.agent]; }));
    fill("project", rows.map(function (r) { return r[C.project]; }));
    fill("model", [].concat.apply([], rows.map(function (r) { return r[C.models]; })));
    fill("tool", [].concat.apply([], rows.map(function (r) { return r[C.tools]; })));

    function value(r, key) {
      if (key === "tokens") {
        var t = r[C.tokens];
        return t[0] + t[1] + t[2] + t[3] + t[4];
      }
      if (key === "kinds") {
        return r[C.kinds].join(",");
      }
      var v = r[C[key]];
      return v === null || v === undefined ? "" : v;
    }

    function matches() {
      var f = form.elements;
      var q = f.q.value.trim().toLowerCase();
      var terms = q ? q.split(/\s+/) : [];
      var agent = f.agent.value, project = f.project.value, model = f.model.value, kind = f.kind.value;
      var tool = f.tool.value, loops = f.loops.value, from = f.from.value, until = f.until.value;
      var out = [];
      for (var i = 0; i < rows.length; i++) {
        var r = rows[i];
        if (agent && r[C.agent] !== agent) { continue; }
        if (project && r[C.project] !== project) { continue; }
        if (model && r[C.models].indexOf(model) < 0) { continue; }
        if (kind && r[C.kinds].indexOf(kind) < 0) { continue; }
        if (tool && r[C.tools].indexOf(tool) < 0) { continue; }
        if (loops === "yes" && !r[C.loops]) { continue; }
        if (loops === "no" && r[C.loops]) { continue; }
        var day = r[C.started].slice(0, 10);
        if (from && (!day || day < from)) { continue; }
        if (until && (!day || day > until)) { continue; }
        var ok = true;
        for (var k = 0; k < terms.length && ok; k++) {
          ok = hay[i].indexOf(terms[k]) >= 0;
        }
        if (ok) { out.push(i); }
      }
      var key = state.key, dir = state.dir;
      out.sort(function (a, b) {
        var x = value(rows[a], key), y = value(rows[b], key);
        if (x === y) { return a - b; }
        if (x === "") { return 1; }
        if (y === "") { return -1; }
        return (x < y ? -1 : 1) * dir;
      });
      return out;
    }

    function money(v, note) {
      if (v === null || v === undefined) {
        return note === "unknown" ? "unknown" : "—";
      }
      var s = v > 0 && v < 0.005 ? "<$0.01" : "$" + v.toFixed(2);
      return note === "estimated" ? "~" + s + " est." : (note === "inexact" ? s + " (inexact price)" : s);
    }

    function compact(n) {
      if (n >= 1e9) { return (n / 1e9).toFixed(1) + "B"; }
      if (n >= 1e6) { return (n / 1e6).toFixed(1) + "M"; }
      if (n >= 1e3) { return (n / 1e3).toFixed(1) + "k"; }
      return String(n);
    }

    function cell(tr, text, cls, title) {
      var td = document.createElement("td");
      td.textContent = text;
      if (cls) { td.className = cls; }
      if (title) { td.title = title; }
      tr.appendChild(td);
      return td;
    }

    function render() {
      var list = state.shown;
      var pages = Math.max(1, Math.ceil(list.length / PAGE));
      state.page = Math.min(state.page, pages - 1);
      var start = state.page * PAGE;
      var frag = document.createDocumentFragment();
      list.slice(start, start + PAGE).forEach(function (i) {
        var r = rows[i];
        var tr = document.createElement("tr");
        tr.setAttribute("data-session", r[C.id]);
        var td = document.createElement("td");
        td.className = "sid";
        td.title = r[C.id];
        if (r[C.href]) {
          var a = document.createElement("a");
          a.href = r[C.href];
          a.textContent = r[C.id];
          td.appendChild(a);
        } else {
          td.textContent = r[C.id];
        }
        tr.appendChild(td);
        cell(tr, r[C.agent]);
        cell(tr, r[C.project].split("/").slice(-2).join("/"), "proj", r[C.project]);
        cell(tr, r[C.started] || "—");
        cell(tr, money(r[C.cost], r[C.cost_note]), "num" + (r[C.cost_note] ? " est" : ""));
        cell(tr, r[C.loops] ? money(r[C.wasted], "") : "—", "num");
        cell(tr, r[C.loops] ? String(r[C.loops]) : "—", "num");
        cell(tr, r[C.kinds].join(", "));
        cell(tr, r[C.loop], "loopcall", r[C.loop]);
        cell(tr, r[C.prompt], "prompt", r[C.prompt]);
        var t = r[C.tokens];
        if (t[0] + t[1] + t[2] + t[3] > 0) {
          cell(tr, [t[0], t[1], t[2], t[3]].map(compact).join(" / "), "num",
               t.slice(0, 4).map(function (n) { return n.toLocaleString(); }).join(" / "));
        } else {
          cell(tr, t[4] ? "~" + compact(t[4]) + " est." : "—", "num est",
               "no usage recorded; estimated at about four characters per token");
        }
        cell(tr, r[C.calls].toLocaleString(), "num");
        frag.appendChild(tr);
      });
      tbody.textContent = "";
      tbody.appendChild(frag);
      var end = Math.min(start + PAGE, list.length);
      status.textContent = list.length ? ("Showing " + (start + 1) + "–" + end + " of " + list.length.toLocaleString() +
        " matching sessions (" + rows.length.toLocaleString() + " in all)") : "No session matches.";
      status.setAttribute("data-matching", String(list.length));
      pager.textContent = "";
      if (pages > 1) {
        [["« first", 0], ["‹ previous", state.page - 1], ["next ›", state.page + 1], ["last »", pages - 1]]
          .forEach(function (b) {
            var btn = document.createElement("button");
            btn.type = "button";
            btn.textContent = b[0];
            btn.disabled = b[1] < 0 || b[1] >= pages || b[1] === state.page;
            btn.addEventListener("click", function () { state.page = b[1]; render(); });
            pager.appendChild(btn);
          });
        var at = document.createElement("span");
        at.textContent = "page " + (state.page + 1) + " of " + pages;
        pager.appendChild(at);
      }
      var ths = table.tHead.rows[0].cells;
      for (var h = 0; h < ths.length; h++) {
        var k = ths[h].getAttribute("data-key");
        if (k === state.key) {
          ths[h].setAttribute("aria-sort", state.dir > 0 ? "ascending" : "descending");
        } else {
          ths[h].removeAttribute("aria-sort");
        }
      }
    }

    function update() {
      state.page = 0;
      state.shown = matches();
      render();
    }

    var timer = null;
    form.addEventListener("input", function () {
      clearTimeout(timer);
      timer = setTimeout(update, 120);
    });
    form.addEventListener("submit", function (e) { e.preventDefault(); });
    table.tHead.addEventListener("click", function (e) {
      var th = e.target.closest ? e.target.closest("th[data-key]") : null;
      if (!th) {
        return;
      }
      var key = th.getAttribute("data-key");
      var text = ["id", "agent", "project", "kinds", "loop", "prompt"].indexOf(key) >= 0;
      state.dir = state.key === key ? -state.dir : (text ? 1 : -1);
      state.key = key;
      update();
    });
    update();
    table.setAttribute("data-ready", "");
    // Milliseconds from the start of navigation to the first rows on screen (the tests hold it under a second).
    if (window.performance && performance.now) {
      table.setAttribute("data-ready-ms", String(Math.round(performance.now())));
    }
  }
})();
