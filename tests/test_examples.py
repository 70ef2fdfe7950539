"""Every gallery example runs to the end (smoke test: the examples cannot rot)."""

import runpy
from pathlib import Path

import pytest

matplotlib = pytest.importorskip("matplotlib")
matplotlib.use("Agg")

EXAMPLES = sorted((Path(__file__).parents[1] / "examples").glob("plot_*.py"))


@pytest.mark.parametrize("path", EXAMPLES, ids=[p.stem for p in EXAMPLES])
def test_example_runs(path, monkeypatch):
    import matplotlib.pyplot as plt

    monkeypatch.chdir(path.parent)
    runpy.run_path(str(path), run_name="__main__")
    plt.close("all")
