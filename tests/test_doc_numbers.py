"""Every result in the docs comes from stored results, and the docs' words fit a reader
who has neither our machines nor our plans."""

import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
GENERATED = ("_build", "generated", "auto_examples", "_templates")

# a number that reads as a measured result: a decimal of two or more places (0.8xx,
# 1.07), a time, a difference in points, a percentage, or a count of rows or runs
# ("4 of 12")
RESULT = re.compile(r"(?<![\w.-])(?:\d+\.\d{2,}(?!\.?\d)|\d+(?:\.\d+)? ?(?:s|ms|seconds?|"
                    r"minutes?|hours?|points?)\b|\d+(?:\.\d+)? ?%|\d+ of \d+\b)")
# where numbers are not prose: literals, roles (``:result:`...```), math
NOT_PROSE = re.compile(r"``.*?``|:[\w-]+:`[^`]*`|`[^`]*`_?", re.DOTALL)
# directives whose content is code or stored results, never prose (a figure's caption
# is prose)
LITERAL_DIRECTIVES = re.compile(r"\.\. (code-block|code|doctest|testcode|testoutput|math|"
                                r"benchmark-table|paper-table|literalinclude|raw)::")
# numbers in prose that are not results: settings, sizes, bounds and the papers'
# protocol, each with the words that say so
NOT_RESULTS = (
    "Python 3.10", "skops 0.14", "torch older than 2.11", "Flower 1.42",
    "learning rate 0.001", "(120 s in the script)", "gamma 0.04",
    "torch 2.13", "sampled every 5 ms",
    # the benchmarks' splits and tasks, as their commands set them
    "75% / 12.5% / 12.5%", "with 24% positives", "(40% of the rows to the parties, 20% "
    "public, 40%\nheld out", "a random 70% of its public\nset", "the first 40% of a 30% "
    "public pool",
    # the attacks' operating points, a class share the warnings ignore below, and
    # examples of a model's output
    "at 1% and 0.1% false", "at 1% false positives", "(classes of at least 5%)",
    "holds 90% of class 0", "gives class 1 a 40% chance",
    # the papers' own numbers, which the papers' tables do not hold
    "paper reports a 51.5% relative gain",
)
# counts over the rows of a stored table, each checked against the table it counts
# (`test_counts_over_stored_rows_are_the_tables_own`): the phrase, as the page writes it
COUNTED = {
    "at least the paper's FedKT\non 12 of 12 rows": ("FedKT", ">=", "FedKT (paper)", 12),
    "better on 6 of 12 rows": ("FedKT", ">=", "one-shot all", 6),
    "ensemble on 6 (": ("FedKT", ">=", "one-shot all", 6),
    "at least the ensemble on 4 of 12 rows": ("FedKT, undistilled", ">=", "one-shot all", 4),
    "ensemble on 4 of 12 rows": ("FedKT, undistilled", ">=", "one-shot all", 4),
    "FedCT beats today's FedKT on 3 of 12 rows": ("FedCT", ">", "FedKT", 3),
    "on 5 rows, where no model that learns the public": (
        "one-shot all", ">", "central, public size", 5),
}


def doc_pages():
    return sorted(page for page in (ROOT / "doc").rglob("*.rst")
                  if not set(GENERATED) & set(page.relative_to(ROOT / "doc").parts))


def readme_prose(text):
    """The README's Markdown as the scanner reads reStructuredText: its fenced code
    blocks as literal blocks, and its one table of results blank (the stored table,
    which `test_the_readme_shows_the_stored_main_job_and_no_long_lines` checks)."""
    text = re.sub(r"```.*?```", lambda match: "\n" * match.group().count("\n"), text,
                  flags=re.DOTALL)
    return "\n".join("" if line.startswith("|") else line for line in text.splitlines())


def prose(text):
    """The reStructuredText prose of a page, line for line: literal blocks, code and
    results directives, literals, roles and allowed phrases blanked out."""
    lines, literal_indent = [], None
    for line in text.splitlines():
        indent = len(line) - len(line.lstrip())
        if literal_indent is not None:
            if not line.strip() or indent > literal_indent:
                lines.append("")
                continue
            literal_indent = None
        stripped = line.strip()
        if LITERAL_DIRECTIVES.match(stripped) or (stripped.endswith("::")
                                                  and not stripped.startswith("..")):
            literal_indent = indent
            if LITERAL_DIRECTIVES.match(stripped):
                line = ""
        lines.append(line)
    # a literal or a role may wrap: blank it whole, keeping its line breaks
    text = NOT_PROSE.sub(lambda match: "\n" * match.group().count("\n") or " ",
                         "\n".join(lines))
    for phrase in (*NOT_RESULTS, *COUNTED):
        text = text.replace(phrase, "\n" * phrase.count("\n") or " ")
    return text


def typed_results(text):
    """The result-like numbers typed into the prose of a page: (line, number)."""
    text = prose(text)
    return [(text.count("\n", 0, match.start()) + 1, match.group())
            for match in RESULT.finditer(text)]


def test_the_scanner_tells_typed_results_from_code_roles_and_settings():
    page = """A result of 0.883 ± 0.012, 4.2 points and 12 s, and beta 0.5; 97% on 4 of 12.

Stored: :result:`label_skew | digits /
0.12 | FedKT` and ``lr=0.001``::

    print(0.123)

.. benchmark-table:: label_skew 0
   :widths: 0.25

After 1.14x."""
    assert typed_results(page) == [(1, "0.883"), (1, "0.012"), (1, "4.2 points"),
                                   (1, "12 s"), (1, "97%"), (1, "4 of 12"), (11, "1.14")]


