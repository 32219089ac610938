"""A cgroup CPU quota bounds the embedding threads (tiers.embed_onnx.usable_cpus).

`usable_cpus` read the CPU affinity mask only: a container started with `--cpus=1`
(cgroup v2 `cpu.max` "100000 100000"; v1 `cpu.cfs_quota_us` / `cpu.cfs_period_us`) on a
16-CPU host got 16 embedding workers for one CPU's time, which thrash. The quota is read
from real files written under a cgroup root of the test's own.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from tiermem.tiers import embed_onnx
from tiermem.tiers.embed_onnx import FastEmbedder, cpu_quota, usable_cpus

ROOT_CGROUP = "0::/\n"  # /proc/self/cgroup in a container with its own cgroup namespace


def affinity() -> int:
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # not Linux
        return os.cpu_count() or 1


def write(root: Path, files: dict[str, str]) -> Path:
    for name, text in files.items():
        (root / name).parent.mkdir(parents=True, exist_ok=True)
        (root / name).write_text(text)
    return root


@pytest.mark.parametrize(("files", "cpus"), [
    ({"cpu.max": "100000 100000\n"}, 1),  # v2, docker --cpus=1
    ({"cpu.max": "150000 100000\n"}, 2),  # v2, --cpus=1.5: rounded up
    ({"cpu.max": "20000 100000\n"}, 1),  # v2, a fifth of a CPU: never below one
    ({"cpu.max": "max 100000\n"}, None),  # v2, no quota
    ({"cpu/cpu.cfs_quota_us": "100000\n", "cpu/cpu.cfs_period_us": "100000\n"}, 1),  # v1, --cpus=1
    ({"cpu,cpuacct/cpu.cfs_quota_us": "250000\n", "cpu,cpuacct/cpu.cfs_period_us": "100000\n"}, 3),  # v1 joined mount
    ({"cpu/cpu.cfs_quota_us": "-1\n", "cpu/cpu.cfs_period_us": "100000\n"}, None),  # v1, no quota
    ({"cpu.max": "max 100000\n", "cpu/cpu.cfs_quota_us": "100000\n",
      "cpu/cpu.cfs_period_us": "50000\n"}, 2),  # v2 says none: v1's is read
    ({"cpu.max": "300000 100000\n", "cpu/cpu.cfs_quota_us": "100000\n",
      "cpu/cpu.cfs_period_us": "100000\n"}, 3),  # v2 first
    ({"cpu.max": "garbage\n"}, None),  # unreadable: no quota known
    ({}, None),  # no cgroup file system
])
def test_the_quota_is_read(tmp_path: Path, files: dict[str, str], cpus: int | None) -> None:
    root = write(tmp_path / "cgroup", files)
    self_cgroup = write(tmp_path, {"self": ROOT_CGROUP}) / "self"
    assert cpu_quota(root, self_cgroup) == cpus


@pytest.mark.parametrize(("self_cgroup", "files", "cpus"), [
    # v2 under systemd: the process's own cgroup has a quota, its parent a looser one
    ("0::/system.slice/app.service\n",
     {"system.slice/app.service/cpu.max": "200000 100000", "system.slice/cpu.max": "400000 100000"}, 2),
    # the parent's is tighter: it bounds its children
    ("0::/system.slice/app.service\n",
     {"system.slice/app.service/cpu.max": "max 100000", "system.slice/cpu.max": "100000 100000"}, 1),
    # v1 without a cgroup namespace: the host's path, the container's cgroup mounted at the top
    ("4:cpu,cpuacct:/docker/0123abcd\n1:name=systemd:/docker/0123abcd\n",
     {"cpu,cpuacct/cpu.cfs_quota_us": "100000", "cpu,cpuacct/cpu.cfs_period_us": "100000"}, 1),
])
def test_the_process_cgroup_and_those_above_it_are_read(
        tmp_path: Path, self_cgroup: str, files: dict[str, str], cpus: int) -> None:
    root = write(tmp_path / "cgroup", files)
    assert cpu_quota(root, write(tmp_path, {"self": self_cgroup}) / "self") == cpus


@pytest.mark.skipif(not hasattr(os, "sched_getaffinity"), reason="reads the affinity mask")
def test_usable_cpus_is_the_quota_bounded_by_the_mask(tmp_path: Path) -> None:
    one = write(tmp_path / "one", {"cpu.max": "100000 100000"})
    assert usable_cpus(one) == 1
    many = write(tmp_path / "many", {"cpu.max": f"{(affinity() + 8) * 100000} 100000"})
    assert usable_cpus(many) == affinity()  # a quota above the mask does not add CPUs
    assert usable_cpus(tmp_path / "none") == affinity()


@pytest.mark.skipif(affinity() < 2, reason="one CPU is one worker with or without a quota")
def test_the_embedder_sizes_its_workers_by_the_quota(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(embed_onnx, "CGROUP_ROOT", write(tmp_path / "cgroup", {"cpu.max": "100000 100000"}),
                        raising=False)  # (absent before quotas were read)
    assert FastEmbedder(cache_dir=tmp_path / "cache").workers == 1
