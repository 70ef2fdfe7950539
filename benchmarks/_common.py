"""What every benchmark shares: its command line, its tables and its models.

Every script's docstring starts with what it measures and has a ``Produces:`` line that
names the page and section of the documentation (or README) whose table it prints;
``tests/test_benchmarks.py`` runs every script's ``main`` on tiny inputs.

``--results FILE`` stores every table a script prints, as it prints it, in a JSON file
with the command that printed it and its provenance (`provenance`: the commit, the
date, the machine, the versions, the arguments and the package's modules it ran). The
results pages of the documentation read the files under ``benchmarks/results/``: their
tables and the figures each script draws from them (its ``figure(results)``), so
building the docs runs no benchmark.
"""

import argparse
import functools
import hashlib
import importlib.metadata
import inspect
import json
import os
import platform
import shlex
import subprocess
import sys
import warnings
from collections import defaultdict
from datetime import datetime, timezone
from pathlib import Path

import numpy as np
from joblib import Parallel, delayed
from sklearn.ensemble import RandomForestClassifier
from sklearn.model_selection import train_test_split
from sklearn.utils import Bunch
from tqdm import tqdm

from skfedkt.datasets import dirichlet_partition, iid_partition


def parser(doc, *, seeds=None, n_jobs=None, trees=None):
    """The command line of a benchmark whose module docstring is `doc`: its first line
    as the description, the rest (usage, the table it produces) shown by ``--help``,
    and the options most benchmarks share, with the script's defaults."""
    command = _BenchmarkParser(
        description=doc.splitlines()[0], epilog="\n".join(doc.splitlines()[1:]),
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    # the calling script, which the stored results name
    command.script = Path(inspect.currentframe().f_back.f_code.co_filename).name
    if seeds is not None:
        command.add_argument("--seeds", type=int, default=seeds,
                             help="random splits and partitions: mean ± std over them")
    if n_jobs is not None:
        command.add_argument("--n-jobs", type=int, default=n_jobs,
                             help="runs in parallel (each fit single-threaded)")
    if trees is not None:
        command.add_argument("--trees", type=int, default=trees,
                             help="trees of every random forest")
    command.add_argument("--results", type=Path, metavar="FILE",
                         help="also store the printed tables in this JSON file (the "
                         "docs read benchmarks/results/)")
    return command


RESULTS = Path(__file__).resolve().parent / "results"
# where the tables this run prints are stored (--results), the command that prints
# them, its arguments, and what it stored so far
_stored = {"path": None, "command": None, "arguments": {}, "tables": []}
ROOT = Path(__file__).resolve().parents[1]
# the libraries whose versions a stored result records, where installed
LIBRARIES = ("skfedkt", "numpy", "scipy", "scikit-learn", "joblib", "cryptography",
             "skops", "xgboost", "xgboost-cpu", "torch", "skorch", "flwr", "dp-accounting",
             "pandas")


class _BenchmarkParser(argparse.ArgumentParser):
    """A benchmark's command line: parsing it says where this run stores its tables
    (``--results``), and the command it stores with them (the arguments parsed)."""

    def parse_args(self, args=None, namespace=None):
        args = sys.argv[1:] if args is None else [str(arg) for arg in args]
        parsed = super().parse_args(args, namespace)
        # the command that reproduces the tables: where they were stored is not part of it
        kept = [arg for k, arg in enumerate(args) if arg != "--results"
                and not (k and args[k - 1] == "--results") and not arg.startswith("--results=")]
        _stored.update(path=parsed.results, tables=[], command="python " + shlex.join(
            [f"benchmarks/{self.script}", *kept]), arguments={
                name: _plain(value) for name, value in vars(parsed).items()
                if name != "results"})
        return parsed


def _plain(value):
    """An argument's value as JSON holds it (paths and other objects as text)."""
    if isinstance(value, (list, tuple)):
        return [_plain(item) for item in value]
    return value if value is None or isinstance(value, (bool, int, float, str)) else str(value)


def _git(*args):
    try:
        done = subprocess.run(["git", *args], cwd=ROOT, capture_output=True, text=True,
                              timeout=30, check=True)
    except (OSError, subprocess.SubprocessError):
        return None
    return done.stdout.strip()


def _machine():
    """The CPU model, the cores this process may use, the memory, and the GPU where a
    benchmark imported torch and has one."""
    cpu = platform.processor() or platform.machine()
    memory_gib = None
    try:
        cpu = next(line.split(":", 1)[1].strip() for line in
                   Path("/proc/cpuinfo").read_text().splitlines()
                   if line.startswith("model name"))
        memory_kib = next(int(line.split()[1]) for line in
                          Path("/proc/meminfo").read_text().splitlines()
                          if line.startswith("MemTotal:"))
        memory_gib = round(memory_kib / 2**20, 1)
    except (OSError, StopIteration, ValueError):
        pass
    cores = (len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity")
             else os.cpu_count())
    torch = sys.modules.get("torch")
    device = (torch.cuda.get_device_name(0) if torch is not None
              and torch.cuda.is_available() else "CPU")
    return dict(cpu=cpu, cores=cores, memory_gib=memory_gib, device=device,
                system=platform.system())


def provenance():
    """Where, when and on what the tables of this run were measured: the commit (and
    whether the tracked files but the stored results differed from it), the date (UTC), the machine, Python's
    and the libraries' versions, the arguments parsed (seeds included) and the
    package's modules the run imported, which tell when a change to the code makes the
    result stale."""
    versions = {}
    for library in LIBRARIES:
        try:
            versions[library] = importlib.metadata.version(library)
        except importlib.metadata.PackageNotFoundError:
            pass
    # the stored results themselves change as a run writes them
    changed = _git("status", "--porcelain", "--untracked-files=no", "--", ".",
                   ":(exclude)benchmarks/results")
    return dict(
        commit=_git("rev-parse", "HEAD"), clean=None if changed is None else not changed,
        date=datetime.now(timezone.utc).isoformat(timespec="seconds"),
        machine=_machine(), python=platform.python_version(), versions=versions,
        arguments=_stored["arguments"], data_files=_data_files(_stored["arguments"]),
        modules=sorted(name for name in sys.modules
                       if name == "skfedkt" or name.startswith("skfedkt.")))


def _data_files(arguments):
    """The SHA-256 of each file an argument names (a local copy of data the package
    does not ship, such as UCI's adult.data), so a reader can tell which copy was
    measured."""
    files = {}
    for value in arguments.values():
        for item in value if isinstance(value, list) else [value]:
            if isinstance(item, str) and Path(item).is_file():
                files[item] = hashlib.sha256(Path(item).read_bytes()).hexdigest()
    return files


def module_files(modules):
    """The files of the package's `modules` (dotted names), as the repository holds them."""
    files = []
    for module in modules:
        path = ROOT.joinpath(*module.split("."))
        files.append(path.with_suffix(".py") if path.with_suffix(".py").exists()
                     else path / "__init__.py")
    return [str(path.relative_to(ROOT)) for path in files]


def code_changes(results):
    """How many commits since the one stored `results` were measured at changed the
    package's modules their benchmark ran (0: the code measured is today's); None where
    the file records no provenance or git cannot tell (no repository, an unknown
    commit)."""
    origin = results.get("provenance")
    if not origin or not origin["commit"]:
        return None
    count = _git("rev-list", "--count", f"{origin['commit']}..HEAD", "--",
                 *module_files(origin["modules"]))
    return int(count) if count and count.isdigit() else None


def stored_results(name):
    """The tables a benchmark stored under ``benchmarks/results/<name>.json``: a dict
    of ``command`` (what printed them), ``provenance`` (`provenance`'s, where the file
    was stored since it was recorded) and ``tables`` (each a ``header`` and ``rows`` of
    cells as printed)."""
    return json.loads((RESULTS / f"{name}.json").read_text())


PAPERS = Path(__file__).resolve().parent / "papers.json"


def paper_table(name):
    """A table the papers report, stored in ``benchmarks/papers.json`` as data: its
    ``source`` (paper, section and table), ``header`` and ``rows`` of printed cells."""
    return json.loads(PAPERS.read_text())[name]


def paper_number(name, row, column):
    """The number the papers' table `name` reports in the row whose first cell is `row`,
    under `column` (NaN where the table has none)."""
    table = paper_table(name)
    cells = next(cells for cells in table["rows"] if cells[0] == row)
    return cell_number(cells[table["header"].index(column)])


def cell_number(text):
    """The number a printed cell starts with ("0.756 ± 0.070", "**1.07**", "1,000"),
    NaN where it holds none."""
    try:
        return float(str(text).split("±")[0].split("(")[0].strip().strip("*")
                     .replace(",", "").rstrip("x%s "))
    except ValueError:
        return float("nan")


def cell_spread(text):
    """The mean and the std of a printed "mean ± std" cell (std 0 without one)."""
    parts = str(text).split("±")
    return cell_number(parts[0]), cell_number(parts[1]) if len(parts) > 1 else 0.0


def new_figure(*shape, width=9.0, height=3.6):
    """A figure of the results pages: `shape` subplots (rows, columns) at a width that
    fits the page."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt.subplots(*shape, figsize=(width, height), squeeze=False,
                        layout="constrained")


def log_axis(ax, axis, label):
    """Make `axis` ("x" or "y") of `ax` logarithmic, labelled as such."""
    getattr(ax, f"set_{axis}scale")("log")
    getattr(ax, f"set_{axis}label")(f"{label} (log scale)")


def accuracy_axis(ax, axis="y", label="test accuracy", step=0.05):
    """Label `axis` of `ax` as accuracy, starting at the multiple of `step` below what is
    drawn and saying where it starts when that is not zero (call it after drawing)."""
    low, high = getattr(ax, f"get_{axis}lim")()
    start = max(0.0, round(np.floor(round(low / step, 6)) * step, 2))
    getattr(ax, f"set_{axis}lim")(start, min(high, 1.0) if high > start else 1.0)
    getattr(ax, f"set_{axis}label")(label if start == 0 else f"{label} (axis from {start:g})")


def bar_figure(labels, values, xlabel, *, errors=None, reference=None, log=False):
    """One horizontal bar per label, top to bottom, with a vertical line at `reference`
    (1 for a ratio) and a log scale where values span orders of magnitude."""
    fig, axes = new_figure(1, 1, width=8, height=0.4 * len(labels) + 1.2)
    ax = axes[0][0]
    ax.barh(range(len(labels)), values, xerr=errors, capsize=2)
    if reference is not None:
        ax.axvline(reference, color="black", linewidth=1)
    ax.set(yticks=range(len(labels)), yticklabels=[label.replace("``", "") for label in labels],
           xlabel=xlabel)
    if log:
        log_axis(ax, "x", xlabel)
    ax.invert_yaxis()
    return fig


def bundled_split(loader, n_parties, beta, seed):
    """A 40/20/40 train/public/held-out split of a scikit-learn dataset (`loader`, as
    ``load_digits``), stratified, with `n_parties` Dirichlet(`beta`) parties of at
    least 10 rows (`beta` None: IID parties)."""
    X, y = loader(return_X_y=True)
    X_train, X_rest, y_train, y_rest = train_test_split(X, y, train_size=0.4, stratify=y,
                                                        random_state=seed)
    X_public, X_test, _, y_test = train_test_split(X_rest, y_rest, train_size=1 / 3,
                                                   stratify=y_rest, random_state=seed)
    groups = (iid_partition(len(y_train), n_parties, random_state=seed) if beta is None
              else dirichlet_partition(y_train, n_parties, beta=beta, min_party_size=10,
                                       random_state=seed))
    return Bunch(X_train=X_train, y_train=y_train, groups=groups, X_public=X_public,
                 X_test=X_test, y_test=y_test)


def forest(n_trees, max_depth=6):
    """The benchmarks' random forest (the FedKT paper's depth)."""
    return RandomForestClassifier(n_estimators=n_trees, max_depth=max_depth)


def mean_std(values, digits=3):
    """Mean ± std, as every table shows it."""
    return f"{np.mean(values):.{digits}f} ± {np.std(values):.{digits}f}"


def print_table(header, rows):
    """A Markdown table, as the README and the docs show it; without a `header`, rows
    of a table whose header was printed before (a table printed as it is measured)."""
    rows = [[str(cell) for cell in row] for row in rows]
    if header is not None:
        print("| " + " | ".join(header) + " |")
        print("|" + "---|" * len(header))
    for row in rows:
        print("| " + " | ".join(row) + " |", flush=True)
    if _stored["path"] is not None:
        if header is not None or not _stored["tables"]:
            _stored["tables"].append(dict(header=list(header or []), rows=[]))
        _stored["tables"][-1]["rows"] += rows
        _stored["path"].write_text(json.dumps(
            dict(command=_stored["command"], provenance=provenance(),
                 tables=_stored["tables"]), indent=1) + "\n")


def progress(iterable, what, total=None):
    """`iterable`, with a progress bar on stderr saying `what` is running."""
    return tqdm(iterable, desc=what, total=total, file=sys.stderr, unit="run",
                dynamic_ncols=True)


def run_parallel(calls, n_jobs, what):
    """The results of joblib's delayed `calls`, in order, `n_jobs` at a time, with a
    progress bar saying `what` runs."""
    calls = list(calls)
    return list(progress(Parallel(n_jobs=n_jobs, return_as="generator")(calls), what,
                         total=len(calls)))


def runs_by_dataset_and_method(run, datasets, n_seeds, methods, n_jobs, what):
    """``run(dataset=, seed=, method=)`` for every dataset, seed and method, `n_jobs` at
    a time: the results of each (dataset, method), in seed order."""
    keys = [(dataset, seed, method) for dataset in datasets for seed in range(n_seeds)
            for method in methods]
    results = run_parallel((delayed(run)(dataset=dataset, seed=seed, method=method)
                            for dataset, seed, method in keys), n_jobs, what)
    table = defaultdict(list)
    for (dataset, _, method), result in zip(keys, results):
        table[dataset, method].append(result)
    return table


def status_mib(field):
    """This process's VmRSS (now) or VmHWM (peak since the last reset), in MiB."""
    with open("/proc/self/status") as status:
        for line in status:
            if line.startswith(field + ":"):
                return int(line.split()[1]) / 1024
    raise KeyError(field)


