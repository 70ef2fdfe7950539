"""What one FedKT ``fit`` passes through inside the package: the distinct functions and
files it calls, and how often each file calls into another (a party or server step
calling back into the estimator's file is a "back-call").

    python benchmarks/trace_fit.py [--algorithm fedkt]

Produces: doc/architecture.rst, "The algorithm interface" (what one fit passes through).
"""

import sys
import warnings
from collections import Counter
from pathlib import Path

import numpy as np
from _common import parser
from sklearn.datasets import load_breast_cancer

import skfedkt
from skfedkt._registry import algorithm, algorithms

PACKAGE = Path(skfedkt.__file__).parent


def main(argv=None):
    command = parser(__doc__)
    command.add_argument("--algorithm", choices=[a.name for a in algorithms()],
                         default="fedkt")
    args = command.parse_args(argv)
    X, y = load_breast_cancer(return_X_y=True)
    party = np.arange(400) % 3
    functions, crossings = set(), Counter()

    def profile(frame, event, arg):
        if event != "call":
            return
        callee = Path(frame.f_code.co_filename)
        if PACKAGE not in callee.parents:
            return
        functions.add((callee, frame.f_code.co_name))
        caller = Path(frame.f_back.f_code.co_filename) if frame.f_back else None
        if caller is not None and PACKAGE in caller.parents and caller != callee:
            crossings[(caller.relative_to(PACKAGE), callee.relative_to(PACKAGE))] += 1

    estimator_class = algorithm(args.algorithm).estimator_class
    clf = estimator_class(random_state=0)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        sys.setprofile(profile)
        try:
            clf.fit(X[:400], y[:400], groups=party, X_unlabeled=X[400:])
        finally:
            sys.setprofile(None)
    files = {path for path, _ in functions}
    print(f"{args.algorithm} fit: {len(functions)} functions in {len(files)} files")
    home = Path(sys.modules[estimator_class.__module__].__file__).parent.name
    back = sum(n for (caller, callee), n in crossings.items()
               if caller.name in ("_party.py", "_server.py") and callee.name == "_classifier.py"
               and caller.parent.name == callee.parent.name == home)
    print(f"calls from {home}/_party.py and _server.py back into {home}/_classifier.py: "
          f"{back}")
    print("calls between files (caller -> callee: count):")
    for (caller, callee), n in sorted(crossings.items(), key=lambda item: -item[1]):
        print(f"  {caller} -> {callee}: {n}")


if __name__ == "__main__":
    main()
