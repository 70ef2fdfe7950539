"""Every estimator computes what it computed when the outputs were recorded
(``tests/_golden.py``): a refactoring that changes a prediction, a probability or an
epsilon fails here."""

import numpy as np
import pytest
from _golden import GOLDEN_DIR, golden_keys, golden_path, key, outputs, versions


@pytest.fixture(scope="module")
def golden():
    path = golden_path()
    if not path.exists():
        recorded = sorted(p.stem for p in GOLDEN_DIR.glob("*.npz"))
        pytest.skip(f"no outputs recorded with {versions().tolist()} (recorded: "
                    f"{recorded}): base estimators may fit differently; record them with "
                    "python tests/_golden.py on the commit before the change to compare")
    with np.load(path) as recorded:
        recorded = dict(recorded)
    assert np.array_equal(recorded["versions"], versions())
    return recorded


def test_every_case_is_recorded(golden):
    expected = {key(*case, output) for case in golden_keys()
                for output in ("predict", "predict_proba", "epsilon")}
    assert set(golden) - {"versions"} <= expected
    assert {k.rsplit("|", 1)[0] for k in golden} - {"versions"} == {
        k.rsplit("|", 1)[0] for k in expected}


@pytest.mark.parametrize("name, dataset_name, deployed", golden_keys(),
                         ids=[key(*case, "")[:-1] for case in golden_keys()])
def test_outputs_match_the_recorded_ones(golden, name, dataset_name, deployed):
    computed = outputs(name, dataset_name, deployed)
    recorded = {output: golden[key(name, dataset_name, deployed, output)]
                for output in ("predict", "predict_proba", "epsilon")
                if key(name, dataset_name, deployed, output) in golden}
    assert computed.keys() == recorded.keys()
    np.testing.assert_array_equal(computed["predict"], recorded["predict"])
    for output in recorded.keys() - {"predict"}:
        np.testing.assert_allclose(computed[output], recorded[output], rtol=1e-9, atol=1e-12)


# fit then fit, fit_server then fit, fit then fit_server, between configurations whose
# fitted attributes differ (FedCT's are the same for every configuration)
REFITS = [
    (first, second, first_deployed, deployed)
    for first, second in [("oneshot distilled", "oneshot all"), ("oneshot cv", "oneshot all"),
                          ("fedkt default", "fedkt undistilled")]
    for first_deployed, deployed in [(False, False), (True, False), (False, True)]
]


@pytest.mark.parametrize("first, second, first_deployed, deployed", REFITS)
def test_a_refit_keeps_nothing_of_the_earlier_fit(first, second, first_deployed, deployed):
    from _golden import CASES, fit
    from sklearn.base import clone

    refitted = fit(CASES[first], "wine", first_deployed)
    refitted.set_params(**CASES[second].get_params(deep=False))
    fit(refitted, "wine", deployed, copy=False)
    fresh = fit(clone(CASES[second]), "wine", deployed)
    assert vars(refitted).keys() == vars(fresh).keys()