@pytest.mark.parametrize("page", [*doc_pages(), ROOT / "README.md"],
                         ids=lambda page: str(page.relative_to(ROOT)))
def test_results_in_the_docs_come_from_stored_results(page):
    name = page.relative_to(ROOT).as_posix()
    text = page.read_text()
    typed = typed_results(readme_prose(text) if page.suffix == ".md" else text)
    assert typed == [], (f"{name} types these results (line, number); show them "
                         f"with :result: or :paper: from stored results: {typed}")


def test_counts_over_stored_rows_are_the_tables_own():
    import json

    table = json.loads((ROOT / "benchmarks" / "results" / "label_skew.json").read_text())[
        "tables"][0]
    mean = {column: [float(row[table["header"].index(column)].split("±")[0])
                     for row in table["rows"]] for column in table["header"][3:]}
    pages = " ".join(page.read_text() for page in doc_pages())
    for phrase, (left, relation, right, count) in COUNTED.items():
        assert phrase in pages, phrase
        better = [a >= b if relation == ">=" else a > b
                  for a, b in zip(mean[left], mean[right])]
        assert sum(better) == count and len(better) == 12, (phrase, sum(better))


# words for a goal or a machine that a reader does not share
UNSHARED_WORDS = re.compile(
    r"\btargets? (?:was|were|of|set|for)\b|\(target\b|\bthe aim\b|\baim of\b|\bbar of\b|"
    r"\bthe bar\b|\bbar:|\bhere\b(?! and in)", re.IGNORECASE)
# "here" for a place on the page or in the code, not for a machine
HERE_ON_THE_PAGE = ("its draws made here", "imported at the top here", "stated here",
                    "written here")


@pytest.mark.parametrize("page", doc_pages(), ids=lambda page: str(page.relative_to(ROOT)))
def test_no_page_speaks_of_our_machine_or_our_goals(page):
    text = page.read_text()
    for phrase in HERE_ON_THE_PAGE:
        text = text.replace(phrase, "")
    found = [(text[:match.start()].count("\n") + 1, match.group())
             for match in UNSHARED_WORDS.finditer(text)]
    assert found == [], (f"{page.name} (line, words): say which machine or which "
                         f"measured bound instead: {found}")


ROLE = re.compile(r":(result|paper):`([^`]*)`")


def test_every_stored_number_a_page_shows_is_there(monkeypatch):
    """Each :result: and :paper: role of the docs names one stored cell (what the build
    would show), so that a rerun that renames a row or column fails here, not in print."""
    pytest.importorskip("docutils")
    monkeypatch.syspath_prepend(str(ROOT / "doc"))
    import benchmark_results

    roles = [(page.name, kind, " ".join(text.split())) for page in doc_pages()
             for kind, text in ROLE.findall(page.read_text())]
    assert roles
    for page, kind, text in roles:
        assert benchmark_results.stored_cell(kind, text), (page, text)


# the first line of a table typed into a page: a list table, or the top rule of a simple
# or grid table (a rule after a blank line)
TYPED_TABLE = re.compile(r"^\s*\.\. list-table::|(?<=\n\n)(=+( +=+)+|\+[-=]+(\+[-=]+)*\+)$",
                         re.M)
# tables that list no results: parameters, hooks, declarations, what each method sends
NOT_RESULT_TABLES = {"extending.rst": 5, "architecture.rst": 1, "deployment.rst": 1,
                     "user_guide/choosing.rst": 1}


@pytest.mark.parametrize("page", doc_pages(), ids=lambda page: str(page.relative_to(ROOT)))
def test_tables_of_results_come_from_stored_results(page):
    name = page.relative_to(ROOT / "doc").as_posix()
    typed = len(TYPED_TABLE.findall(page.read_text()))
    allowed = NOT_RESULT_TABLES.get(name, 0)
    assert typed == allowed, (f"{name} types {typed - allowed} table(s) of results: show "
                              "them with benchmark-table or paper-table")


def test_a_typed_table_is_counted_once_whatever_its_kind():
    page = """Text.

.. list-table::

   * - a

====  ====
a     b
====  ====
1     2
====  ====

+---+---+
| a | b |
+===+===+
| 1 | 2 |
+---+---+
"""
    assert len(TYPED_TABLE.findall(page)) == 3


def test_the_readme_shows_the_stored_main_job_and_no_long_lines():
    """The README's one results table is the main job's stored table, as its benchmark
    printed it; outside code no line is over 120 characters."""
    import json

    readme = (ROOT / "README.md").read_text()
    stored = json.loads((ROOT / "benchmarks" / "results" / "main_job.json").read_text())
    table = stored["tables"][0]
    for row in [table["header"], *table["rows"]]:
        assert "| " + " | ".join(row) + " |" in readme, row
    assert readme.count("\n|---") == 1  # one results table
    prose = re.sub(r"```.*?```", "", readme, flags=re.S)
    assert [line for line in prose.splitlines() if len(line) > 120] == []
    # the choosing page is linked before the results
    assert readme.index("doc/user_guide/choosing.rst") < readme.index("| " + table["header"][0])
