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


# the engine's modules for PyTorch networks, imported only where a tier holds one
def _needs_torch(module_name):
    return (module_name.startswith("skfedkt._engine._stacking")
            or module_name == "skfedkt._engine._torch_weights")


@pytest.mark.parametrize("module_name", MODULES)
def test_docstring_examples(module_name):
    if module_name == "skfedkt.flower":
        pytest.importorskip("flwr")  # the flower extra
    if _needs_torch(module_name):
        pytest.importorskip("torch")  # the torch extra
    module = importlib.import_module(module_name)
    result = doctest.testmod(
        module, optionflags=doctest.ELLIPSIS | doctest.NORMALIZE_WHITESPACE, verbose=False
    )
    assert result.failed == 0, f"{result.failed} docstring example(s) failed in {module_name}"