def reset_peak():
    """Start this process's peak resident size afresh (Linux: clear_refs 5)."""
    with open("/proc/self/clear_refs", "w") as clear_refs:
        clear_refs.write("5")


class PeakMemory:
    """The peak resident size of this process while the block runs, above what it
    held when the block began (MiB), sampled every `interval` seconds by a thread:
    ``with PeakMemory() as peak: ...; peak.mib``. Unlike the kernel's high-water mark
    it needs no reset, which not every kernel offers."""

    def __init__(self, interval=0.005):
        self.interval, self.mib = interval, 0.0

    def _sample(self):
        while not self._done.wait(self.interval):
            self._peak = max(self._peak, status_mib("VmRSS"))

    def __enter__(self):
        import threading

        self._start = self._peak = status_mib("VmRSS")
        self._done = threading.Event()
        self._thread = threading.Thread(target=self._sample, daemon=True)
        self._thread.start()
        return self

    def __exit__(self, *exc):
        self._done.set()
        self._thread.join()
        self.mib = max(self._peak, status_mib("VmRSS")) - self._start


def without_warnings(function):
    """`function` with every warning silenced while it runs, the caller's filters as
    they were after: a measurement prints its tables, not the fits' warnings, and a
    test that runs it in process keeps its own filters."""
    @functools.wraps(function)
    def quiet(*args, **kwargs):
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            return function(*args, **kwargs)

    return quiet
