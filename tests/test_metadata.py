"""The package's requirements bind users no more than they must, and CI tests their
lower bounds."""

import re
from pathlib import Path

import pytest
from packaging.version import Version

tomllib = pytest.importorskip("tomllib")  # Python 3.11+

ROOT = Path(__file__).resolve().parents[1]
PROJECT = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]


def _requirements():
    yield from PROJECT["dependencies"]
    for extra in PROJECT["optional-dependencies"].values():
        yield from extra


def test_no_requirement_pins_one_version():
    # a user's own torch (CUDA or another platform) must satisfy the torch extra
    pinned = [r for r in _requirements() if "==" in r or "<" in r]
    assert not pinned


def test_every_runtime_dependency_has_the_lower_bound_ci_tests():
    bounds = {name: Version(version) for name, version in (
        re.fullmatch(r"([\w-]+)>=([\d.]+)", requirement).groups()
        for requirement in PROJECT["dependencies"])}
    oldest = {name: Version(version) for name, version in (
        line.split("==") for line in
        (ROOT / ".ci" / "oldest-constraints.txt").read_text().splitlines()
        if line and not line.startswith("#"))}
    assert oldest == bounds


def test_ci_runs_the_suite_with_the_newest_and_the_oldest_versions():
    script = (ROOT / ".ci" / "run").read_text()
    assert "run_with_torch newest\n" in script
    assert "run_with_torch oldest -c .ci/oldest-constraints.txt" in script
    # torch's CPU wheel is pinned in CI only, before the package and its torch extra
    assert script.index("torch==") < script.index('pip install --quiet ".[test,torch]"')


@pytest.mark.parametrize("extra", ["test", "docs", "xgboost", "flower"])
def test_no_extra_but_torch_installs_torch(extra):
    # pip picks a CUDA build of torch (gigabytes of nvidia packages) where none is
    # installed: the tests of PyTorch networks need the torch extra and skip without it,
    # and the docs build runs the gallery's network example only where torch is at hand
    requirements = PROJECT["optional-dependencies"][extra]
    assert not [r for r in requirements if re.match(r"(torch|skorch)\b", r)]
