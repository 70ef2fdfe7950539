"""How the gallery's pages show the warnings their examples raise: each kind of message
once per example, in words, without the paths of the machine that built the pages."""

import re
import warnings


def show_each_kind_once(gallery_conf, fname):
    """Run before every example (sphinx-gallery's ``reset_modules``)."""
    shown = set()

    def format_warning(message, category, filename, lineno, line=None):
        # messages that differ only in their numbers say the same thing
        kind = (category, re.sub(r"[\d.]+", "#", str(message))[:60])
        if kind in shown:
            return ""
        shown.add(kind)
        # a file the message names, by its name only
        text = re.sub(r"(?:/[\w.+-]+)+/([\w.+-]+)", r"\1", str(message))
        return f"{category.__name__}: {text}\n"

    # sphinx-gallery writes every warning with warnings.formatwarning
    warnings.formatwarning = format_warning
