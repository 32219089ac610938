// tiermem inspector: the few lines htmx does not do. Loaded from this origin only (CSP).
// A range input names its <output> in data-output; keep the number beside the slider
// in step while it moves (by pointer or by arrow keys), before the re-plan arrives.
document.addEventListener("input", function (event) {
  var el = event.target;
  if (el instanceof HTMLInputElement && el.type === "range" && el.dataset.output) {
    var out = document.getElementById(el.dataset.output);
    if (out) { out.value = el.value; }
  }
});
