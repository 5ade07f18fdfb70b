// Draws each Plotly figure a page embeds: <div data-figure="ID"> takes the figure
// (data and layout) from the JSON data block <script type="application/json" id="ID">.
(function () {
  "use strict";
  if (!window.Plotly) return;
  document.querySelectorAll("[data-figure]").forEach(function (element) {
    const source = document.getElementById(element.dataset.figure);
    if (!source) return;
    const figure = JSON.parse(source.textContent);
    window.Plotly.newPlot(element, figure.data, figure.layout, { responsive: true, displaylogo: false });
  });
})();
