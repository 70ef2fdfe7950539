"""The secure sum: parties add vectors of 64-bit words so that the coordinator learns
their sum and nothing of any one of them, though some parties drop along the way.

- `_agreement`: what the parties agree on beforehand (their identity keys among it), and
  the refusal every stage raises.
- `_party`, `_coordinator`: each side's stages (Bonawitz et al., CCS 2017).
- `_signed`: what a party signs or commits to (its keys, the roster, its shares' digests).
- `_primitives`: X25519, HKDF, AES-CTR, AES-GCM and Ed25519, from `cryptography`.
- `_shamir`: Shamir's sharing of the secrets that unmask a dropped party.
- `_encoding`: integers and fixed-point floats as words.
- `_simulation`: one sum run in one process, with its transcript.
- `_wire`: the bytes of every message, and of a party's or the coordinator's saved state.
"""

from ._agreement import Agreement, SecureSumError, default_colluding, default_threshold
from ._coordinator import SecureSumCoordinator
from ._encoding import FixedPoint, decode_integers, encode_integers
from ._party import SecureSumParty
from ._simulation import STAGES, SecureSumRun, new_identities, run_secure_sum
from ._wire import MESSAGES, message_from_bytes, message_to_bytes

__all__ = ["Agreement", "FixedPoint", "MESSAGES", "STAGES", "SecureSumCoordinator",
           "SecureSumError", "SecureSumParty", "SecureSumRun", "decode_integers",
           "default_colluding", "default_threshold", "encode_integers",
           "message_from_bytes", "message_to_bytes", "new_identities", "run_secure_sum"]
