// Hover card for the DAG's nodes: kind, depth, tokens, descendants, fan-in, time range.
(function () {
  "use strict";
  function show(card, node, event) {
    var d = node.dataset;
    card.textContent = "";
    var lines = [
      d.id,
      d.kind + " · depth " + d.depth + " · " + d.tokens + " tokens",
      d.descendants + " descendants · fan-in " + d.fanin,
      d.range,
      d.seqs || ""
    ];
    lines.forEach(function (text) {
      if (!text) { return; }
      var line = document.createElement("div");
      line.textContent = text;
      card.appendChild(line);
    });
    card.hidden = false;
    card.style.left = (event.clientX + 14) + "px";
    card.style.top = (event.clientY + 14) + "px";
  }
  document.addEventListener("DOMContentLoaded", function () {
    var card = document.getElementById("hover-card");
    if (!card) { return; }
    document.querySelectorAll("#dag-svg .node").forEach(function (node) {
      node.addEventListener("mousemove", function (event) { show(card, node, event); });
      node.addEventListener("mouseleave", function () { card.hidden = true; });
    });
    var target = location.hash && document.getElementById(location.hash.slice(1));
    if (target && target.classList && target.classList.contains("node")) {
      target.querySelector("circle").setAttribute("r", "13");
    }
  });
})();

// Bar widths and marks arrive as data-width / data-left (percent): the page's
// Content-Security-Policy refuses inline style attributes, not styles set here.
(function () {
  "use strict";
  document.addEventListener("DOMContentLoaded", function () {
    document.querySelectorAll("[data-width]").forEach(function (el) {
      el.style.width = el.dataset.width + "%";
    });
    document.querySelectorAll("[data-left]").forEach(function (el) {
      el.style.left = el.dataset.left + "%";
    });
  });
})();
