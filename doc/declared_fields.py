"""The docs' tables of what crosses, from the algorithms' own declarations.

``.. declared-fields:: CLASS`` shows every field the class's ``_uploads.fields``
declares (`skfedkt.algorithm.InClear` and `InSum`): where it crosses with and without
secure aggregation, and what it holds. The table is the declaration the party's writer
and the server's checks read, so it cannot say otherwise than the code.
"""

from docutils.parsers.rst import Directive

import skfedkt
from skfedkt.algorithm import InSum

from benchmark_results import _list_table, _parse


def rows(fields):
    """The table's rows of `fields`: the field, where it crosses without and with
    secure aggregation, and what it holds."""
    table = []
    for field in fields:
        if isinstance(field, InSum):
            plain, secure = "in the sum, added by the server", "in the secure sum"
        else:
            plain = f"in the clear ({field.place})"
            secure = "withheld" if field.party_only else plain
        table.append([f"``{field.name}``", plain, secure, field.about])
    return table


class DeclaredFields(Directive):
    """The fields an algorithm's parties send, as its class declares them."""

    required_arguments = 1

    def run(self):
        fields = getattr(skfedkt, self.arguments[0])._uploads.fields
        table = dict(header=["field", "without secure aggregation",
                             "under secure aggregation", "what it holds"],
                     rows=rows(fields))
        return _parse(self, _list_table(
            table, f"What a party of {self.arguments[0]} sends, as the class declares it."))


def setup(app):
    app.add_directive("declared-fields", DeclaredFields)
    return {"parallel_read_safe": True, "version": "1"}
