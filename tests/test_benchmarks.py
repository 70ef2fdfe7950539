"""The census benchmark runs on a local LIBSVM file, as it does on the paper's a9a."""

import sys
from pathlib import Path

import numpy as np
from sklearn.datasets import dump_svmlight_file, make_classification

BENCHMARKS = Path(__file__).resolve().parents[1] / "benchmarks"


def test_census_benchmark_reads_a_local_file_and_prints_every_method(tmp_path, monkeypatch,
                                                                      capsys):
    X, y = make_classification(n_samples=600, n_features=8, weights=[0.76], random_state=0)
    path = tmp_path / "census.libsvm"
    dump_svmlight_file(X, np.where(y == 1, 1, -1), str(path))
    monkeypatch.syspath_prepend(str(BENCHMARKS))
    import bench_census

    monkeypatch.setattr(sys, "argv", ["bench_census.py", "--path", str(path), "--parties",
                                      "4", "--betas", "1", "--seeds", "1", "--n-jobs", "1"])
    bench_census.main()
    out = capsys.readouterr().out
    for method in bench_census.METHODS:
        assert f"| 1 | {method} | " in out
    assert "| 1 | FedKT | nan" not in out
