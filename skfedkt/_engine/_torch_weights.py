"""A skorch net's weights for FedAvg: its module's ``state_dict`` as float64 arrays,
loaded back in each tensor's own dtype on the net's device, and FedProx's proximal
term as a callback that extends every gradient. Imported only where skorch nets are
averaged, so that the package needs no torch otherwise."""

import numpy as np
import torch
from skorch.callbacks import Callback


def net_weights(net):
    """An initialised net's weights: every tensor of its module's state, as float64
    arrays in the module's order."""
    return [tensor.detach().cpu().numpy().astype(float)
            for tensor in net.module_.state_dict().values()]


class ProximalTerm(Callback):
    """FedProx for a skorch net: after every backward pass, each parameter's gradient
    gains ``proximal_mu * (w - w_global)``, the gradient of
    ``proximal_mu / 2 * ||w - w_global||^2`` (Li et al., 2020)."""

    def __init__(self, proximal_mu, anchor):
        self.proximal_mu = proximal_mu
        self.anchor = anchor

    def on_grad_computed(self, net, named_parameters, **kwargs):
        with torch.no_grad():
            for name, parameter in named_parameters:
                if parameter.grad is not None:
                    parameter.grad += self.proximal_mu * (parameter - self.anchor[name])


def start_net(net, weights, proximal_mu):
    """Initialise `net` (a fresh module and optimizer) and load `weights` into its
    module, on its device; with a positive `proximal_mu`, anchor FedProx's term there.

    ``load_state_dict`` fills the module's tensors in place, so the optimizer made for
    them by the initialisation starts fresh on the loaded weights."""
    if proximal_mu > 0:
        net.set_params(callbacks=[*(net.callbacks or []), ("fedprox", ProximalTerm(
            proximal_mu, None))])
    net.initialize()
    state = net.module_.state_dict()
    if len(weights) != len(state):
        raise ValueError(f"expected {len(state)} weight arrays, got {len(weights)}")
    net.module_.load_state_dict({
        name: torch.as_tensor(np.asarray(array), dtype=tensor.dtype, device=tensor.device)
        for (name, tensor), array in zip(state.items(), weights)
    })
    if proximal_mu > 0:
        parameters = dict(net.module_.named_parameters())
        dict(net.callbacks_)["fedprox"].anchor = {name: parameter.detach().clone()
                                       for name, parameter in parameters.items()}
