// tiermem inspector: the few lines htmx does not do. Loaded from this origin only (CSP).
// A range input names its <output> in data-output; keep the number beside the slider
// in step while it moves (by pointer or by arrow keys), before the re-plan arrives.
// Its form sends it as a JSON number: the form's `hx-vals` names it, and json-enc sends
// hx-vals with their JSON types where it sends every form field as text (the form's
// model is strict, tiermem.inspector.routes.PlanIn), so keep that value in step too.
document.addEventListener("input", function (event) {
  var el = event.target;
  if (el instanceof HTMLInputElement && el.type === "range") {
    if (el.dataset.output) {
      var out = document.getElementById(el.dataset.output);
      if (out) { out.value = el.value; }
    }
    var form = el.form;
    var vals = form ? form.getAttribute("hx-vals") : null;
    if (vals) {
      var parsed = JSON.parse(vals);
      if (Object.prototype.hasOwnProperty.call(parsed, el.name)) {
        parsed[el.name] = Number(el.value);
        form.setAttribute("hx-vals", JSON.stringify(parsed));
      }
    }
  }
});
