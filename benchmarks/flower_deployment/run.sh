#!/usr/bin/env bash
# A real local Flower deployment of FedKT: a SuperLink and two SuperNodes on loopback,
# each SuperNode reading its own party's CSV; `flwr run` starts the ServerApp, which
# writes the final model. Then checks that it equals FedKTClassifier.fit on the pooled
# rows. Needs: pip install ".[flower]" (Flower >= 1.41's HTTP SuperLink on port 8000).
#
#     bash benchmarks/flower_deployment/run.sh
set -euo pipefail
app="$(cd "$(dirname "$0")" && pwd)"
work="$(mktemp -d)"
export FLWR_TELEMETRY_ENABLED=0 FLWR_HOME="$work/flwr-home"
mkdir -p "$FLWR_HOME"
cat > "$FLWR_HOME/config.toml" <<TOML
[superlink]
default = "local-deployment"

[superlink.local-deployment]
address = "127.0.0.1:8000"
insecure = true
TOML
# the SuperLink and SuperNodes start helper processes (flower-superexec): stop those too
cleanup() { for pid in $(jobs -p); do pkill -P "$pid" 2>/dev/null; kill "$pid" 2>/dev/null; done; true; }
trap cleanup EXIT

python -m skfedkt split breast_cancer --parties 2 --out-dir "$work/data"
start=$(date +%s)
flower-superlink --insecure --disable-runtime-dependency-installation \
    > "$work/superlink.log" 2>&1 &
sleep 5
for p in 0 1; do
  flower-supernode --insecure --superlink 127.0.0.1:8000 --port "909$((4 + p))" \
      --node-config "party='hospital-$p' data-path='$work/data/party-$p.csv' public-path='$work/data/public.csv'" \
      > "$work/supernode-$p.log" 2>&1 &
done
sleep 5
(cd "$app" && flwr run . local-deployment --stream \
    --run-config "public-path='$work/data/public.csv' model-path='$work/model.skops'")
echo "deployment: $(( $(date +%s) - start )) s from starting the SuperLink to the model"
python - "$work" <<'PY'
import sys
import warnings

import numpy as np

from skfedkt import FedKTClassifier, load_model
from skfedkt.datasets import load_local_file

work = sys.argv[1]
warnings.simplefilter("ignore")
parts = [load_local_file(f"{work}/data/party-{p}.csv") for p in range(2)]
X = np.vstack([X for X, _ in parts])
y = np.concatenate([y for _, y in parts])
groups = np.concatenate([[f"hospital-{p}"] * len(y) for p, (_, y) in enumerate(parts)])
X_public, _ = load_local_file(f"{work}/data/public.csv", labelled=False)
X_test, y_test = load_local_file(f"{work}/data/test.csv")
served = load_model(f"{work}/model.skops")
fitted = FedKTClassifier(random_state=0).fit(X, y, groups=groups, X_unlabeled=X_public)
same = np.array_equal(served.predict_proba(X_test), fitted.predict_proba(X_test))
print(f"parties {served.parties_.tolist()}, test accuracy {served.score(X_test, y_test):.3f}, "
      f"same model as fit: {same}")
sys.exit(0 if same else 1)
PY
