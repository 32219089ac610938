"""A service that stops while its background model load runs waits for the load before
it closes its Memory: no tiermem thread is left in onnxruntime when the process exits
(a daemon thread there at interpreter exit aborts the process; tests/test_exit_clean.py)."""

from __future__ import annotations

import threading
from pathlib import Path

from fastapi.testclient import TestClient

from tiermem import Config
from tiermem.service.app import WARM_UP_THREAD, create_app


def test_shutdown_waits_for_the_model_load(tmp_path: Path) -> None:
    app = create_app(Config(data_dir=str(tmp_path / "data")), auth=False, start_scheduler=False)
    with TestClient(app, base_url="http://127.0.0.1") as client:
        assert client.get("/healthz").status_code == 200
        # the lifespan has started the load; shutting down now races it
    alive = [t.name for t in threading.enumerate() if t.name == WARM_UP_THREAD]
    assert alive == [], "the warm-up thread outlived the app's shutdown"
    assert app.state.runtime.embedder_state in ("ready", "failed")
