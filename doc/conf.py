"""Sphinx configuration of the skfedkt documentation."""

import importlib.util
import os
import re
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parent))  # gallery_order, gallery_warnings
import skfedkt  # noqa: E402

project = "skfedkt"
author = "the skfedkt developers"
release = version = skfedkt.__version__

extensions = [
    "sphinx.ext.autodoc",
    "sphinx.ext.autosummary",
    "sphinx.ext.mathjax",
    # MathJax shipped with the pages: math renders offline too
    "sphinx-mathjax-offline",
    "numpydoc",
    "sphinx_gallery.gen_gallery",
    # the results pages' tables and figures, from the benchmarks' stored results
    "benchmark_results",
    # the tables of what crosses, from the algorithms' declarations
    "declared_fields",
]

templates_path = ["_templates"]
exclude_patterns = ["_build", "_figures", "auto_examples/*.ipynb", "auto_examples/*.py"]
autosummary_generate = True
numpydoc_show_class_members = False
numpydoc_class_members_toctree = False

html_theme = "pydata_sphinx_theme"
html_title = f"skfedkt {version}"
html_theme_options = {"navigation_with_keys": False}
# the "On this page" column lists methods by their own names (fit_party(), not
# FedKTClassifier.fit_party()), which fit its width
toc_object_entries_show_parents = "hide"
# pages without sub-pages have nothing for the section navigation: no left sidebar,
# and the room goes to wide tables and code
html_sidebars = {page: [] for page in ("index", "getting_started", "deployment", "privacy",
                                       "sklearn", "gpu")}

# the examples that train PyTorch networks run where torch and skorch are installed (the
# torch extra); elsewhere their pages show the code without its output
_NEEDS_TORCH = sorted(
    path.stem for path in (Path(__file__).resolve().parents[1] / "examples").glob("plot_*.py")
    if re.search(r"^(import|from) (torch|skorch)\b", path.read_text(), re.M)
)
_HAS_TORCH = all(importlib.util.find_spec(name) for name in ("torch", "skorch"))

sphinx_gallery_conf = {
    "examples_dirs": "../examples",
    "gallery_dirs": "auto_examples",
    # SKFEDKT_PLOT_GALLERY=0 builds the gallery pages without running the examples
    "plot_gallery": os.environ.get("SKFEDKT_PLOT_GALLERY", "True"),
    "filename_pattern": r"/plot_" if _HAS_TORCH or not _NEEDS_TORCH
    else rf"/(?!({'|'.join(_NEEDS_TORCH)})\.py)plot_",
    "within_subsection_order": "gallery_order.QuickstartFirst",
    # the build must not rewrite a tracked file with its run times
    "write_computation_times": False,
    "download_all_examples": False,
    "doc_module": ("skfedkt",),
    "backreferences_dir": "generated/backreferences",
    # warnings on the pages: each kind once per example, without the build's paths
    "reset_modules": ("matplotlib", "gallery_warnings.show_each_kind_once"),
}
