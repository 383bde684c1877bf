// txqueue dashboard: the little page behaviour there is (the CSP allows no inline script).
// Everything works without it; this only draws the throughput chart and adds "select all".
(function () {
  "use strict";

  var COLOURS = { handled: "#1a7f37", failed: "#9a6700", dead_lettered: "#cf222e" };

  function drawThroughput(container) {
    var source = container.getAttribute("data-source");
    if (!source || typeof window.uPlot === "undefined") {
      return;
    }
    var chart = null;

    function render(data) {
      var minutes = data.minutes || [];
      if (minutes.length === 0) {
        if (chart) { chart.destroy(); chart = null; }
        container.textContent = "";
        var empty = document.createElement("p");
        empty.className = "empty";
        empty.textContent = "No messages handled in the last hour.";
        container.appendChild(empty);
        return;
      }
      var columns = [minutes];
      var series = [{}];
      data.series.forEach(function (entry) {
        columns.push(entry.values);
        series.push({
          label: entry.label,
          stroke: COLOURS[entry.name] || "#0969da",
          width: 1.5,
          points: { show: false }
        });
      });
      var width = Math.max(320, container.clientWidth || 800);
      if (chart) {
        chart.setData(columns);
        chart.setSize({ width: width, height: 220 });
        return;
      }
      container.textContent = "";
      chart = new window.uPlot({
        width: width,
        height: 220,
        series: series,
        axes: [{}, { label: "messages / minute", size: 60 }],
        scales: { x: { time: true } },
        legend: { live: true }
      }, columns, container);
    }

    function load() {
      fetch(source, { credentials: "same-origin", headers: { Accept: "application/json" } })
        .then(function (response) { return response.ok ? response.json() : null; })
        .then(function (data) { if (data) { render(data); } })
        .catch(function () { /* the next refresh tries again */ });
    }

    load();
    window.setInterval(load, 30000);
    window.addEventListener("resize", function () {
      if (chart) { chart.setSize({ width: Math.max(320, container.clientWidth), height: 220 }); }
    });
  }

  function selectAll(toggle) {
    var table = document.getElementById(toggle.getAttribute("data-select-all"));
    if (!table) { return; }
    toggle.addEventListener("change", function () {
      var boxes = table.querySelectorAll("input[type=checkbox][name=key]");
      for (var index = 0; index < boxes.length; index++) {
        boxes[index].checked = toggle.checked;
      }
    });
  }

  function start() {
    var chart = document.getElementById("throughput");
    if (chart) { drawThroughput(chart); }
    var toggles = document.querySelectorAll("input[data-select-all]");
    for (var index = 0; index < toggles.length; index++) {
      selectAll(toggles[index]);
    }
  }

  if (document.readyState === "loading") {
    document.addEventListener("DOMContentLoaded", start);
  } else {
    start();
  }
})();
