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
