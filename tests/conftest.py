"""Test configuration: one thread per BLAS, OpenMP and torch pool.

Worker threads of OpenMP (HistGradientBoosting, XGBoost) and torch spin while they wait,
so on a busy machine they fight the other work for the cores and a test can take a
hundred times longer than on an idle one. With one thread each the suite slows down in
proportion to the load. Set here, before any test module imports those libraries; the
parallel tests still run their clones in several processes or threads.
"""

import os

for variable in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ.setdefault(variable, "1")
