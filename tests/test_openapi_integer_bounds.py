"""Every bound of an integer field in the OpenAPI document is a JSON integer, exactly the
model's.

FastAPI passes the document through its OpenAPI model, whose bounds are floats
(`fastapi.openapi.models.Schema.maximum: float | None`): `/openapi.json` said
`"maximum":200.0` for a search's `k` and `4.611686018427388e+18` for a position
(MAX_POSITION, 2**62), which a client generating code from it read as a float. The app
gives them back as integers (`tiermem.service.app.exact_integer_bounds`). Checked on the
document as served (JSON, so 200 and 200.0 differ) of the real app: each integer schema
anywhere in it, and each request and response model's integer bounds against pydantic's
own schema of the model, value and type.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from pydantic import BaseModel

from tiermem import Config
from tiermem.memory import MAX_SEARCH_K
from tiermem.service import schemas
from tiermem.service.app import create_app
from tiermem.tiers.models import MAX_POSITION

pytestmark = pytest.mark.usefixtures("clean_env")  # no TIERMEM_* setting of the runner leaks in

TOKEN = "tok-acme-0123456789abcdef"
# JSON Schema's keywords bounding a number (the test's own list: it runs on the code before too)
NUMBER_BOUNDS = ("minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum", "multipleOf")


@pytest.fixture(scope="module")
def spec(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    root: Path = tmp_path_factory.mktemp("intbounds")
    app = create_app(Config(data_dir=root / "data", auth_tokens={TOKEN: "acme"}), start_scheduler=False)
    # as /openapi.json sends it: JSON, where 200 and 200.0 are told apart on reading
    return json.loads(json.dumps(app.openapi()))  # type: ignore[no-any-return]


def integer_bounds(node: Any, where: str = "") -> list[tuple[str, str, Any]]:
    """(where, keyword, value) of every bound of every integer schema in `node`."""
    found: list[tuple[str, str, Any]] = []
    if isinstance(node, list):
        for i, item in enumerate(node):
            found += integer_bounds(item, f"{where}[{i}]")
    elif isinstance(node, dict):
        if node.get("type") == "integer":
            found += [(where, key, node[key]) for key in NUMBER_BOUNDS if key in node]
        for key, value in node.items():
            found += integer_bounds(value, f"{where}/{key}")
    return found


def test_every_integer_bound_is_an_integer(spec: dict[str, Any]) -> None:
    bounds = integer_bounds(spec)
    assert len(bounds) > 20, bounds  # the walk finds them: k, limit, position, budget, priority...
    floats = [b for b in bounds if not isinstance(b[2], int)]
    assert floats == [], floats  # before: every one a float (200.0, 4.611686018427388e+18)


# (model, field, keyword, the exact value): the reviewer's two, and the largest bound
EXACT = [
    ("SearchIn", "k", "maximum", MAX_SEARCH_K),  # "maximum":200.0 before
    ("SearchIn", "k", "minimum", 1),  # 1.0 before
    ("PinIn", "position", "maximum", MAX_POSITION),  # 4.611686018427388e+18 before
]


@pytest.mark.parametrize(("model", "field", "key", "value"), EXACT, ids=[f"{m}.{f}.{k}" for m, f, k, _ in EXACT])
def test_named_bounds_exact(spec: dict[str, Any], model: str, field: str, key: str, value: int) -> None:
    got = spec["components"]["schemas"][model]["properties"][field][key]
    assert type(got) is int and got == value, got


def _models(spec: dict[str, Any]) -> list[tuple[str, type[BaseModel]]]:
    """(component name, model) of each component that is a model of tiermem.service.schemas."""
    out = []
    for name in spec["components"]["schemas"]:
        model = getattr(schemas, name.removesuffix("-Input").removesuffix("-Output"), None)
        if isinstance(model, type) and issubclass(model, BaseModel):
            out.append((name, model))
    return out


def test_bounds_equal_the_models(spec: dict[str, Any]) -> None:
    models = _models(spec)
    assert len(models) > 20, models  # the request and response models are all there
    for name, model in models:
        mode = "serialization" if name.endswith("-Output") else "validation"
        own = model.model_json_schema(mode=mode)["properties"]
        doc = spec["components"]["schemas"][name]["properties"]
        for field, schema in own.items():
            want = [(k, v, type(v)) for _, k, v in integer_bounds(schema)]
            got = [(k, v, type(v)) for _, k, v in integer_bounds(doc[field])]
            assert got == want, (name, field, got, want)
