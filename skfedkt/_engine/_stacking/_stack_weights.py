"""The weights of a stack's copies: each net's parameters and buffers stacked on a new
first axis, in the layout the stacked steps read, and written back to a net (weights,
buffers, optimizer state) or read from one.

A lean dense layer (`StackedForward.lean_layers`) stores its weight transposed,
(copies, in, out), and its bias as (copies, 1, out): the forms a batched matrix product
reads without a copy; every other weight keeps its module's shape, copies first.
"""

from typing import Optional

import torch


def _stored(stacked, form):
    """Stacked weights (copies first, in their module's shape) as the stack stores
    them: a lean layer's weight transposed, its bias with a row axis; any other as it
    is."""
    if form == "weight":
        return stacked.transpose(1, 2).contiguous()
    return stacked.unsqueeze(1) if form == "bias" else stacked


def _module_form(stored, form):
    """The inverse of `_stored`: a view in the module's shape, copies first."""
    if form == "weight":
        return stored.transpose(1, 2)
    return stored[:, 0] if form == "bias" else stored


class StackedWeights:
    """Every copy's parameters and buffers, stacked.

    Parameters
    ----------
    nets : list of skorch.NeuralNet
        Initialised nets of the same module, each holding its copy's weights.
    device : torch.device
        Where the stacked weights live.
    lean_layers : collection of str
        The dense layers whose weights are stored in their lean forms.
    """

    def __init__(self, nets, device, lean_layers):
        module = nets[0].module_
        self.param_names = [name for name, _ in module.named_parameters()]
        self.buffer_names = [name for name, _ in module.named_buffers()]
        self.state_names = list(module.state_dict())
        self.trainable = [parameter.requires_grad for _, parameter in module.named_parameters()]
        # each weight's stored form: a lean layer's, else the module's (None)
        lean = {f"{layer}.{kind}": kind for layer in lean_layers for kind in ("weight", "bias")}
        self.forms: list[Optional[str]] = [lean.get(name) for name in self.param_names]
        self.params = [
            _stored(torch.stack([dict(net.module_.named_parameters())[name].detach()
                                 for net in nets]).to(device), form)
            for name, form in zip(self.param_names, self.forms)]
        self.buffers = [torch.stack([dict(net.module_.named_buffers())[name]
                                     for net in nets]).to(device)
                        for name in self.buffer_names]

    def by_name(self, copies=None):
        """The stored parameters and the buffers, each a dict by name: every copy's, or
        those of `copies` (a tensor of copy indices)."""
        def chosen(tensors):
            return tensors if copies is None else [tensor[copies] for tensor in tensors]

        return (dict(zip(self.param_names, chosen(self.params))),
                dict(zip(self.buffer_names, chosen(self.buffers))))

    def trained(self):
        """The stored weights that train, requiring gradients."""
        return [param.requires_grad_(True)
                for param, train in zip(self.params, self.trainable) if train]

    def freeze(self):
        """The trained weights, no longer requiring gradients (an epoch is over)."""
        for param in self.trained():
            param.requires_grad_(False)

    def anchor(self):
        """A copy of the trained weights as they are now (FedProx's anchor)."""
        return [param.detach().clone()
                for param, train in zip(self.params, self.trainable) if train]

    def take_gradient_layout(self, grads):
        """Store each trained weight in the memory layout its gradient comes in (a
        batched matrix product gives a transposed one), so that no step copies a
        gradient into the weight's layout."""
        grads = iter(grads)
        for index, train in enumerate(self.trainable):
            if train:
                grad = next(grads)
                if grad.stride() != self.params[index].stride():
                    with torch.no_grad():
                        self.params[index] = torch.empty_like(grad).copy_(self.params[index])

    def _in_module_form(self):
        """The stored weights in their module's shapes (views)."""
        return [_module_form(param, form) for param, form in zip(self.params, self.forms)]

    def weights_of(self, index):
        """Copy `index`'s state as its module's ``state_dict`` lists it: float64 arrays
        (what FedAvg averages)."""
        stacked = dict(zip(self.param_names + self.buffer_names,
                           self._in_module_form() + self.buffers))
        return [stacked[name][index].detach().cpu().numpy().astype(float)
                for name in self.state_names]

    @torch.no_grad()
    def write_to(self, index, net):
        """Copy `index`'s weights and buffers into `net`'s module."""
        for name, stacked in zip(self.param_names, self._in_module_form()):
            dict(net.module_.named_parameters())[name].copy_(stacked[index])
        for name, stacked in zip(self.buffer_names, self.buffers):
            dict(net.module_.named_buffers())[name].copy_(stacked[index])

    @torch.no_grad()
    def read_from(self, index, net):
        """`net`'s module weights into copy `index` (a callback restored its best)."""
        for name, stacked in zip(self.param_names, self._in_module_form()):
            stacked[index].copy_(dict(net.module_.named_parameters())[name])
        for name, stacked in zip(self.buffer_names, self.buffers):
            stacked[index].copy_(dict(net.module_.named_buffers())[name])

    def write_optimizer_state(self, net, states):
        """Load `states` (a copy's optimizer state per trained weight, as
        `StackedOptimizer.state_of` gives them, in the stack's layout) into `net`'s
        optimizer, each tensor in its weight's module shape."""
        optimizer = net.optimizer_
        trained = [(name, form) for name, form, train
                   in zip(self.param_names, self.forms, self.trainable) if train]
        parameters = dict(net.module_.named_parameters())
        # the optimizer's state_dict names each weight by its place in the one group
        place = {id(param): position
                 for position, param in enumerate(optimizer.param_groups[0]["params"])}
        state = {place[id(parameters[name])]: {
                     key: value if key == "step" or value is None
                     else _module_form(value.unsqueeze(0), form)[0]
                     for key, value in copy_state.items()}
                 for (name, form), copy_state in zip(trained, states)}
        optimizer.load_state_dict(
            {"state": state, "param_groups": optimizer.state_dict()["param_groups"]})
