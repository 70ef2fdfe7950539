"""The Examples sections of the package's docstrings run and print what they show."""

import doctest
import importlib
import pkgutil

import pytest

import skfedkt

MODULES = sorted(
    info.name
    for info in pkgutil.walk_packages(skfedkt.__path__, prefix="skfedkt.")
    if not info.name.endswith("__main__")
)


# the packages of the extras (torch, flower): a module that imports one is tested where
# it is installed and skipped elsewhere, as the README's test command runs without them
EXTRAS = ("torch", "skorch", "flwr")


@pytest.mark.parametrize("module_name", MODULES)
def test_docstring_examples(module_name):
    try:
        module = importlib.import_module(module_name)
    except ModuleNotFoundError as exc:
        if exc.name.split(".")[0] not in EXTRAS:
            raise
        pytest.skip(f"{module_name} needs {exc.name}, which an extra installs")
    result = doctest.testmod(
        module, optionflags=doctest.ELLIPSIS | doctest.NORMALIZE_WHITESPACE, verbose=False
    )
    assert result.failed == 0, f"{result.failed} docstring example(s) failed in {module_name}"
