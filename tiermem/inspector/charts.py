"""Charts as inline SVG, rendered on the server (no chart library, no script).

Every chart is a `<figure>` with an SVG whose `role="img"` and `aria-label` say in words
what it shows, and a `<title>` per mark for a pointer's tooltip. Colours are SVG
presentation attributes, not `style`, so the page's Content-Security-Policy
(`style-src 'self'`) holds. All text is escaped here; the result is `Markup`.
"""

from __future__ import annotations

from collections.abc import Sequence
from html import escape

from markupsafe import Markup

from tiermem.planner.plan import SLICES

# one colour per context layer (colour-blind-safe Okabe-Ito palette)
LAYER_COLOURS = {"system": "#999999", "pinned": "#D55E00", "summary": "#009E73", "retrieved": "#0072B2",
                 "tail": "#E69F00"}
FREE_COLOUR = "#eeeeee"
FRAMING_COLOUR = "#CC79A7"  # message framing: role markers, headings, reply priming
WIDTH = 640  # px of a chart's drawing area
BAR_HEIGHT = 26
LEGEND_ROW = 18
LEGEND_CHAR_PX = 7.6  # width of a 12 px legend character, generously


def _legend(labels: Sequence[tuple[str, str, str]], y: float) -> str:
    """(label, colour, figure) swatches in one row."""
    out, x = [], 0.0
    for label, colour, figure in labels:
        text = f"{label} {figure}".strip()
        out.append(f'<rect x="{x:.1f}" y="{y:.1f}" width="12" height="12" fill="{colour}"/>'
                   f'<text x="{x + 16:.1f}" y="{y + 11:.1f}" font-size="12">{escape(text)}</text>')
        x += 28 + LEGEND_CHAR_PX * len(text)
    return "".join(out)


def budget_bar(layers: dict[str, int], budget: int, caption: str, total: int | None = None) -> Markup:
    """One horizontal bar: the budget, filled by each layer's tokens in context order.
    `total`: the context's exact count; what it has beyond the layers' items is message
    framing (role markers, headings, the reply priming), drawn as its own segment."""
    items = sum(layers.values())
    total = items if total is None else total
    framing = max(0, total - items)
    scale = WIDTH / max(budget, total, 1)
    # items are counted line by line; packed into messages they can share framing and cost
    # a little less than their sum: then they fill exactly the context's own width
    fit = total / items if items > total > 0 else 1.0
    parts, x = [], 0.0
    for layer, tok, colour in [*((s, layers.get(s, 0), LAYER_COLOURS[s]) for s in SLICES),
                               ("framing", framing, FRAMING_COLOUR)]:
        if tok <= 0:
            continue
        w = tok * scale * (fit if layer != "framing" else 1.0)
        parts.append(f'<rect x="{x:.1f}" y="0" width="{w:.1f}" height="{BAR_HEIGHT}" '
                     f'fill="{colour}"><title>{layer}: {tok} tokens</title></rect>')
        x += w
    if budget > total:
        parts.append(f'<rect x="{x:.1f}" y="0" width="{(budget - total) * scale:.1f}" height="{BAR_HEIGHT}" '
                     f'fill="{FREE_COLOUR}"><title>unused: {budget - total} tokens</title></rect>')
    legend = [(layer, LAYER_COLOURS[layer], str(layers.get(layer, 0))) for layer in SLICES if layers.get(layer)]
    if framing:
        legend.append(("framing", FRAMING_COLOUR, str(framing)))
    legend.append(("unused", FREE_COLOUR, str(max(0, budget - total))))
    words = ", ".join([f"{layer} {layers[layer]}" for layer in SLICES if layers.get(layer)]
                      + ([f"framing {framing}"] if framing else []))
    label = f"{total} of {budget} tokens used: {words or 'nothing'}"
    h = BAR_HEIGHT + 8 + LEGEND_ROW
    svg = (f'<svg class="chart" viewBox="0 0 {WIDTH + 40} {h}" width="{WIDTH + 40}" height="{h}" role="img" '
           f'aria-label="{escape(label)}">{"".join(parts)}{_legend(legend, BAR_HEIGHT + 6)}</svg>')
    return Markup(f'<figure class="chart">{svg}<figcaption>{escape(caption)}</figcaption></figure>')


