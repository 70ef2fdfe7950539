"""A party's ledger of what it helped unmask: one input in one sum's survivors, every
round of a federation with the last round's survivors unless its sums are noisy; its
file readable by its user alone and read as hostile."""

import json

import numpy as np
import pytest

from skfedkt import InputLedger, PartyUpload
from skfedkt._deployment._ledger import input_digest

SESSION, OTHER_SESSION = "aa" * 32, "bb" * 32
INPUT, OTHER_INPUT = "01" * 32, "02" * 32
KEYS = [f"{k:02x}" * 32 for k in range(5)]
NAMES = [f"h{k}" for k in range(5)]


def test_an_input_is_unmasked_again_only_with_the_same_survivors(tmp_path):
    ledger = InputLedger(tmp_path / "ledger.json")
    ledger.admit(SESSION, 0, INPUT, KEYS, NAMES, noisy=False)
    # the same survivors (in any order), in another session: nothing new is given away
    ledger.admit(OTHER_SESSION, 0, INPUT, KEYS[::-1], NAMES, noisy=False)
    with pytest.raises(ValueError, match=r"it helped unmask this very input before, in a "
                       r"sum of 5 survivors other than these 4 \('h1', 'h2', 'h3', 'h4'\)"):
        ledger.admit("cc" * 32, 0, INPUT, KEYS[1:], NAMES[1:], noisy=True)
    assert oct((tmp_path / "ledger.json").stat().st_mode & 0o777) == "0o600"


def test_a_round_of_a_federation_keeps_the_last_rounds_survivors_unless_noisy(tmp_path):
    ledger = InputLedger(tmp_path / "ledger.json")
    ledger.admit(SESSION, 0, INPUT, KEYS, NAMES, noisy=False)
    with pytest.raises(ValueError, match="round 1's survivors are not those of round 0 of "
                       "this session .* The federation ends at round 0"):
        ledger.admit(SESSION, 1, OTHER_INPUT, KEYS[1:], NAMES[1:], noisy=False)
    ledger.admit(SESSION, 1, OTHER_INPUT, KEYS[1:], NAMES[1:], noisy=True)
    # the refused round recorded nothing: the next noisy round compares with round 1
    document = json.loads((tmp_path / "ledger.json").read_text())
    assert document["sessions"][SESSION] == dict(round=1, survivors=sorted(KEYS[1:]))


@pytest.mark.parametrize("content, field", [
    (b"not json", "bytes"),
    (json.dumps(dict(format="another ledger", inputs={}, sessions={})).encode(), "format"),
    (json.dumps(dict(format="skfedkt input ledger 1", inputs={"x": []}, sessions={})
                ).encode(), "inputs"),
    (json.dumps(dict(format="skfedkt input ledger 1", inputs={},
                     sessions={SESSION: dict(round="0", survivors=[])})).encode(),
     "sessions"),
    (json.dumps(dict(format="skfedkt input ledger 1", inputs={}, sessions={},
                     extra=1)).encode(), "extra"),
])
def test_a_ledger_file_is_read_as_hostile_naming_the_field(tmp_path, content, field):
    path = tmp_path / "ledger.json"
    path.write_bytes(content)
    with pytest.raises(ValueError, match=f"The input ledger .*ledger.json, {field}"):
        InputLedger(path).admit(SESSION, 0, INPUT, KEYS, NAMES, noisy=False)


def test_an_input_is_its_rows_plan_and_message_not_its_round():
    X, y = np.arange(12.0).reshape(6, 2), np.array([0, 1, 0, 1, 1, 0])
    manifest = dict(algorithm="fedct", params={"n_rounds": 3}, classes=[0, 1], n_features=2,
                    feature_names=None, public_fingerprint="f", n_rows=6, party="h0",
                    round=1, package_version="1")
    message = PartyUpload(dict(round=1), dict(consensus=np.array([0, 1, -1])))
    digest = input_digest(X, y, manifest, message)
    replayed = PartyUpload(dict(round=7), dict(consensus=np.array([0, 1, -1])))
    # the round number, the party's name and the version do not make another input
    assert input_digest(X, y, dict(manifest, round=7, party="h9", package_version="2"),
                        replayed) == digest
    for other in (input_digest(X[::-1], y, manifest, message),
                  input_digest(X, y[::-1], manifest, message),
                  input_digest(X, y, dict(manifest, params={"n_rounds": 4}), message),
                  input_digest(X, y, manifest, PartyUpload(dict(round=1), dict(
                      consensus=np.array([0, 1, 1])))),
                  input_digest(X, y, manifest, None)):
        assert other != digest
