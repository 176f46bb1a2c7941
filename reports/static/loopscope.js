/* loopscope report: draws the charts, pages the all-sessions table, and keeps a person's labels. Each figure sits in
   a <script type="application/json"> block next to its chart element; this file is the only script besides
   plotly.js, so the page's CSP can forbid inline scripts. Charts inside hidden sections (single-file reports) are
   drawn when their section is shown. */
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
    labelling();
  });
  window.addEventListener("hashchange", openTarget);
  // A single-file report opened at #some-session shows that section only once the fragment is applied, which
  // can be after DOMContentLoaded: draw again then, and whenever the fragment changes.
  window.addEventListener("load", redraw);
  window.addEventListener("hashchange", redraw);

  // ---- labels: a person's word on findings and sessions, kept in this browser, exported as loopscope-labels.json --
  // One list per store (the key holds the store's id, which every page carries), each label exactly as the labels
  // file has it (README, "Measuring it on your own sessions"): the session by its key (never its id), the span by
  // finding_id or by first_seq/last_seq (calls.seq), or none for a loop-free session. No network: the file is made
  // in the page and downloaded, and read back through a file input. The pages only name what a label refers to (the
  // store, each session's key and calls, each finding and its span, each call row's seq); the controls are made
  // here, which keeps 2,400 pages light and shows none where this script does not run.
  var LABEL_NAMES = { loop: "loop", stuck: "loop", not_loop: "not_loop", benign: "not_loop", "not-loop": "not_loop",
                      unsure: "unsure", "loop-free": "loop-free", loop_free: "loop-free" };
  var SAYS = { loop: "Loop", not_loop: "Not a loop", unsure: "Unsure", "loop-free": "Loop-free" };
  var KEY_RE = /^k_[0-9a-f]{16}$/;

  function el(tag, attrs, children) {
    var node = document.createElement(tag);
    Object.keys(attrs || {}).forEach(function (k) { node.setAttribute(k, attrs[k]); });
    (children || []).forEach(function (c) {
      node.appendChild(typeof c === "string" ? document.createTextNode(c) : c);
    });
    return node;
  }

  function button(attrs, text) {
    attrs.type = "button";
    return el("button", attrs, [text]);
  }

  function noteInput(what) {
    return el("input", { type: "text", "class": "label-note", placeholder: "note (optional)", "aria-label": what,
                         maxlength: "500" });
  }

  function buildBar(bar) {
    bar.appendChild(el("span", { "class": "labels-count", "aria-live": "polite" }, ["No labels yet"]));
    bar.appendChild(button({ "data-labels": "export" }, "Export labels"));
    bar.appendChild(el("label", { "class": "file-button" }, [
      "Import", el("input", { type: "file", accept: ".json,application/json", "data-labels": "import" })]));
    bar.appendChild(button({ "data-labels": "clear" }, "Clear"));
    bar.appendChild(el("span", { "class": "labels-status", role: "status" }));
  }

  function buildFinding(box) {
    box.appendChild(el("span", { "class": "label-q" }, ["Your label:"]));
    [["loop", "loop"], ["not_loop", "not a loop"], ["unsure", "unsure"]].forEach(function (b) {
      box.appendChild(button({ "data-label": b[0], "aria-pressed": "false" }, b[1]));
    });
    box.appendChild(noteInput("note on this label"));
  }

  function buildPanel(panel) {
    var calls = Number(panel.getAttribute("data-calls"));
    panel.appendChild(el("h2", {}, ["Your labels"]));
    panel.appendChild(el("p", { "class": "note" }, [
      (panel.hasAttribute("data-episodes") ? "Label each episode below: loop, not a loop or unsure. " : "") +
      "A loop the scan missed: choose its first call (“loop from here” on a call) and its last (“to here”)" +
      (calls ? ", or give their numbers" : "") + ". Labels stay in this browser; “Export labels” (at the top) " +
      "saves them to a file for ", el("code", {}, ["loopscope eval --labels"]), "."]));
    panel.appendChild(el("div", { "class": "label-box" }, [
      button({ "data-session-label": "loop-free", "aria-pressed": "false" }, "Loop-free: I read it all and found no loop"),
      noteInput("note on the loop-free label")]));
    if (calls) {
      var num = function (name, what) {
        return el("input", { type: "number", name: name, min: "1", max: String(calls), "aria-label": what });
      };
      panel.appendChild(el("div", { "class": "label-box span-form" }, [
        "Missed loop from call #", num("from", "first call of the loop"), " to #", num("to", "last call of the loop"),
        button({ "data-span": "mark" }, "Mark as a loop")]));
    }
    panel.appendChild(el("ul", { "class": "span-labels" }));
    panel.appendChild(el("p", { "class": "labels-pending note", role: "status" }));
  }

  function labelling() {
    var bars = document.querySelectorAll(".labels-bar[data-store]");
    if (!bars.length) {
      return;
    }
    for (var b = 0; b < bars.length; b++) {
      buildBar(bars[b]);
    }
    var storeId = bars[0].getAttribute("data-store");
    var KEY = "loopscope-labels:" + storeId;
    var storage = null;
    try {
      storage = window.localStorage;
      storage.getItem(KEY);
    } catch (e) {
      storage = null;
    }
    each(bars, function (bar) { bar.hidden = false; });
    if (!storage) {
      say("Labels need this browser's local storage, which is turned off for this page.");
      each(document.querySelectorAll(".labels-bar button, .labels-bar input"), function (b) { b.disabled = true; });
      return;
    }
    var pending = {};  // session key -> the seq of the first call of a loop being marked

    function each(list, fn) {
      for (var i = 0; i < list.length; i++) {
        fn(list[i]);
      }
    }
    function say(text) {
      each(document.querySelectorAll(".labels-status"), function (el) { el.textContent = text; });
    }
    function load() {
      try {
        var v = JSON.parse(storage.getItem(KEY) || "[]");
        return Array.isArray(v) ? v : [];
      } catch (e) {
        return [];
      }
    }
    function save(list) {
      storage.setItem(KEY, JSON.stringify(list));
      refresh();
    }
    function hasSpan(l) {
      return typeof l.first_seq === "number";
    }
    function ident(l) {
      if (l.finding_id) {
        return l.session_key + "|f|" + l.finding_id;
      }
      return l.session_key + (hasSpan(l) ? "|s|" + l.first_seq + "-" + l.last_seq : "|session");
    }
    // What a label says about a halt there: a loop-free session is healthy work throughout (as eval reads it).
    function truth(name) {
      return name === "loop-free" ? "not_loop" : name;
    }
    function sessionOf(el) {
      var page = el.closest(".page");
      return page ? page.querySelector(".session-labels[data-session-key]") : null;
    }
    function findingBox(id) {
      var boxes = document.querySelectorAll(".finding-label[data-finding]");
      for (var i = 0; i < boxes.length; i++) {
        if (boxes[i].getAttribute("data-finding") === id) {
          return boxes[i];
        }
      }
      return null;
    }
    // The calls a label covers, [first seq, last seq], where this page knows them (null: no calls, or unknown).
    function span(l) {
      if (l.finding_id) {
        var box = findingBox(l.finding_id);
        var lo = box ? box.getAttribute("data-first-seq") : "";
        return lo ? [Number(lo), Number(box.getAttribute("data-last-seq"))] : null;
      }
      if (hasSpan(l)) {
        return [l.first_seq, l.last_seq];
      }
      var panel = document.querySelector('.session-labels[data-session-key="' + l.session_key + '"]');
      var n = panel ? Number(panel.getAttribute("data-calls")) : 0;
      return n ? [0, n - 1] : null;
    }
    function describe(l) {
      if (l.finding_id) {
        var box = findingBox(l.finding_id);
        var card = box && box.closest(".episode");
        var title = card ? card.querySelector("h3") : null;
        return SAYS[l.label] + ": the finding " + (title ? "“" + title.textContent + "”" : l.finding_id);
      }
      if (hasSpan(l)) {
        return SAYS[l.label] + ": calls #" + (l.first_seq + 1) + "–#" + (l.last_seq + 1);
      }
      return SAYS[l.label] + ": the whole session";
    }
    // A label two others of its session would contradict (a loop inside a loop-free session, a loop over a finding
    // said not to be one) is refused, as eval refuses such a file; "unsure" agrees with anything.
    function conflict(list, cand) {
      var a = cand.label === "unsure" ? null : span(cand);
      if (!a) {
        return null;
      }
      for (var i = 0; i < list.length; i++) {
        var l = list[i];
        if (l.session_key !== cand.session_key || ident(l) === ident(cand) || l.label === "unsure" ||
            truth(l.label) === truth(cand.label)) {
          continue;
        }
        var b = span(l);
        if (b && a[0] <= b[1] && b[0] <= a[1]) {
          return l;
        }
      }
      return null;
    }
    function clean(l) {  // the fields of the labels file, in its order, and nothing else
      var out = { session_key: l.session_key, label: l.label };
      if (l.finding_id) {
        out.finding_id = l.finding_id;
      } else if (hasSpan(l)) {
        out.first_seq = l.first_seq;
        out.last_seq = l.last_seq;
      }
      if (l.note) {
        out.note = String(l.note);
      }
      return out;
    }
    function put(cand) {
      var list = load();
      var c = conflict(list, cand);
      if (c) {
        say("Not kept: it contradicts your label “" + describe(c) + "”. Remove that one first.");
        refresh();
        return false;
      }
      var id = ident(cand);
      var at = -1;
      for (var i = 0; i < list.length; i++) {
        if (ident(list[i]) === id) {
          at = i;
        }
      }
      if (at >= 0) {
        list[at] = clean(cand);
      } else {
        list.push(clean(cand));
      }
      say("");
      save(list);
      return true;
    }
    function drop(id) {
      save(load().filter(function (l) { return ident(l) !== id; }));
    }
    function find(id) {
      var list = load();
      for (var i = 0; i < list.length; i++) {
        if (ident(list[i]) === id) {
          return list[i];
        }
      }
      return null;
    }

    // The controls: each session's panel, the finding cards, and a pair of buttons on every call row.
    each(document.querySelectorAll(".session-labels[data-session-key]"), function (panel) {
      buildPanel(panel);
      panel.hidden = false;
    });
    each(document.querySelectorAll(".finding-label[data-finding]"), function (box) {
      if (sessionOf(box)) {
        buildFinding(box);
        box.hidden = false;
      }
    });
    // A call row: a card's (its head line in a .call-head) or a whole conversation's (the line itself, before any
    // result).
    each(document.querySelectorAll("li[data-seq]"), function (li) {
      if (!sessionOf(li)) {
        return;
      }
      var head = li.querySelector(".call-head") || li;
      var box = document.createElement("span");
      box.className = "mark-span";
      [["from", "loop from here"], ["to", "to here"]].forEach(function (b) {
        var btn = document.createElement("button");
        btn.type = "button";
        btn.setAttribute("data-mark", b[0]);
        btn.textContent = b[1];
        box.appendChild(btn);
      });
      head.insertBefore(box, head === li ? li.querySelector("pre, i") : null);
    });

    function markSpan(panel, first, last) {
      var key = panel.getAttribute("data-session-key");
      var n = Number(panel.getAttribute("data-calls"));
      if (!(first >= 0 && last >= 0 && first < n && last < n)) {
        say("Give two call numbers between 1 and " + n + ".");
        return;
      }
      var lo = Math.min(first, last), hi = Math.max(first, last);
      delete pending[key];
      if (put({ session_key: key, label: "loop", first_seq: lo, last_seq: hi })) {
        say("Marked a missed loop, calls #" + (lo + 1) + "–#" + (hi + 1) + ".");
      }
    }

    document.addEventListener("click", function (e) {
      var t = e.target;
      if (!t || !t.closest) {
        return;
      }
      var btn = t.closest("button");
      if (!btn) {
        return;
      }
      var panel = sessionOf(btn);
      var key = panel ? panel.getAttribute("data-session-key") : null;
      if (btn.hasAttribute("data-label") && btn.closest(".finding-label") && key) {
        var box = btn.closest(".finding-label");
        var cand = { session_key: key, label: btn.getAttribute("data-label"),
                     finding_id: box.getAttribute("data-finding") };
        if (btn.getAttribute("aria-pressed") === "true") {
          drop(ident(cand));
        } else {
          cand.note = box.querySelector(".label-note").value.trim();
          put(cand);
        }
      } else if (btn.hasAttribute("data-session-label") && key) {
        var whole = { session_key: key, label: btn.getAttribute("data-session-label") };
        if (btn.getAttribute("aria-pressed") === "true") {
          drop(ident(whole));
        } else {
          whole.note = btn.parentNode.querySelector(".label-note").value.trim();
          put(whole);
        }
      } else if (btn.hasAttribute("data-mark") && key) {
        var seq = Number(btn.closest("li[data-seq]").getAttribute("data-seq"));
        if (btn.getAttribute("data-mark") === "from") {
          pending[key] = seq;
          say("");
          refresh();
        } else if (pending[key] === undefined) {
          say("First choose the loop's first call (loop from here).");
        } else {
          markSpan(panel, pending[key], seq);
        }
      } else if (btn.hasAttribute("data-span") && panel) {
        var form = btn.closest(".span-form");
        markSpan(panel, Number(form.querySelector("[name=from]").value) - 1,
                 Number(form.querySelector("[name=to]").value) - 1);
      } else if (btn.hasAttribute("data-cancel") && key) {
        delete pending[key];
        refresh();
      } else if (btn.hasAttribute("data-drop")) {
        drop(btn.getAttribute("data-drop"));
      } else if (btn.getAttribute("data-labels") === "export") {
        exportLabels();
      } else if (btn.getAttribute("data-labels") === "clear") {
        var n = load().length;
        if (n && window.confirm("Remove all " + n + " labels of this store from this browser? Export them first to " +
                                "keep them.")) {
          storage.removeItem(KEY);
          pending = {};
          say("Cleared " + n + " label" + (n === 1 ? "" : "s") + ".");
          refresh();
        }
      }
    });

    // A note is kept with its label; typing one before choosing a label keeps it for when one is chosen.
    document.addEventListener("change", function (e) {
      var t = e.target;
      if (!t || !t.classList) {
        return;
      }
      if (t.classList.contains("label-note")) {
        var panel = sessionOf(t);
        var key = panel ? panel.getAttribute("data-session-key") : null;
        var box = t.closest(".finding-label");
        var id = !key ? null : (box ? key + "|f|" + box.getAttribute("data-finding") :
                                (t.getAttribute("data-label-id") || key + "|session"));
        var l = id ? find(id) : null;
        if (l) {
          l.note = t.value.trim();
          put(l);
        }
      } else if (t.getAttribute("data-labels") === "import" && t.files && t.files[0]) {
        importLabels(t.files[0], t);
      }
    });

    function exportLabels() {
      var list = load().map(clean);
      list.sort(function (a, b) { return ident(a) < ident(b) ? -1 : (ident(a) > ident(b) ? 1 : 0); });
      var doc = { loopscope_labels: 1, store_id: storeId, labels: list };
      var blob = new Blob([JSON.stringify(doc, null, 2) + "\n"], { type: "application/json" });
      var a = document.createElement("a");
      a.href = URL.createObjectURL(blob);
      a.download = "loopscope-labels.json";
      a.hidden = true;
      document.body.appendChild(a);
      a.click();
      setTimeout(function () { URL.revokeObjectURL(a.href); a.remove(); }, 60000);
      say("Exported " + list.length + " label" + (list.length === 1 ? "" : "s") + " to loopscope-labels.json.");
    }

    function parseLabels(text) {
      try {
        return JSON.parse(text);
      } catch (e) {  // JSON Lines
        return text.split(/\r?\n/).filter(function (x) { return x.trim(); }).map(function (x) { return JSON.parse(x); });
      }
    }

    function importLabels(file, input) {
      var reader = new FileReader();
      reader.onload = function () {
        var doc;
        try {
          doc = parseLabels(String(reader.result));
        } catch (e) {
          say("Not imported: " + file.name + " is not a labels file (JSON).");
          return;
        }
        var rows = Array.isArray(doc) ? doc : (doc && Array.isArray(doc.labels) ? doc.labels : null);
        if (!rows) {
          say("Not imported: " + file.name + " holds no list of labels.");
          return;
        }
        if (!Array.isArray(doc) && doc.store_id && doc.store_id !== storeId) {
          say("Not imported: " + file.name + " holds the labels of another store (" + doc.store_id + ").");
          return;
        }
        var took = 0, skipped = 0;
        rows.forEach(function (r) {
          var name = r && typeof r.label === "string" ? LABEL_NAMES[r.label.trim().toLowerCase()] : null;
          var ok = name && typeof r.session_key === "string" && KEY_RE.test(r.session_key);
          var l = ok ? { session_key: r.session_key, label: name, note: typeof r.note === "string" ? r.note : "" } : null;
          if (l && typeof r.finding_id === "string" && r.finding_id) {
            l.finding_id = r.finding_id;
          } else if (l && Number.isInteger(r.first_seq) && Number.isInteger(r.last_seq) && r.first_seq >= 0) {
            l.first_seq = Math.min(r.first_seq, r.last_seq);
            l.last_seq = Math.max(r.first_seq, r.last_seq);
          } else if (l && (r.first_seq !== undefined || r.last_seq !== undefined || r.first_call_id ||
                           r.last_call_id || r.message_index !== undefined)) {
            l = null;  // a span this report cannot name (call ids, one end only, a message)
          }
          if (l && (l.label !== "loop-free" || (!l.finding_id && !hasSpan(l))) && conflict(load(), l) === null) {
            var list = load().filter(function (x) { return ident(x) !== ident(l); });
            list.push(clean(l));
            storage.setItem(KEY, JSON.stringify(list));
            took++;
          } else {
            skipped++;
          }
        });
        input.value = "";
        say("Imported " + took + " label" + (took === 1 ? "" : "s") + " from " + file.name +
            (skipped ? "; " + skipped + " skipped (no session key, an unknown label, a span named otherwise, or " +
                       "one that contradicts a label already here)" : "") + ".");
        refresh();
      };
      reader.onerror = function () { say("Not imported: " + file.name + " could not be read."); };
      reader.readAsText(file);
    }

    // Every control shows the labels as stored: the count, the cards' buttons, each session's list and its calls.
    function refresh() {
      var list = load();
      var byId = {};
      list.forEach(function (l) { byId[ident(l)] = l; });
      each(document.querySelectorAll(".labels-count"), function (el) {
        el.textContent = list.length ? list.length + " label" + (list.length === 1 ? "" : "s") : "No labels yet";
        el.setAttribute("data-count", String(list.length));
      });
      each(document.querySelectorAll(".labels-bar [data-labels=clear]"), function (b) { b.disabled = !list.length; });
      each(document.querySelectorAll(".finding-label"), function (box) {
        var panel = sessionOf(box);
        if (!panel) {
          return;
        }
        var l = byId[panel.getAttribute("data-session-key") + "|f|" + box.getAttribute("data-finding")];
        each(box.querySelectorAll("button[data-label]"), function (b) {
          b.setAttribute("aria-pressed", String(!!l && l.label === b.getAttribute("data-label")));
        });
        var note = box.querySelector(".label-note");
        if (l && document.activeElement !== note) {
          note.value = l.note || "";
        }
        box.setAttribute("data-labelled", l ? l.label : "");
      });
      each(document.querySelectorAll(".session-labels[data-session-key]"), function (panel) {
        var key = panel.getAttribute("data-session-key");
        var whole = byId[key + "|session"];
        each(panel.querySelectorAll("button[data-session-label]"), function (b) {
          b.setAttribute("aria-pressed", String(!!whole && whole.label === b.getAttribute("data-session-label")));
          var note = b.parentNode.querySelector(".label-note");
          if (whole && document.activeElement !== note) {
            note.value = whole.note || "";
          }
        });
        var ul = panel.querySelector(".span-labels");
        ul.textContent = "";
        var spans = [];
        list.forEach(function (l) {
          if (l.session_key !== key) {
            return;
          }
          var li = document.createElement("li");
          li.className = "label-" + l.label;
          var what = document.createElement("span");
          what.textContent = describe(l);
          li.appendChild(what);
          if (hasSpan(l)) {
            spans.push(l);
            var note = document.createElement("input");
            note.type = "text";
            note.className = "label-note";
            note.placeholder = "note (optional)";
            note.setAttribute("aria-label", "note on " + describe(l));
            note.setAttribute("data-label-id", ident(l));
            note.value = l.note || "";
            li.appendChild(note);
          } else if (l.note) {
            var n = document.createElement("span");
            n.className = "note";
            n.textContent = " — " + l.note;
            li.appendChild(n);
          }
          var rm = document.createElement("button");
          rm.type = "button";
          rm.setAttribute("data-drop", ident(l));
          rm.textContent = "remove";
          li.appendChild(rm);
          ul.appendChild(li);
        });
        var wait = panel.querySelector(".labels-pending");
        wait.textContent = "";
        if (pending[key] !== undefined) {
          wait.textContent = "Missed loop from call #" + (pending[key] + 1) + ": now choose its last call (to here). ";
          var cancel = document.createElement("button");
          cancel.type = "button";
          cancel.setAttribute("data-cancel", "");
          cancel.textContent = "cancel";
          wait.appendChild(cancel);
        }
        var page = panel.closest(".page");
        each(page.querySelectorAll("li[data-seq]"), function (li) {
          var seq = Number(li.getAttribute("data-seq"));
          li.classList.toggle("mark-start", pending[key] === seq);
          li.classList.toggle("marked-loop", spans.some(function (l) {
            return l.label === "loop" && l.first_seq <= seq && seq <= l.last_seq;
          }));
        });
      });
    }

    window.addEventListener("storage", function (e) {
      if (e.key === KEY || e.key === null) {
        refresh();
      }
    });
    refresh();
    document.body.setAttribute("data-labels-ready", "");
  }

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
