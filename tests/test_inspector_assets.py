"""The inspector's assets travel in the wheel and name no other host (issue 21: no CDN,
nothing downloaded at run time): every template and static file is matched by the
package-data globs of pyproject.toml, and none of them, nor the /docs assets we serve,
points outside this origin.
"""

from __future__ import annotations

import fnmatch
import re
import tomllib
from pathlib import Path

import pytest

from tiermem.inspector.docs import SWAGGER_FILES, assets_dir

ROOT = Path(__file__).resolve().parent.parent
PACKAGE = ROOT / "tiermem" / "inspector"
# an absolute URL in an attribute or a CSS url(): what a page would fetch from elsewhere
EXTERNAL = re.compile(r"""(?:src|href|action)\s*=\s*["']?(?:https?:)?//|url\(\s*["']?(?:https?:)?//""", re.I)


def package_files() -> list[Path]:
    return sorted(p for sub in ("templates", "static") for p in (PACKAGE / sub).iterdir() if p.is_file())


def test_every_asset_is_package_data() -> None:
    globs = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]["package-data"][
        "tiermem.inspector"]
    files = package_files()
    assert {p.name for p in files} >= {"base.html", "_plan.html", "htmx.min.js", "json-enc.js", "inspector.css",
                                       "inspector.js", "htmx.LICENSE"}
    for p in files:
        rel = p.relative_to(PACKAGE).as_posix()
        assert any(fnmatch.fnmatch(rel, g) for g in globs), f"{rel} would be missing from the wheel"


@pytest.mark.parametrize("path", package_files(), ids=lambda p: p.name)
def test_no_asset_points_at_another_host(path: Path) -> None:
    assert not EXTERNAL.search(path.read_text(errors="replace")), path


def test_docs_assets_are_installed_with_the_package() -> None:
    root = assets_dir()
    for name in SWAGGER_FILES:
        assert (root / name).stat().st_size > 0
    assert "SwaggerUIBundle" in (root / "swagger-ui-bundle.js").read_text(errors="replace")


# (layer tokens, context total, budget) -- the bar never draws past the budget
BARS = [
    ({"pinned": 23, "summary": 47, "retrieved": 480, "tail": 50}, 589, 600),  # items sum above the total
    ({"tail": 100}, 130, 600),  # framing on top of the items
    ({}, 0, 100),  # an empty context
]


@pytest.mark.parametrize(("layers", "total", "budget"), BARS)
def test_budget_bar_fills_exactly_the_context(layers: dict[str, int], total: int, budget: int) -> None:
    from tiermem.inspector.charts import WIDTH, budget_bar

    svg = str(budget_bar(layers, budget, "x", total=total))
    widths = [float(w) for w in re.findall(r'<rect x="[\d.]+" y="0" width="([\d.]+)"', svg)]
    assert sum(widths) == pytest.approx(WIDTH, abs=0.5)  # used + unused = the whole budget
    assert f"{total} of {budget} tokens used" in svg
