"""Seeds and seeded clones: every random draw of a party depends only on the agreed
``random_state`` and the party's name, every draw of the server only on
``random_state``, so that a deployment's steps and the in-process ``fit`` give the same
model; a clone's randomness is fixed by its seed alone."""

import copy
import hashlib
import secrets
import sys
import threading
import warnings
from numbers import Integral

import numpy as np
from sklearn.base import BaseEstimator, clone
from sklearn.utils import check_random_state

_MAX_SEED = np.iinfo(np.int32).max


def draw_seeds(rng, n_seeds):
    """Independent integer seeds, one per clone, from a `RandomState`."""
    return rng.randint(_MAX_SEED, size=n_seeds)


_scratch = threading.local()


def scratch_random_state(seed):
    """This thread's scratch RandomState, reseeded with `seed`: the stream of
    ``RandomState(seed)``, for draws made at once and not kept. Constructing a
    RandomState costs about 0.1 ms, reseeding one a few microseconds."""
    if not hasattr(_scratch, "random_state"):
        _scratch.random_state = np.random.RandomState()
    _scratch.random_state.seed(seed)
    return _scratch.random_state


def seed_torch(torch, seed):
    """``torch.manual_seed(seed)``, which seeds every device's generator. Where this
    machine has no accelerator, the CPU's alone: torch queues a seed for each
    accelerator it has not started, with a traceback of its caller, which cost a
    millisecond per seeded clone inside a fit."""
    accelerator = getattr(torch, "accelerator", None)  # torch 2.6 on
    if accelerator is None or accelerator.is_available():
        torch.manual_seed(seed)
    else:
        torch.default_generator.manual_seed(seed)


def root_seed(random_state):
    """The integer every party and the server derive their draws from."""
    if isinstance(random_state, Integral):
        return int(random_state)
    return int(check_random_state(random_state).randint(_MAX_SEED))


def derived_random_state(root, role, name="", scratch=False):
    """A RandomState that depends only on `root`, a role ("party", "server", "public")
    and a party's name (its ``str``, so 0 and "0" name the same party). With `scratch`,
    this thread's reused one (see `scratch_random_state`), for draws made at once: five
    times cheaper where a fit derives one per party."""
    digest = hashlib.sha256(f"{role}:{name}".encode()).digest()
    key = np.frombuffer(digest[:16], dtype=np.uint32)
    seed = np.random.SeedSequence([root, *key]).generate_state(4)
    return scratch_random_state(seed) if scratch else np.random.RandomState(seed)


def public_queries(n_public, n_queries, root):
    """Sorted indices of `n_queries` of `n_public` public rows, the same at every party
    and the server (drawn from the shared `root`): a prefix of one permutation, so more
    queries add rows and never swap them."""
    return np.sort(derived_random_state(root, "public").permutation(n_public)[:n_queries])


def party_seed_of(party_seed, party_noise, secure):
    """The seed of a deployed party's own draws: `party_seed`, or where it is None and
    the party adds noise (the mechanism `party_noise`), under secure aggregation
    (`secure`) a RandomState of 128 bits from the operating system (no noise of a party
    there derives from anything a manifest says), and otherwise None, with a warning:
    its noise derives from the agreed random_state."""
    if party_seed is not None or party_noise is None:
        return party_seed
    if secure:
        return np.random.RandomState(np.frombuffer(secrets.token_bytes(16), dtype=np.uint32))
    warnings.warn(
        f"With {party_noise} the party's noise comes from party_seed; without one it "
        "derives from random_state and the party's name, which a server knowing "
        "random_state can recompute. Pass a secret party_seed.", UserWarning)
    return None


def party_random_state(random_state, party, party_seed=None):
    """The RandomState of a party's step: its own `party_seed` if given, else derived
    from the agreed `random_state` and the party's name (what ``fit`` uses)."""
    if party_seed is not None:
        return check_random_state(party_seed)
    return derived_random_state(root_seed(random_state), "party", party)


class SeededTemplate:
    """Unfitted clones of `estimator` whose randomness is fixed by a seed each.

    Every ``random_state`` parameter (nested ones too) gets its own integer drawn from
    the seed, and torch's RNG is seeded for skorch nets, which have no random_state.
    With `single_threaded`, parameters that ask for parallel workers (``n_jobs`` other
    than None or 1) are set to 1. The estimator is cloned and its parameters are looked
    up once; each seeded clone is a copy of that clone, which costs a few microseconds
    rather than a clone's and a parameter search's milliseconds.
    """

    def __init__(self, estimator, single_threaded=False):
        self.template = clone(estimator)
        params = self.template.get_params(deep=True)
        self.random_state_keys = _matching_keys(params, "random_state")
        # the clones already run in parallel: their own workers would oversubscribe
        self.fixed = {key: 1 for key in _matching_keys(params, "n_jobs")
                      if single_threaded and params[key] not in (None, 1)}
        # a plain estimator's set_params only sets its attributes: set them directly
        self.direct = (type(self.template).set_params is BaseEstimator.set_params
                       and all("__" not in key for key in (*self.random_state_keys,
                                                           *self.fixed)))

    def clone(self, seed):
        """An unfitted clone seeded with `seed`."""
        estimator = copy.deepcopy(self.template)
        rng = scratch_random_state(seed)
        params = {key: rng.randint(_MAX_SEED) for key in self.random_state_keys}
        params.update(self.fixed)
        if self.direct:
            for key, value in params.items():
                setattr(estimator, key, value)
        else:
            estimator.set_params(**params)
        torch = sys.modules.get("torch")
        if torch is not None:
            seed_torch(torch, int(seed))
        return estimator


def _matching_keys(params, name):
    """The keys of `params` that are `name` or a nested ``*__name``, sorted."""
    return sorted(key for key in params if key == name or key.endswith("__" + name))


def seeded_clone(estimator, seed, single_threaded=False):
    """An unfitted clone of `estimator` seeded with `seed` (see `SeededTemplate`)."""
    return SeededTemplate(estimator, single_threaded).clone(seed)
