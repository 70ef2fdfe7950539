"""skfedkt: one-shot and few-round federated learning by knowledge transfer.

Meta-estimators that train any scikit-learn classifier across parties who keep their
data, exchanging models or labels on a public set instead.
"""

from . import baselines, datasets, privacy
from ._config import config_context, get_config, set_config
from ._deployment._archive import UploadLimits
from ._deployment._identity import HelperKey, PartyIdentity
from ._deployment._ledger import InputLedger
from ._deployment._secure_coordinator import SecureCoordinator
from ._deployment._secure_stages import SecureParty, SecureSession
from ._deployment._upload import PartyUpload, UploadError, read_upload
from ._deployment._validated_coordinator import ValidatedCoordinator
from ._deployment._validated_helper import HelperLedger, ValidatedHelper
from ._engine._validation import AssumptionWarning, LabelCollapseWarning, PublicSet
from ._dsfl import DSFLClassifier
from ._fedavg import FedAvgClassifier
from ._fedct import FedCTClassifier
from ._fedkt import FedKTClassifier, HardVotes, SoftVotes
from ._model_files import load_model, save_model
from ._oneshot import OneShotEnsembleClassifier
from ._registry import PluginWarning
from ._version import __version__

__all__ = [
    "AssumptionWarning",
    "DSFLClassifier",
    "FedAvgClassifier",
    "FedCTClassifier",
    "FedKTClassifier",
    "HardVotes",
    "HelperKey",
    "HelperLedger",
    "InputLedger",
    "LabelCollapseWarning",
    "OneShotEnsembleClassifier",
    "PartyIdentity",
    "PartyUpload",
    "PluginWarning",
    "PublicSet",
    "SecureCoordinator",
    "SecureParty",
    "SecureSession",
    "SoftVotes",
    "UploadError",
    "UploadLimits",
    "ValidatedCoordinator",
    "ValidatedHelper",
    "baselines",
    "config_context",
    "datasets",
    "get_config",
    "load_model",
    "privacy",
    "read_upload",
    "save_model",
    "set_config",
    "__version__",
]
