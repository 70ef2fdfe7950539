"""The base estimators both command lines offer (``--estimator``): the experiment runner
(``skfedkt run``) and the deployment commands (``skfedkt party``, ``server``,
``audit``). The algorithms come from their own declarations (`skfedkt._registry`)."""

from sklearn.ensemble import HistGradientBoostingClassifier, RandomForestClassifier
from sklearn.linear_model import LogisticRegression
from sklearn.neural_network import MLPClassifier
from sklearn.pipeline import make_pipeline
from sklearn.preprocessing import StandardScaler
from sklearn.tree import DecisionTreeClassifier


def _xgboost():
    try:
        from xgboost import XGBClassifier
    except ImportError as exc:  # an optional dependency
        raise ValueError(
            "estimator 'xgb' needs XGBoost: pip install xgboost-cpu (or, from the "
            "source tree, pip install '.[xgboost]')"
        ) from exc
    return XGBClassifier(n_estimators=100, max_depth=6)


# the papers' models: the knowledge-transfer paper's random forest (100 trees, depth 6),
# MLP (two layers of 100 units) and GBDT (depth 6), and the trees of the co-training
# paper's interpretable models
ESTIMATORS = {
    "rf": lambda: RandomForestClassifier(n_estimators=100, max_depth=6),
    "dt": lambda: DecisionTreeClassifier(),
    "lr": lambda: make_pipeline(StandardScaler(), LogisticRegression(max_iter=1000)),
    "hgb": lambda: HistGradientBoostingClassifier(max_depth=6),
    "mlp": lambda: make_pipeline(
        StandardScaler(), MLPClassifier(hidden_layer_sizes=(100, 100), max_iter=300)
    ),
    "xgb": _xgboost,
}
