"""The docs' results, tables and figures, from the benchmarks' stored results.

``.. benchmark-table:: NAME [INDEX]`` shows table INDEX (0 by default) of
``benchmarks/results/NAME.json``, as the benchmark printed it, with where and when it
was measured (`measured_at`: the commit, the date and the machine the stored file
records, and how many commits since changed the package's modules it ran). ``.. benchmark-figure::
SCRIPT NAME`` calls ``figure(results)`` of ``benchmarks/SCRIPT.py`` on those results (the
same script that prints the table) and shows the figure it draws, with the directive's
content as its caption. ``.. paper-table:: NAME`` shows a table a paper reports, stored
in ``benchmarks/papers.json``, and names its source. ``.. result-ages::`` lists every
stored result with its provenance and its age in commits of the code it measured.

A single number in prose is a cell of those tables: ``:result:`NAME[ INDEX] | ROW |
COLUMN``` shows the cell of ``NAME.json``'s table in the row whose first cells are ROW
(cells joined by " / ", as in ``digits / 0.1``) under the header COLUMN, and
``:paper:`NAME | ROW | COLUMN``` one of ``papers.json``. A fourth field, ``mean`` or
``std``, shows one side of a "mean ± std" cell. The build reads the stored files: it
runs no benchmark, and a cell that is not there fails it.
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
        return _parse(self, _list_table(table, measured_at(results)))


def measured_at(results):
    """Where and when stored `results` were measured, as their provenance says: the
    commit (marked where the tree differed from it), the date, the machine; or that
    the file records none."""
    if "provenance" not in results:
        if "commit" in results:  # stored before provenance, by hand on a GPU machine
            return f"Measured at commit {results['commit']} on {results['device']}."
        return "Stored without provenance (before it was recorded)."
    origin, machine = results["provenance"], results["provenance"]["machine"]
    commit = (origin["commit"] or "no commit")[:9] + ("" if origin["clean"] else "+changes")
    changes = _common().code_changes(results)
    since = ("" if not changes else f" The code it measures changed in {changes} "
             f"commit{'s' * (changes > 1)} since.")
    return (f"Measured at commit {commit} on {origin['date'][:10]}, {machine['cpu']} "
            f"({machine['cores']} cores, {machine['memory_gib']} GiB, {machine['device']})."
            + since)


def _list_table(table, caption=""):
    """The reStructuredText of a stored table (its ``header`` and ``rows``)."""
    lines = [f".. list-table:: {caption}", "   :header-rows: 1", ""]
    for row in [table["header"], *table["rows"]]:
        lines += [f"   * - {row[0]}", *(f"     - {cell}" for cell in row[1:])]
    return lines


def _cell(table, reference):
    """The cell of `table` that `reference` ("ROW | COLUMN[ | mean|std]") names."""
    fields = [field.strip() for field in reference.split("|")]
    if len(fields) not in (2, 3) or fields[2:] not in ([], ["mean"], ["std"]):
        raise ValueError(f"{reference!r} is not 'ROW | COLUMN' with an optional "
                         "'| mean' or '| std'")
    key, column = fields[0].split(" / "), fields[1]
    if column not in table["header"]:
        raise ValueError(f"no column {column!r}; the table has {table['header']}")
    rows = [row for row in table["rows"] if row[:len(key)] == key]
    if len(rows) != 1:
        raise ValueError(f"{len(rows)} rows start with {key}, not one")
    cell = rows[0][table["header"].index(column)]
    if fields[2:]:
        parts = cell.split("±")
        if len(parts) != 2:
            raise ValueError(f"{cell!r} is not 'mean ± std'")
        cell = parts[fields[2] == "std"].strip()
    return cell


def stored_cell(kind, text):
    """The stored cell that the text of a ``:result:`` or ``:paper:`` role (`kind`) names."""
    source, _, reference = " ".join(text.split()).partition("|")  # a role may wrap
    table = (_common().stored_results(source.split()[0])["tables"][
        int(source.split()[1]) if len(source.split()) > 1 else 0]
        if kind == "result" else _common().paper_table(source.strip()))
    return _cell(table, reference)


def _cell_role(name, rawtext, text, lineno, inliner, options=None, content=None):
    """``:result:`` and ``:paper:``: the stored cell the text names."""
    try:
        cell = stored_cell(name, text)
    except (KeyError, IndexError, OSError, TypeError, ValueError) as error:
        message = inliner.reporter.error(f":{name}:`{text}`: {error}", line=lineno)
        return [inliner.problematic(rawtext, rawtext, message)], [message]
    return [nodes.inline(rawtext, cell.replace("*", ""), classes=["stored-result"])], []


class ResultAges(Directive):
    """Every stored result, with where and when it was measured and how many commits
    since changed the package's modules its benchmark ran."""

    def run(self):
        rows = [["stored result", "commit", "date", "machine",
                 "commits since that changed its code"]]
        for path in sorted((_benchmarks() / "results").glob("*.json")):
            results = _common().stored_results(path.stem)
            origin = results.get("provenance")
            if origin is None:
                rows.append([path.stem, "not recorded", "-", "-", "-"])
                continue
            changes = _common().code_changes(results)
            rows.append([path.stem, (origin["commit"] or "none")[:9], origin["date"][:10],
                         f"{origin['machine']['cpu']}, {origin['machine']['cores']} cores, "
                         f"{origin['machine']['device']}",
                         "unknown" if changes is None else str(changes)])
        return _parse(self, _list_table(dict(header=rows[0], rows=rows[1:])))


class PaperTable(Directive):
    """A table a paper reports, as stored in ``benchmarks/papers.json``, with its source."""

    required_arguments = 1

    def run(self):
        table = _common().paper_table(self.arguments[0])
        return _parse(self, _list_table(table, caption=f"As reported in {table['source']}."))


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
                             f"   Drawn by ``{script}.py`` from ``{command}``. "
                             f"{measured_at(results)}"])


def setup(app):
    app.add_directive("benchmark-table", BenchmarkTable)
    app.add_directive("benchmark-figure", BenchmarkFigure)
    app.add_directive("paper-table", PaperTable)
    app.add_directive("result-ages", ResultAges)
    app.add_role("result", _cell_role)
    app.add_role("paper", _cell_role)
    return {"parallel_read_safe": True, "version": "1"}
