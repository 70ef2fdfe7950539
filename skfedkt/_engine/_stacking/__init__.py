"""Many copies of one torch network trained together, as one stacked module.

A tier of FedKT (or of any algorithm) fits many clones of the same skorch net, each on
its own rows. Fitted one by one, each clone pays skorch's per-step machinery (datasets,
collation, callbacks, history) and tiny matrix products that leave a CPU's vector units
and a GPU idle. Here every clone's parameters are stacked along a new first axis and
trained in one loop: each step runs every copy's next minibatch at once, with a loss
masked per copy and an optimizer whose state, step count and learning rate are per
copy. What comes back is, per clone, what a separate ``fit`` with the same seed gives:
the same initial weights, validation split, minibatch order, dropout noise (on the
CPU), batch statistics, optimizer arithmetic, history and callbacks' decisions, within
floating-point tolerance, written into ordinary fitted skorch nets.

- `_refusals`: what is served, and why the rest trains one by one;
- `_forward`: the stacked forward pass (dropout noise, batch statistics, dense layers,
  convolutions);
- `_optimizer`: Adam, AdamW and SGD per copy;
- `_copies`: each copy's split, draws, history and callbacks;
- `_stack`: `NetworkStack`, the training loop; `_stack_data`: its rows and losses;
  `_stack_weights`: its weights, stacked and written back;
- `_tier`: the probe that decides a tier's path, and the chunks the engine fits;
- here: what the engine calls, re-exported.
"""

from ._forward import CannotStack
from ._refusals import stacking_refusal
from ._stack import NetworkStack
from ._tier import Probe, fit_chunk, probe, train_from_weights

# the tier's tunables (chunk sizes, the modules the CPU does not stack) live in `_tier`,
# where a benchmark or test sets them
__all__ = ["CannotStack", "NetworkStack", "Probe", "fit_chunk", "probe", "stacking_refusal",
           "train_from_weights"]
