#!/usr/bin/env bash
# A Flower deployment of every skfedkt algorithm as a consortium would run it, on
# loopback: TLS and SuperNode authentication, with certificates and keys made at run
# time (credentials.py; nothing secret in the repository). A SuperLink and three
# registered SuperNodes, each reading its own party's CSV; `flwr run` starts the
# ServerApp, which writes the model. Checks:
#   - a SuperNode whose key is not registered is refused;
#   - FedKT, one-shot ensembles, FedCT and FedAvg give the model of `fit` on the
#     pooled rows;
#   - a SuperNode that dies in the middle of FedCT's rounds is dropped, named in the
#     model's left_out_parties_; one that never answers FedKT's single round is dropped
#     too, and the model is `fit`'s on the two parties left;
#   - with fewer than the run's two parties (min_parties), no model is written.
# Needs: pip install ".[flower]" (Flower >= 1.41's HTTP SuperLink on port 8000).
#
#     bash benchmarks/flower_deployment/run.sh
set -euo pipefail
app="$(cd "$(dirname "$0")" && pwd)"
work="$(mktemp -d)"
creds="$work/credentials"
export FLWR_TELEMETRY_ENABLED=0 FLWR_HOME="$work/flwr-home"
mkdir -p "$FLWR_HOME"
python "$app/credentials.py" "$creds" hospital-0 hospital-1 hospital-2 intruder
cat > "$FLWR_HOME/config.toml" <<TOML
[superlink]
default = "local-deployment"

[superlink.local-deployment]
address = "127.0.0.1:8000"
root-certificates = "$creds/ca.crt"
TOML
# the SuperLink and SuperNodes start helper processes (flower-superexec): stop those too
stop() { pkill -9 -P "$1" 2>/dev/null || true; kill -9 "$1" 2>/dev/null || true; }
started=()  # the SuperLink and SuperNodes, disowned: their deaths are ours to report
cleanup() { for pid in "${started[@]}"; do stop "$pid"; done; }
trap cleanup EXIT

python -m skfedkt split breast_cancer --parties 3 --out-dir "$work/data"
start=$(date +%s)
flower-superlink --ssl-ca-certfile "$creds/ca.crt" --ssl-certfile "$creds/server.pem" \
    --ssl-keyfile "$creds/server.key" --enable-supernode-auth \
    --disable-runtime-dependency-installation > "$work/superlink.log" 2>&1 &
started+=($!); disown
sleep 5
supernode() {  # NAME PORT: a SuperNode with TLS and its private key
  flower-supernode --root-certificates "$creds/ca.crt" \
      --auth-supernode-private-key "$creds/$1" --superlink 127.0.0.1:8000 --port "$2" \
      --node-config "party='$1' data-path='$work/data/party-${1#hospital-}.csv' public-path='$work/data/public.csv'" \
      > "$work/$1.log" 2>&1 &
  started+=($!); disown
}
for p in 0 1 2; do
  flwr supernode register "$creds/hospital-$p.pub" local-deployment > /dev/null
  supernode "hospital-$p" "909$((4 + p))"
done
# the intruder's key is not registered: the SuperLink refuses it
if flower-supernode --root-certificates "$creds/ca.crt" \
    --auth-supernode-private-key "$creds/intruder" --superlink 127.0.0.1:8000 \
    --port 9099 > "$work/intruder.log" 2>&1; then
  echo "the SuperLink accepted an unregistered SuperNode"; exit 1
fi
echo "unregistered SuperNode refused: $(grep -o 'Failed to activate SuperNode' "$work/intruder.log")"\
     "(SuperLink: $(grep -o 'No SuperNode found with the given public key' "$work/superlink.log"))"
sleep 3

run() {  # ALGORITHM MODEL: one run; its model written at MODEL, if any
  (cd "$app" && flwr run . local-deployment --stream --run-config \
      "algorithm='$1' public-path='$work/data/public.csv' model-path='$2'") \
      > "$work/run-$1.log" 2>&1
}
check() {  # MODEL ALGORITHM [same]: the model's parties, accuracy, and (same) fit's model
  if [ ! -e "$1" ]; then echo "$2 wrote no model; its run's log ends:"; tail -5 "$work/run-$2.log"; exit 1; fi
  python - "$work" "$app" "$@" <<'PY'
import sys
import warnings

import numpy as np

sys.path.insert(0, sys.argv[2])
from skfedkt_flower_demo.apps import ESTIMATORS  # noqa: E402

from skfedkt import load_model  # noqa: E402
from skfedkt.datasets import load_local_file  # noqa: E402

work, _, path, algorithm, *same = sys.argv[1:]
warnings.simplefilter("ignore")
served = load_model(path)
parties = [str(party) for party in served.parties_]
parts = [load_local_file(f"{work}/data/party-{p[-1]}.csv") for p in parties]
X = np.vstack([X for X, _ in parts])
y = np.concatenate([y for _, y in parts])
groups = np.concatenate([[p] * len(y) for p, (_, y) in zip(parties, parts)])
X_public, _ = load_local_file(f"{work}/data/public.csv", labelled=False)
X_test, y_test = load_local_file(f"{work}/data/test.csv")
line = (f"{algorithm}: parties {parties}, left out {served.left_out_parties_ or 'none'}, "
        f"test accuracy {served.score(X_test, y_test):.3f}")
if same:
    fitted = ESTIMATORS[algorithm].fit(X, y, groups=groups, X_unlabeled=X_public)
    equal = np.array_equal(served.predict_proba(X_test), fitted.predict_proba(X_test))
    line += f", same model as fit: {equal}"
    if not equal:
        sys.exit(line)
print(line)
PY
}
for algorithm in fedkt oneshot fedavg; do
  run "$algorithm" "$work/$algorithm.skops"
  check "$work/$algorithm.skops" "$algorithm" same
done

# hospital-2 dies once it has answered FedCT's first round
answered=$(grep -c "Sending:" "$work/hospital-2.log" || true)
( until [ "$(grep -c "Sending:" "$work/hospital-2.log")" -gt "$answered" ]; do sleep 0.2; done
  stop "${started[3]}" ) &
run fedct "$work/fedct.skops"
check "$work/fedct.skops" fedct
python -c "import sys; from skfedkt import load_model; sys.exit('hospital-2 was not dropped' if 'hospital-2' in map(str, load_model(sys.argv[1]).parties_) else 0)" "$work/fedct.skops"
# ... and never answers FedKT's single round: the model is fit's on the other two
run fedkt "$work/fedkt-two.skops"
check "$work/fedkt-two.skops" fedkt same
# with one party left, below min_parties=2: no model
stop "${started[2]}"
run fedkt "$work/fedkt-one.skops"
if [ -e "$work/fedkt-one.skops" ]; then echo "a model was written with one party"; exit 1; fi
echo "one party left: no model written ($(grep -o -m1 'below min_parties=2\|Only 1 of 3 SuperNodes connected[^;]*' "$work/run-fedkt.log"))"
echo "deployment: $(( $(date +%s) - start )) s from starting the SuperLink"