def hot_composition(pinned_tokens: int, other_tokens: int, budget: int, overflow: int) -> Markup:
    """The hot set: pinned tokens, the recency window, room left (and pins over budget)."""
    layers = {"pinned": pinned_tokens, "tail": other_tokens}
    total = pinned_tokens + other_tokens
    scale = WIDTH / max(budget, total, 1)
    w1, w2 = pinned_tokens * scale, other_tokens * scale
    free = max(0, budget - total)
    svg = (f'<svg class="chart" viewBox="0 0 {WIDTH + 40} {BAR_HEIGHT + 8 + LEGEND_ROW}" width="{WIDTH + 40}" '
           f'height="{BAR_HEIGHT + 8 + LEGEND_ROW}" role="img" aria-label="hot set: {pinned_tokens} pinned tokens, '
           f'{other_tokens} other tokens of a {budget} token budget">'
           f'<rect x="0" y="0" width="{w1:.1f}" height="{BAR_HEIGHT}" fill="{LAYER_COLOURS["pinned"]}">'
           f'<title>pinned: {pinned_tokens} tokens</title></rect>'
           f'<rect x="{w1:.1f}" y="0" width="{w2:.1f}" height="{BAR_HEIGHT}" fill="{LAYER_COLOURS["tail"]}">'
           f'<title>recency window: {other_tokens} tokens</title></rect>'
           f'<rect x="{w1 + w2:.1f}" y="0" width="{free * scale:.1f}" height="{BAR_HEIGHT}" fill="{FREE_COLOUR}">'
           f'<title>free: {free} tokens</title></rect>'
           + _legend([("pinned", LAYER_COLOURS["pinned"], str(layers["pinned"])),
                      ("recent", LAYER_COLOURS["tail"], str(layers["tail"])),
                      ("free", FREE_COLOUR, str(free))]
                     + ([("pins over budget", "#cc0000", str(overflow))] if overflow else []), BAR_HEIGHT + 6)
           + "</svg>")
    return Markup(f'<figure class="chart">{svg}<figcaption>hot-set composition (tokens)</figcaption></figure>')


def layer_columns(samples: Sequence[tuple[dict[str, int], int]], caption: str, height: int = 160) -> Markup:
    """One stacked column per call (oldest left): tokens per layer, with the budget as a tick."""
    if not samples:
        return Markup(f'<p class="empty">{escape(caption)}: no calls observed yet.</p>')
    ymax = max(max(b, sum(layers.values())) for layers, b in samples) or 1
    n = len(samples)
    col = WIDTH / n
    parts = []
    for i, (layers, budget) in enumerate(samples):
        y = float(height)
        for layer in SLICES:
            tok = layers.get(layer, 0)
            if tok <= 0:
                continue
            h = tok / ymax * height
            y -= h
            parts.append(f'<rect x="{i * col:.1f}" y="{y:.1f}" width="{max(col - 1, 0.5):.1f}" height="{h:.1f}" '
                         f'fill="{LAYER_COLOURS[layer]}"><title>call {i + 1}: {layer} {tok} tokens</title></rect>')
        by = height - budget / ymax * height
        parts.append(f'<line x1="{i * col:.1f}" x2="{(i + 1) * col:.1f}" y1="{by:.1f}" y2="{by:.1f}" '
                     f'stroke="#000" stroke-width="1"><title>call {i + 1}: budget {budget}</title></line>')
    legend = [(layer, LAYER_COLOURS[layer], "") for layer in SLICES] + [("budget", "#000000", "")]
    h = height + 10 + LEGEND_ROW
    svg = (f'<svg class="chart" viewBox="0 0 {WIDTH + 40} {h}" width="{WIDTH + 40}" height="{h}" role="img" '
           f'aria-label="{escape(caption)}: {n} calls, up to {ymax} tokens">{"".join(parts)}'
           f'{_legend(legend, height + 8)}</svg>')
    return Markup(f'<figure class="chart">{svg}<figcaption>{escape(caption)}</figcaption></figure>')


