"""The results pages' tables and figures, from the benchmarks' stored results.

``.. benchmark-table:: NAME [INDEX]`` shows table INDEX (0 by default) of
``benchmarks/results/NAME.json``, as the benchmark printed it, and says the command that
printed it. ``.. benchmark-figure:: SCRIPT NAME`` calls ``figure(results)`` of
``benchmarks/SCRIPT.py`` on those results (the same script that prints the table) and
shows the figure it draws, with the directive's content as its caption. The build reads
the stored files: it runs no benchmark.
"""

import importlib
import sys
from pathlib import Path

import matplotlib.pyplot as plt
from docutils import nodes
from docutils.parsers.rst import Directive, directives
from docutils.statemachine import StringList

import skfedkt


def _benchmarks():
    """The repository's benchmarks folder, beside these docs or beside the package."""
    for root in (Path(__file__).resolve().parents[1], Path(skfedkt.__file__).parents[1]):
        if (root / "benchmarks" / "_common.py").exists():
            return root / "benchmarks"
    raise RuntimeError("The results pages need the repository's benchmarks/ folder.")


def _common():
    folder = str(_benchmarks())
    if folder not in sys.path:
        sys.path.insert(0, folder)
    return importlib.import_module("_common")


def _parse(directive, lines):
    """Parse `lines` of reStructuredText where the directive stands."""
    container = nodes.container()
    directive.state.nested_parse(StringList(lines, source="benchmark results"),
                                 directive.content_offset, container)
    return container.children


class BenchmarkTable(Directive):
    """A stored table, as the benchmark printed it, and the command that printed it."""

    required_arguments = 1
    optional_arguments = 1
    option_spec = {"widths": directives.unchanged}

    def run(self):
        results = _common().stored_results(self.arguments[0])
        table = results["tables"][int(self.arguments[1]) if len(self.arguments) > 1 else 0]
        lines = [".. list-table::", "   :header-rows: 1", ""]
        for row in [table["header"], *table["rows"]]:
            lines += [f"   * - {row[0]}", *(f"     - {cell}" for cell in row[1:])]
        return _parse(self, lines)


class BenchmarkFigure(Directive):
    """The figure a benchmark draws from its stored results."""

    required_arguments = 2
    has_content = True

    def run(self):
        script, name = self.arguments
        results = _common().stored_results(name)
        figure = importlib.import_module(script).figure(results)
        folder = Path(self.state.document.settings.env.srcdir) / "_figures"
        folder.mkdir(exist_ok=True)
        figure.savefig(folder / f"{name}.png", dpi=110, bbox_inches="tight")
        plt.close(figure)
        command = results["command"]
        caption = [f"   {line}" for line in self.content] or ["   "]
        return _parse(self, [f".. figure:: /_figures/{name}.png",
                             f"   :alt: {script} ({name})", "", *caption,
                             f"   Drawn by ``{script}.py`` from ``{command}``."])


def setup(app):
    app.add_directive("benchmark-table", BenchmarkTable)
    app.add_directive("benchmark-figure", BenchmarkFigure)
    return {"parallel_read_safe": True, "version": "1"}
