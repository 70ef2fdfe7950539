"""What a payload's skops schema may ask the loader to build, checked before skops
builds anything.

skops rebuilds every object with the loader its schema node names. Most loaders make
an empty object and give it its state; a few call the type with arguments read from the
file (``ReduceNode`` and its kin). For a type the server trusts by name, such a call is
a confused deputy: ``xgboost.core.Booster(None, None, path)`` loads whatever model file
`path` names on the server's own disk. So a type trusted by default must come exactly
as skops writes an honest object of it, rebuilt from bytes inside the payload; only
types the operator trusts explicitly may be called with the file's arguments. And since
skops writes every object in full, a reference node (``CachedNode``: one object
repeated at no cost, e.g. one student 300,000 times) only comes from a crafted file.
"""

import functools
import io
import json

import numpy as np

from .._engine._compat import SKOPS_INTERNAL_TYPES
from ._archive import UploadError

BOOSTER = "xgboost.core.Booster"

# The loader skops writes for each type trusted by default: all but Tree are made empty
# and given their state; Tree is called with three numbers checked below.
HONEST_LOADERS = {
    **SKOPS_INTERNAL_TYPES,
    BOOSTER: "ObjectNode",
    "xgboost.sklearn.XGBClassifier": "ObjectNode",
}
TREE = next(name for name, loader in HONEST_LOADERS.items() if loader == "TreeNode")

# skops loaders that call a type with arguments read from the file
CALLING_LOADERS = frozenset({"ReduceNode", "TreeNode", "LossNode",
                             "ConstructorFromReduceNode"})


@functools.cache
def _losses():
    """The type names of scikit-learn's compiled losses, which skops writes with
    LossNode and numbers as arguments (an SGDClassifier's hinge, a boosting model's log
    loss): skops' own list, named as skops names them (``_loss.CyHalfBinomialLoss``
    with some scikit-learn builds)."""
    from skops.io._sklearn import ALLOWED_LOSSES
    from skops.io._utils import get_module

    return frozenset(f"{get_module(loss)}.{loss.__name__}" for loss in ALLOWED_LOSSES)


def _nodes(schema):
    """Every node of a skops schema (a dict naming its loader), without recursion."""
    stack = [schema]
    while stack:
        value = stack.pop()
        if isinstance(value, dict):
            if "__loader__" in value:
                yield value
            stack.extend(value.values())
        elif isinstance(value, list):
            stack.extend(value)


def check_constructions(schema, members, who, operator_trusted):
    """Refuse a schema that asks skops to call a type with the file's arguments, to
    build a type trusted by default other than as skops writes it, or to repeat an
    object by reference, and a payload member no object refers to. `members` are the
    payload's members, or their heads (Tree's class counts' shape is read there);
    `operator_trusted` are the type names the operator trusted explicitly.
    """
    referenced = {"schema.json"}
    for node in _nodes(schema):
        if isinstance(node.get("file"), str):
            referenced.add(node["file"])
        name = f"{node.get('__module__')}.{node.get('__class__')}"
        loader = node["__loader__"]
        if loader == "CachedNode":
            raise UploadError(
                f"{who}: the payload repeats an object by reference (skops' CachedNode, "
                f"id {node.get('__id__')!r}); skops writes every object in full, so only "
                "a crafted file has one. Refused before anything is built.",
                field="payload")
        honest = HONEST_LOADERS.get(name)
        if honest is not None and loader != honest:
            raise UploadError(
                f"{who}: the payload builds {name} with skops' {loader}, where an honest "
                f"file has {honest}: a trusted type is rebuilt from the payload's own "
                "bytes, never called with arguments the file chose.", field="payload")
        calls = loader in CALLING_LOADERS or "__reduce__" in node
        if calls and not (name in operator_trusted or name == TREE
                          or (loader == "LossNode" and name in _losses())):
            raise UploadError(
                f"{who}: the payload asks the loader to call {name} with arguments the "
                f"file chose (skops' {loader}); no honest file of a type trusted by "
                "default does. Trust the type explicitly (trusted=, CLI --trust) only if "
                "you trust its sender and its code.", field="payload")
        if name == TREE:
            _check_tree_arguments(node, members, who)
        elif name == BOOSTER:
            _check_booster_state(node, who)
        elif loader == "LossNode":
            if not all(isinstance(_json_value(argument), (int, float))
                       for argument in _arguments(node, who, name)):
                _refuse_arguments(who, name, "numbers")
    unreferenced = sorted(set(members) - referenced)
    if unreferenced:
        raise UploadError(
            f"{who}: the payload holds members no object of its schema refers to "
            f"({', '.join(map(repr, unreferenced[:3]))}); skops writes none.",
            field="payload")


def _arguments(node, who, name):
    arguments = node.get("__reduce__")
    arguments = arguments.get("args") if isinstance(arguments, dict) else None
    if not (isinstance(arguments, dict) and arguments.get("__loader__") == "TupleNode"
            and isinstance(arguments.get("content"), list)):
        _refuse_arguments(who, name, "a tuple")
    return arguments["content"]


def _refuse_arguments(who, name, honest):
    raise UploadError(f"{who}: the payload's arguments of {name} are not {honest}, as "
                      "skops writes them.", field="payload")


def _is_json(node):
    return (isinstance(node, dict) and node.get("__loader__") == "JsonNode"
            and isinstance(node.get("content"), str))


def _json_value(node):
    """The number or text a JsonNode holds, or None for any other node."""
    if not _is_json(node):
        return None
    try:
        value = json.loads(node["content"])
    except ValueError:
        return None
    return None if isinstance(value, bool) else value


def _check_tree_arguments(node, members, who):
    """Tree(n_features, n_classes, n_outputs): two positive integers and an integer
    array of n_outputs entries (Tree reads n_classes without bounds checks)."""
    arguments = _arguments(node, who, TREE)
    if len(arguments) != 3:
        _refuse_arguments(who, TREE, "(n_features, n_classes, n_outputs)")
    n_features, n_classes, n_outputs = arguments
    counts = [_json_value(n_features), _json_value(n_outputs)]
    if not all(isinstance(count, int) and count >= 1 for count in counts):
        _refuse_arguments(who, TREE, "two positive integers around an array")
    member = n_classes.get("file") if n_classes.get("__loader__") == "NdArrayNode" else None
    try:
        array = io.BytesIO(members[member])
        read_header = {(1, 0): np.lib.format.read_array_header_1_0,
                       (2, 0): np.lib.format.read_array_header_2_0}
        shape, _, dtype = read_header[np.lib.format.read_magic(array)](array)
    except (KeyError, TypeError, ValueError):
        _refuse_arguments(who, TREE, "an array of class counts stored in the payload")
    if shape != (counts[1],) or dtype.kind not in "iu":
        raise UploadError(
            f"{who}: the payload builds a tree of {counts[1]} outputs from class counts "
            f"of shape {shape} ({dtype}); skops writes one integer per output.",
            field="payload")


def _check_booster_state(node, who):
    """An XGBoost Booster is its model's bytes (``handle``), plus plain values."""
    state = node.get("content")
    entries = state.get("content") if isinstance(state, dict) else None
    if not (isinstance(state, dict) and state.get("__loader__") == "DictNode"
            and isinstance(entries, dict) and isinstance(entries.get("handle"), dict)
            and entries["handle"].get("__loader__") == "BytearrayNode"
            and all(_is_json(value) for key, value in entries.items() if key != "handle")):
        raise UploadError(
            f"{who}: the payload's XGBoost Booster is not its model's bytes (a 'handle' "
            "of bytes and plain values) as skops writes it.", field="payload")
