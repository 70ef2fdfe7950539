"""The command line, one package for both of its uses, over one table of algorithms.

- `_main`: the parser and `main`, the entry point of ``skfedkt`` and ``python -m skfedkt``.
- `_estimators`: the base estimators both uses build from (the algorithms come from
  `skfedkt._registry`).
- `_runner`: the experiment runner (``skfedkt run``, the default): the papers'
  comparisons on one dataset over several trials.
- `_deploy`: the deployment commands (``skfedkt split``, ``party``, ``server``,
  ``audit``, ``score``), each a thin layer over an estimator's deployed steps.
"""

from ._main import build_parser, main

__all__ = ["build_parser", "main"]
