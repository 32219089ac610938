"""Whether a directory has the shape of a model the embedder can load, from its file
names alone (a directory listing and modules.json, a few hundred bytes): cheap enough for
config validation, which must not load a model (a CLI append starts in about a second and
never embeds).

`embedding_model` names a local sentence-transformers directory, which
`tiers.embed.SentenceTransformerEmbedder._load` hands to `SentenceTransformer(path,
local_files_only=True)` (and the ONNX export loads the same way). That load reads:

- `modules.json`, when present: the modules, each in its own directory (`path`, "" for
  the model's own); a Transformer module's directory is a transformers model;
- else the directory itself as a transformers model (Transformer + mean pooling);
- a transformers model: `config.json` and its weights (`model.safetensors` or
  `pytorch_model.bin`, or a sharded one's index; TensorFlow and Flax weights are not
  loaded without options the embedder does not pass).

Checked here is only what is absent: a directory that is no model (a typo'd path, `/tmp`,
a model's hub name read as a relative path) failed at the first embedding instead, after
the store was opened, and the process ranked by keywords for its whole life. Files that
are present but damaged (cut weights, a modules.json that is no JSON) are left to the load
to report: it says what its libraries could not parse, and a model damaged after start
degrades to keyword ranking as before.
"""

from __future__ import annotations

import json
import os
import stat
from pathlib import Path
from typing import Any

MODULES_FILE = "modules.json"
TRANSFORMERS_CONFIG_FILE = "config.json"
# the weights transformers' AutoModel.from_pretrained reads for torch, whole or sharded
WEIGHT_FILES = ("model.safetensors", "pytorch_model.bin", "model.safetensors.index.json",
                "pytorch_model.bin.index.json")
TRANSFORMER_MODULE = "Transformer"  # the last part of a module's `type` in modules.json
MAX_MODULES_FILE_BYTES = 1024 * 1024  # a modules.json lists a handful of modules (~350 bytes)


def _listing(path: Path) -> set[str] | str:
    """The names in `path`, or why there are none to read."""
    try:
        st = os.stat(path)
    except (FileNotFoundError, NotADirectoryError):
        return "does not exist"
    except OSError as exc:
        return f"cannot be looked at ({exc.strerror or type(exc).__name__})"
    if not stat.S_ISDIR(st.st_mode):
        return "is a file, not a directory"
    try:
        return set(os.listdir(path))
    except OSError as exc:
        return f"cannot be read ({exc.strerror or type(exc).__name__})"


def _transformers_model_problem(path: Path, names: set[str], where: str) -> str | None:
    """What a transformers model directory (`where`, as the message names it) lacks."""
    if TRANSFORMERS_CONFIG_FILE not in names:
        return f"holds no {where}{TRANSFORMERS_CONFIG_FILE} (the transformer's configuration)"
    if not any(w in names for w in WEIGHT_FILES):
        return f"holds no weights in {where or './'} (none of {', '.join(WEIGHT_FILES)})"
    return None


def read_modules(path: Path) -> list[dict[str, Any]] | None:
    """The entries of the modules.json in the sentence-transformers directory `path`; None
    where there is none or it cannot be read as a list of modules (not JSON, not a list of
    objects: the load reports a damaged file, EmbeddingModelUnreadable). The one reading of
    that file: this check, and the vectors' width (`tiers.embed.model_dimension`)."""
    try:
        with open(path / MODULES_FILE, "rb") as f:
            got = json.loads(f.read(MAX_MODULES_FILE_BYTES))  # a longer one is cut: no JSON
    except (OSError, ValueError):
        return None
    if not isinstance(got, list) or not all(isinstance(m, dict) for m in got):
        return None
    return got


def model_directory_problem(path: Path) -> str | None:
    """Why `path` is not a model directory the embedder could load, said after the path
    ("does not exist", "holds no config.json ..."); None when it has the files a load reads."""
    names = _listing(path)
    if isinstance(names, str):
        return names
    if MODULES_FILE not in names:
        if TRANSFORMERS_CONFIG_FILE not in names:
            return (f"holds neither {MODULES_FILE} nor {TRANSFORMERS_CONFIG_FILE}: it is not a "
                    "sentence-transformers model directory")
        return _transformers_model_problem(path, names, "")
    modules = read_modules(path)
    if modules is None:
        return None  # present but damaged: the load says what its parser found
    for m in modules:
        # only a Transformer's files are looked for: other modules may have none (the
        # bundled model's 2_Normalize is listed and has no directory), or files of their own
        if str(m.get("type", "")).rsplit(".", 1)[-1] != TRANSFORMER_MODULE:
            continue
        sub = str(m.get("path", ""))
        where = f"{sub.rstrip('/')}/" if sub else ""
        inner = _listing(path / sub) if sub else names
        if isinstance(inner, str):
            return f"has no directory {where} for its {TRANSFORMER_MODULE} module ({MODULES_FILE} lists it): it {inner}"
        problem = _transformers_model_problem(path / sub, inner, where)
        if problem is not None:
            return problem
    return None
