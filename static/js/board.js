// Draws the leaderboard's server-built Plotly figures (JSON in #board-figures) into #chart-<name>.
(function () {
  var data = document.getElementById("board-figures");
  if (!data || typeof Plotly === "undefined") { return; }
  var figures = JSON.parse(data.textContent);
  Object.keys(figures).forEach(function (name) {
    var el = document.getElementById("chart-" + name);
    if (el) { Plotly.newPlot(el, figures[name].data, figures[name].layout, {responsive: true, displaylogo: false}); }
  });
})();
