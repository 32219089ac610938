"""`recall_rounds` (and the evals over its `prepared` samples) keeps each sample's data dir
under `--data-root`, whatever the file's `sample_id`. The id was joined to the root as a
path: `/abs` replaced the root and `..` climbed out of it, so the store was written where
the file said, outside the directory the user gave. An id that is not a plain name now
names its dir by a slug and a short digest (`locomo.sample_dir_names`). Real SQLite,
tiny hand-made files."""

from __future__ import annotations

from pathlib import Path

import pytest
from locomo_mini import question, sample, write

from tiermem.evals.locomo import DIR_NAME_MAX_CHARS, sample_dir_names
from tiermem.evals.recall_rounds import parse_variant, run

BUDGET = 500
TEXTS = ["I adopted a grey cat named Pixel.", "Nice! How old is Pixel?", "She is two."]
QA = [question("What is the cat called?", "Pixel", ["D1:1"])]


def _ids(tmp_path: Path) -> list[str]:
    return [
        str(tmp_path / "outside"),  # an absolute path: it replaced the root
        "..",  # the root's parent: the store landed in tmp_path itself
        "../escaped",  # a relative path out of the root
        "a/b",  # a separator: a dir two levels down, named by part of the id
        "x" * 300,  # over a file system's 255-byte name: the run stopped with ENAMETOOLONG
    ]


def test_every_sample_dir_is_a_child_of_the_data_root(tmp_path: Path) -> None:
    root = tmp_path / "root"
    data = write(tmp_path / "data.json", [sample(sid, TEXTS, QA) for sid in _ids(tmp_path)])
    res = run(data, [BUDGET], [parse_variant("base:")], data_root=root, sample_questions=None,
              baselines=False, hot=False)
    assert res["variants"]["base"]["budgets"][str(BUDGET)]["questions"] == len(_ids(tmp_path))
    # nothing beside the root and the data file: no store outside the root
    assert sorted(p.name for p in tmp_path.iterdir()) == ["data.json", "root"]
    dirs = sorted(root.iterdir())
    assert len(dirs) == len(_ids(tmp_path))
    assert all((d / "tiermem.db").is_file() for d in dirs)  # each sample's store one level down


@pytest.mark.parametrize(("labels", "want"), [
    (["conv-26", "s_1.b"], ["conv-26", "s_1.b"]),  # plain names: kept, so existing data dirs are reused
    (["Conv", "conv"], ["Conv", "conv-"]),  # a case apart only: a digest (prefix checked below)
    ([".."], ["sample-"]),  # nothing of the id is a name: "sample" and the digest
    (["/tmp/x"], ["tmp_x-"]),  # a path: its slug, the separators gone
    (["-rf"], ["rf-"]),  # option-like: not the leading dash
])
def test_sample_dir_names(labels: list[str], want: list[str]) -> None:
    got = sample_dir_names(labels)
    for name, prefix in zip(got, want, strict=True):
        assert name == prefix if not prefix.endswith("-") else name.startswith(prefix) and len(name) == len(prefix) + 8
    assert len({n.lower() for n in got}) == len(got)


def test_sample_dir_names_are_short_and_tell_long_ids_apart() -> None:
    a, b = sample_dir_names(["y" * 300 + "1", "y" * 300 + "2"])
    assert a != b and max(len(a), len(b)) <= DIR_NAME_MAX_CHARS
    assert sample_dir_names(["a/b"]) == sample_dir_names(["a/b"])  # the same every run: the dir is reused
