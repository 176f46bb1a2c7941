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
    return Plotly.newPlot(el, fig.data, fig.layout, CONFIG);
  }

  function drawVisible() {
    if (typeof Plotly === "undefined") {
      return;
    }
    var els = document.querySelectorAll(".chart");
    var pending = [];
    for (var i = 0; i < els.length; i++) {
      var p = draw(els[i]);
      if (p) {
        pending.push(p);
      }
    }
    Promise.all(pending).then(function () {
      document.body.setAttribute("data-charts-ready", "");
    });
  }

  function redraw() {
    document.body.removeAttribute("data-charts-ready");
    drawVisible();
  }

  document.addEventListener("DOMContentLoaded", drawVisible);
  // A single-file report opened at #some-session shows that section only once the fragment is applied, which
  // can be after DOMContentLoaded: draw again then, and whenever the fragment changes.
  window.addEventListener("load", redraw);
  window.addEventListener("hashchange", redraw);
})();
