"""`/docs` (Swagger UI) and `/redoc` from files packaged with the wheel: they work offline.

FastAPI's default pages load Swagger UI and ReDoc from a CDN and are blank without
internet. The `fastapi-offline` distribution ships the same assets (Swagger UI 5, which
renders OpenAPI 3.1, and ReDoc); we serve its files under `/docs/static` and build the
pages with FastAPI's own `get_swagger_ui_html` / `get_redoc_html`, with every URL local:
script, stylesheet, favicon, no Google fonts, and no validator badge (which would call
validator.swagger.io).

Both pages send `DOCS_HEADERS`: no other site may frame them (Swagger UI's "Try it out"
sends real requests, with no token at all on a `--no-auth` server, so a framed page could
be clicked through on a user's behalf), no content sniffing, no referrer, and nothing
fetched from another host: ReDoc's bundle draws its footer logo from cdn.redoc.ly, which
`img-src` refuses (the link beside it stays). The policy sets no script or style sources:
Swagger UI starts from an inline script and ReDoc adds its styles at run time, which the
inspector pages' `script-src 'self'` would refuse.
"""

from __future__ import annotations

import importlib.resources
import pathlib

from fastapi import FastAPI
from fastapi.openapi.docs import get_redoc_html, get_swagger_ui_html
from fastapi.responses import HTMLResponse
from fastapi.staticfiles import StaticFiles

DOCS_STATIC = "/docs/static"
SWAGGER_FILES = ("swagger-ui-bundle.js", "swagger-ui.css", "favicon.png", "redoc.standalone.js")
# images: the packaged ones, the data: icons of Swagger UI's stylesheet, and the blob:
# a "Try it out" answer that is an image is shown from
DOCS_CSP = ("img-src 'self' data: blob:; font-src 'self' data:; connect-src 'self'; frame-ancestors 'none'; "
            "base-uri 'none'; object-src 'none'; form-action 'self'")
DOCS_HEADERS = {"Content-Security-Policy": DOCS_CSP, "X-Frame-Options": "DENY", "X-Content-Type-Options": "nosniff",
                "Referrer-Policy": "no-referrer"}


def assets_dir() -> pathlib.Path:
    """The folder of the packaged Swagger UI / ReDoc files (raises when it lacks one)."""
    root = pathlib.Path(str(importlib.resources.files("fastapi_offline") / "static"))
    missing = [f for f in SWAGGER_FILES if not (root / f).is_file()]
    if missing:
        raise FileNotFoundError(f"fastapi_offline's assets lack {missing} in {root}")
    return root


def install_docs(app: FastAPI) -> None:
    app.mount(DOCS_STATIC, StaticFiles(directory=assets_dir()), name="docs-static")
    title = f"{app.title} API"

    @app.get("/docs", include_in_schema=False)
    def swagger() -> HTMLResponse:
        return _guarded(get_swagger_ui_html(
            openapi_url=app.openapi_url or "/openapi.json",
            title=title,
            swagger_js_url=f"{DOCS_STATIC}/swagger-ui-bundle.js",
            swagger_css_url=f"{DOCS_STATIC}/swagger-ui.css",
            swagger_favicon_url=f"{DOCS_STATIC}/favicon.png",
            swagger_ui_parameters={"validatorUrl": None},
        ))

    @app.get("/redoc", include_in_schema=False)
    def redoc() -> HTMLResponse:
        return _guarded(get_redoc_html(
            openapi_url=app.openapi_url or "/openapi.json",
            title=title,
            redoc_js_url=f"{DOCS_STATIC}/redoc.standalone.js",
            redoc_favicon_url=f"{DOCS_STATIC}/favicon.png",
            with_google_fonts=False,
        ))


def _guarded(page: HTMLResponse) -> HTMLResponse:
    page.headers.update(DOCS_HEADERS)
    return page
