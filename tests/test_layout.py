"""The house an outsider extends: modules of one job each, an engine without an import
circle and with short signatures, a contract the type checker reads in full, and a
toolkit that leaves nothing an algorithm needs private."""

import ast
import graphlib
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PACKAGE = ROOT / "skfedkt"
MODULES = sorted(PACKAGE.rglob("*.py"))


def _module_name(path):
    parts = list(path.relative_to(ROOT).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _only_reexports(tree):
    return not any(isinstance(node, (ast.FunctionDef, ast.ClassDef)) for node in tree.body)


def test_every_module_says_its_one_job_and_stays_under_600_lines():
    unstated, long = [], []
    for path in MODULES:
        text = path.read_text()
        docstring = ast.get_docstring(ast.parse(text))
        if not docstring or not docstring.splitlines()[0].strip():
            unstated.append(str(path.relative_to(ROOT)))
        if len(text.splitlines()) > 600:
            long.append(f"{path.relative_to(ROOT)}: {len(text.splitlines())} lines")
    assert unstated == [] and long == []


def _imports(name, path, tree, modules):
    """The package's modules that module `name` imports, inside functions too: for
    ``from X import y``, the module X.y where there is one, else X."""
    package = name.split(".") if path.name == "__init__.py" else name.split(".")[:-1]
    targets = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom):
            base = package[: len(package) - node.level + 1] if node.level else []
            module = ".".join(base + ([node.module] if node.module else []))
            targets |= {f"{module}.{alias.name}" if f"{module}.{alias.name}" in modules
                        else module for alias in node.names}
        elif isinstance(node, ast.Import):
            targets |= {alias.name for alias in node.names}
    return {target for target in targets if target in modules and target != name}


TREES = {_module_name(path): (path, ast.parse(path.read_text())) for path in MODULES}


def test_no_module_of_the_package_imports_itself_back():
    """A package's __init__.py that only re-exports is a face, not a module (as
    ../shared/tools/import_cycles.py reads the package)."""
    faces = {name for name, (path, tree) in TREES.items()
             if path.name == "__init__.py" and _only_reexports(tree)}
    graph = {name: _imports(name, path, tree, TREES) - faces
             for name, (path, tree) in TREES.items() if name not in faces}
    try:
        tuple(graphlib.TopologicalSorter(graph).static_order())
    except graphlib.CycleError as error:
        pytest.fail(f"an import circle: {' -> '.join(error.args[1])}")


# the layers of doc/architecture.rst's drawing, bottom first, by the package's folders
# and modules; everything else (the command line, Flower, model files, the audit, the
# public namespaces) is the top
LAYERS = (
    ("bottom", {"_engine", "_privacy", "_secure_sum", "_validated_sum", "_config",
                "_version"}),
    ("protocol", {"_deployment"}),
    ("algorithms", {"_base", "_predict_side", "_party_models", "_declarations",
                    "_shared_docs", "_agreements", "_registry", "_fedkt", "_fedct",
                    "_dsfl", "_oneshot", "_fedavg"}),
)


def _layer(name):
    parts = name.split(".")
    return next((rank for rank, (_, members) in enumerate(LAYERS)
                 if len(parts) > 1 and parts[1] in members), len(LAYERS))


def test_dependence_points_downwards_from_layer_to_layer():
    upwards = sorted(f"{name} imports {target}"
                     for name, (path, tree) in TREES.items()
                     for target in _imports(name, path, tree, TREES)
                     if _layer(target) > _layer(name))
    assert upwards == []


def test_no_function_of_the_engine_takes_more_than_eight_parameters():
    wide = []
    for path in sorted((PACKAGE / "_engine").rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                arguments = node.args
                names = [a.arg for a in (*arguments.posonlyargs, *arguments.args,
                                         *arguments.kwonlyargs)
                         if a.arg not in ("self", "cls")]
                if len(names) > 8:
                    wide.append(f"{path.relative_to(ROOT)}:{node.lineno} {node.name} "
                                f"({len(names)})")
    assert wide == []


def test_the_outside_algorithm_needs_nothing_private_of_skfedkt():
    """The test plugin, written as an outside distribution, imports skfedkt's public
    names and its author's toolkit (`skfedkt.algorithm`) only, in any import form."""
    private = []
    for path in sorted((ROOT / "tests" / "consensus_plugin").rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.ImportFrom) and node.module:
                names = [node.module] + [f"{node.module}.{alias.name}"
                                         for alias in node.names]
            elif isinstance(node, ast.Import):
                names = [alias.name for alias in node.names]
            else:
                continue
            private += [f"{path.name}:{node.lineno} {name}" for name in names
                        if name.split(".")[0] == "skfedkt"
                        and any(part.startswith("_") for part in name.split("."))]
    assert private == []


def test_the_package_and_the_outside_algorithm_pass_mypys_full_check(tmp_path):
    """Every function body checked, annotated or not (``--check-untyped-defs``): the
    contract, every algorithm's hooks, the engine, and an algorithm written outside."""
    pytest.importorskip("mypy")
    done = subprocess.run(
        [sys.executable, "-m", "mypy", "--check-untyped-defs", "--cache-dir", str(tmp_path),
         "skfedkt", "tests/consensus_plugin/skfedkt_consensus"],
        cwd=ROOT, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stdout[-6000:] + done.stderr[-2000:]