def ratio_series(values: Sequence[float], caption: str, height: int = 100) -> Markup:
    """Points 0..1 over calls (budget use), with the 1.0 line."""
    if not values:
        return Markup(f'<p class="empty">{escape(caption)}: no calls observed yet.</p>')
    n = len(values)
    step = WIDTH / max(n - 1, 1)
    pts = " ".join(f"{i * step:.1f},{height - min(max(v, 0.0), 1.0) * height:.1f}" for i, v in enumerate(values))
    mean = sum(values) / n
    svg = (f'<svg class="chart" viewBox="-4 -4 {WIDTH + 48} {height + 24}" width="{WIDTH + 48}" height="{height + 24}" '
           f'role="img" aria-label="{escape(caption)}: {n} calls, mean {mean:.0%}, last {values[-1]:.0%}">'
           f'<line x1="0" x2="{WIDTH}" y1="0" y2="0" stroke="#999" stroke-dasharray="4 3"/>'
           f'<text x="{WIDTH + 4}" y="4" font-size="11">100%</text>'
           f'<text x="{WIDTH + 4}" y="{height}" font-size="11">0%</text>'
           f'<polyline points="{pts}" fill="none" stroke="{LAYER_COLOURS["retrieved"]}" stroke-width="2"/>'
           f'<text x="0" y="{height + 16}" font-size="11">mean {mean:.0%}, last {values[-1]:.0%}</text></svg>')
    return Markup(f'<figure class="chart">{svg}<figcaption>{escape(caption)}</figcaption></figure>')


# one marker colour per tune candidate, cycled (the Okabe-Ito palette, as the layers)
CANDIDATE_COLOURS = ("#0072B2", "#D55E00", "#009E73", "#CC79A7", "#E69F00", "#56B4E9", "#F0E442", "#000000")


def recall_vs_cost(points: Sequence[tuple[str, int, float, float]], caption: str, height: int = 200) -> Markup:
    """Recall (0..1, up) against billed cost as a share of full context's bill (right),
    one point per (candidate, budget), from the latest `tiermem tune` result."""
    if not points:
        return Markup(f'<p class="empty">{escape(caption)}: no <code>tiermem tune</code> result in the data dir.</p>')
    top_cost = max(max(c for _n, _b, c, _r in points), 1e-9)
    names = sorted({n for n, _b, _c, _r in points})
    colour = {n: CANDIDATE_COLOURS[i % len(CANDIDATE_COLOURS)] for i, n in enumerate(names)}
    marks = "".join(
        f'<circle cx="{c / top_cost * WIDTH:.1f}" cy="{height - min(max(r, 0.0), 1.0) * height:.1f}" r="4" '
        f'fill="{colour[n]}"><title>{escape(n)} at {b} tokens: recall {r:.1%}, cost {c:.1%} of full</title></circle>'
        for n, b, c, r in points)
    legend = "".join(f'<text x="{WIDTH + 8}" y="{14 + 14 * i}" font-size="11" fill="{colour[n]}">{escape(n)}</text>'
                     for i, n in enumerate(names))
    svg = (f'<svg class="chart" viewBox="-4 -4 {WIDTH + 120} {height + 24}" width="{WIDTH + 120}" '
           f'height="{height + 24}" role="img" aria-label="{escape(caption)}: {len(points)} points">'
           f'<line x1="0" x2="{WIDTH}" y1="{height}" y2="{height}" stroke="#999"/>'
           f'<line x1="0" x2="0" y1="0" y2="{height}" stroke="#999"/>'
           f'<text x="0" y="{height + 16}" font-size="11">billed cost / full context (max {top_cost:.0%})</text>'
           f'<text x="4" y="10" font-size="11">recall 100%</text>{marks}{legend}</svg>')
    return Markup(f'<figure class="chart">{svg}<figcaption>{escape(caption)}</figcaption></figure>')
