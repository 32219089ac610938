// tiermem inspector: the few lines htmx does not do. Loaded from this origin only (CSP).
// Invariant: what a form sends and what its page shows come from the form's controls as
// they are now, never from state kept beside them. After the browser's Back button the
// page reloads (no-store) and Chrome restores the controls, but not the HTML around them.

// A range input names its <output> in data-output; keep the number beside the slider
// in step while it moves (by pointer or by arrow keys), before the re-plan arrives,
// and when the page is shown again with the slider restored (Back, Forward).
function syncOutput(el) {
  if (el instanceof HTMLInputElement && el.type === "range" && el.dataset.output) {
    var out = document.getElementById(el.dataset.output);
    if (out) { out.value = el.value; }
  }
}
document.addEventListener("input", function (event) { syncOutput(event.target); });
window.addEventListener("pageshow", function () {
  document.querySelectorAll("input[type=range][data-output]").forEach(syncOutput);
});

// A form's range inputs go as JSON numbers (the form's model is strict,
// tiermem.inspector.routes.PlanIn). json-enc sends every form field as text and gives
// only `hx-vals` their JSON types, which it reads as it encodes the body, after
// htmx:configRequest; so that attribute is written here, as the request is built, from
// the sliders' values then (the field itself already carries the same value as text).
// A form with a range input therefore has no `hx-vals` of its own in its HTML.
document.addEventListener("htmx:configRequest", function (event) {
  var form = event.target;
  if (!(form instanceof HTMLFormElement)) { return; }
  var vals = {};
  Array.prototype.forEach.call(form.elements, function (el) {
    if (el instanceof HTMLInputElement && el.type === "range" && el.name && !el.disabled) {
      vals[el.name] = Number(el.value);
    }
  });
  if (Object.keys(vals).length > 0) {
    form.setAttribute("hx-vals", JSON.stringify(vals));
  }
});
