"""Every gallery example runs to the end (smoke test: the examples cannot rot).

The gallery takes six minutes of a 2-core machine, more than half of the README's test
command, so that command leaves it to the docs build, which runs every example, and to
CI: ``.ci/run`` sets ``SKFEDKT_TEST_EXAMPLES=1`` for its two suites with torch."""

import os
import runpy
import tempfile
import warnings
from pathlib import Path

import pytest
from joblib.externals.loky import get_reusable_executor

import skfedkt

matplotlib = pytest.importorskip("matplotlib")
matplotlib.use("Agg")

EXAMPLES = sorted((Path(__file__).parents[1] / "examples").glob("plot_*.py"))


@pytest.mark.skipif(
    os.environ.get("SKFEDKT_TEST_EXAMPLES") != "1",
    reason="the gallery takes six minutes on 2 cores; the docs build runs it, and "
    ".ci/run sets SKFEDKT_TEST_EXAMPLES=1",
)
@pytest.mark.parametrize("path", EXAMPLES, ids=[p.stem for p in EXAMPLES])
def test_example_runs(path, monkeypatch, capsys):
    import matplotlib.pyplot as plt

    if "skorch" in path.read_text():
        pytest.importorskip("skorch", reason="the example needs the torch extra")

    monkeypatch.chdir(path.parent)
    # fresh worker processes, as when the example runs on its own: workers that earlier
    # tests grew (torch imported, say) trip loky's leak check, which restarts one mid-run
    # with a warning
    get_reusable_executor().shutdown(wait=True)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        runpy.run_path(str(path), run_name="__main__")
    plt.close("all")
    # an example may show the package's own warnings (they teach), nothing else: no
    # deprecation or runtime warning from the package or its dependencies (the
    # package's own categories point at the example's line that called it)
    package = str(Path(skfedkt.__file__).parent)
    others = [f"{w.category.__name__}: {w.message} ({w.filename})" for w in caught
              if not (issubclass(w.category, UserWarning) and (
                  w.filename.startswith(package)
                  or w.category.__module__.startswith("skfedkt")))]
    assert not others, others
    # and the page says what the package's warnings mean: none is left unexplained
    comments = " ".join(line for line in path.read_text().splitlines()
                        if line.lstrip().startswith("#"))
    assert len(caught) == len(others) or "warn" in comments, (
        f"{path.name} shows the package's warnings and its text does not explain them")
    # what the page shows names no folder of the machine that built it
    printed = capsys.readouterr().out
    for folder in (tempfile.gettempdir(), str(path.parents[1])):
        assert folder not in printed
