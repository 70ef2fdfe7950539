"""The forward pass of many copies of one module at once, each with its own weights.

Every tensor that differs between copies carries the copies on a new first axis
(``(copies, rows, ...)``). The module's forward pass is traced once per mode (torch.fx,
in training and in evaluation mode, so that code that branches on ``self.training``
takes its own branch in each) and run node by node:

- dense layers as batched matrix products, convolutions as unfolded inputs times
  stacked kernels (`conv2d`) or through ``vmap``, layer normalisation as torch's
  normalisation then each copy's scale and shift, row-wise layers on the copies
  folded into the rows;
- dropout multiplies by the noise each copy draws from its own generator, in the order
  and shapes its separate fit draws it (`Draws`), so that a copy on the CPU sees the
  masks its ``fit`` would see;
- batch normalisation takes each copy's own batch statistics over its own rows, padded
  rows left out, and updates each copy's running statistics, as its ``fit`` would;
- any other operation runs through ``torch.func.vmap`` over the copies.

A module torch.fx cannot trace runs whole through ``vmap(functional_call)``, unless it
holds dropout or batch normalisation, whose draws and statistics ``vmap`` would not
keep per copy (`untraceable_refusal`).
"""

import copy
import math
import operator
from typing import NamedTuple

import torch
import torch.nn.functional as F
from torch import nn
from torch.func import functional_call, vmap

from .._compat import pytree

_PYTREE = pytree()

# layers that act on each element alone: on the stacked values as they are
_ELEMENTWISE = (nn.ReLU, nn.ReLU6, nn.LeakyReLU, nn.ELU, nn.SELU, nn.CELU, nn.GELU, nn.SiLU,
                nn.Mish, nn.Tanh, nn.Sigmoid, nn.Softplus, nn.Hardtanh, nn.Hardswish,
                nn.Hardsigmoid, nn.Identity)
# pooling layers of every dimension, max, average and adaptive
POOLINGS = (nn.MaxPool1d, nn.MaxPool2d, nn.MaxPool3d, nn.AvgPool1d, nn.AvgPool2d,
            nn.AvgPool3d, nn.AdaptiveAvgPool1d, nn.AdaptiveAvgPool2d, nn.AdaptiveAvgPool3d,
            nn.AdaptiveMaxPool1d, nn.AdaptiveMaxPool2d, nn.AdaptiveMaxPool3d)
# layers that act on each row alone and hold nothing: the copies folded into the rows
_ROW_WISE = _ELEMENTWISE + (nn.Softmax, nn.LogSoftmax, nn.Flatten, nn.Unflatten) + POOLINGS
# functions of one tensor that act on each element alone
_ELEMENTWISE_FUNCTIONS = {torch.relu, F.relu, torch.tanh, F.tanh, torch.sigmoid, F.sigmoid,
                          F.gelu, F.silu, F.elu, F.leaky_relu, F.softplus, F.mish,
                          torch.exp, torch.abs, torch.square}
# functions that normalise along one axis of each row: on the stacked values, the
# axis shifted past the copies' (an implicit axis depends on the dimensions: vmap)
_AXIS_FUNCTIONS = {F.softmax, torch.softmax, F.log_softmax, torch.log_softmax}
# what a shape query returns is the same for every copy: asked of the first
_SHAPE_METHODS = {"size", "dim", "numel", "ndimension"}
_SHAPE_ATTRIBUTES = {"shape", "ndim", "dtype", "device"}

DROPOUTS = (nn.Dropout, nn.Dropout1d, nn.Dropout2d, nn.Dropout3d, nn.AlphaDropout,
            nn.FeatureAlphaDropout)
# convolutions of every dimension, transposed too (the lazy kinds subclass them)
CONVOLUTIONS = (nn.Conv1d, nn.Conv2d, nn.Conv3d, nn.ConvTranspose1d, nn.ConvTranspose2d,
                nn.ConvTranspose3d)
BATCH_NORMS = (nn.BatchNorm1d, nn.BatchNorm2d, nn.BatchNorm3d)


class Stacked:
    """A value that differs between copies: copies on the first axis."""

    __slots__ = ("tensor",)

    def __init__(self, tensor):
        self.tensor = tensor


def untraceable_refusal(module):
    """Why a module that torch.fx cannot trace cannot be stacked, or None: its dropout
    draws and batch statistics need the traced path."""
    for name, part in module.named_modules():
        if isinstance(part, DROPOUTS + BATCH_NORMS):
            return (f"module {name or 'itself'} ({type(part).__name__}) is in a forward "
                    "pass torch.fx cannot trace, where its draws or batch statistics "
                    "cannot be kept per network")
    return None


def trace(module, training):
    """The module's forward pass as a torch.fx graph in the given mode, or None when
    torch.fx cannot trace it (Python control flow on tensor values, say)."""
    traced = copy.deepcopy(module).train(training)
    try:
        return torch.fx.symbolic_trace(traced).graph
    except (torch.fx.proxy.TraceError, TypeError, NotImplementedError, AttributeError):
        # what tracing raises where code treats a traced value as a concrete one
        return None


def traces(module):
    """The module's forward pass traced in training and in evaluation mode (`trace`)."""
    return {mode: trace(module, mode) for mode in (True, False)}


class CannotStack(Exception):
    """Raised where a stacked step meets what it cannot run as each copy's own step
    would (the probe's refusal names it)."""


def _noise_row_shape(layer, row_shape):
    """The shape of one row's dropout noise, as torch draws it for a minibatch of rows
    of `row_shape`: per element, or per channel for the feature dropouts (which treat
    some inputs as unbatched: their one draw per row is the same sequence)."""
    dims = len(row_shape)
    if isinstance(layer, (nn.Dropout, nn.AlphaDropout)):
        return list(row_shape)
    feature_dims = {nn.Dropout1d: (1, 2), nn.Dropout2d: (2, 3), nn.Dropout3d: (4,)}.get(
        type(layer), range(1, 8))
    if dims not in feature_dims:
        raise CannotStack(f"{type(layer).__name__} on rows of {dims} axes")
    return [1] if dims == 1 and isinstance(layer, nn.Dropout1d) else (
        list(row_shape[:1]) + [1] * (dims - 1))


class Draws:
    """What one training step's dropout layers multiply by: each copy's noise from its
    own generator, drawn when the layer runs (the order its separate fit draws in), for
    its own rows of the step.

    Parameters
    ----------
    generators : list of torch.Generator
        One per copy, in the state its separate fit's generator would be in.
    rows : list of int
        Each copy's rows in this step (0: it takes no step).
    """

    def __init__(self, generators, rows):
        self.generators, self.rows = generators, rows

    def noise(self, layer, x):
        """Each copy's noise for `layer` on the stacked input `x`, padded to its rows:
        ones with the layer's keep probability, drawn as torch's ``bernoulli_`` draws
        them. On the CPU that is, element by element, a float64 uniform draw below the
        keep probability: drawn so, into one buffer whose padding is never kept, the
        same bits and generator states without its slower kernel (tests/test_stacked.py
        compares the two)."""
        n_copies, n_slots, *row_shape = x.shape
        shape = _noise_row_shape(layer, row_shape)
        keep = 1 - layer.p
        if x.device.type == "cpu":
            uniform = torch.full((n_copies, n_slots, *shape), 2.0, dtype=torch.float64)
            for generator, rows, own in zip(self.generators, self.rows, uniform):
                if rows:
                    own[:rows].uniform_(generator=generator)
            return (uniform < keep).to(x.dtype)
        noise = torch.zeros((n_copies, n_slots, *shape), dtype=x.dtype, device=x.device)
        for index, (generator, rows) in enumerate(zip(self.generators, self.rows)):
            if rows:
                noise[index, :rows] = torch.empty((rows, *shape), dtype=x.dtype,
                                                  device=x.device).bernoulli_(
                    keep, generator=generator)
        return noise


def dropout(layer, x, draws):
    """`layer` in training mode on stacked `x`, with the noise `draws` gives: torch's
    own arithmetic (`torch.nn.functional.dropout` and the alpha dropouts)."""
    p = layer.p
    if p == 0:
        return x
    if p == 1:
        return x * torch.zeros((), dtype=x.dtype, device=x.device)
    noise = draws.noise(layer, x)
    if isinstance(layer, (nn.AlphaDropout, nn.FeatureAlphaDropout)):
        alpha = 1.7580993408473766
        a = 1.0 / math.sqrt((alpha * alpha * p + 1) * (1 - p))
        shift = noise.add(-1).mul_(alpha * a).add_(alpha * a * p)
        return x * noise.mul_(a) + shift
    return x * noise.div_(1 - p)


class BatchRows:
    """Which rows of a step are each copy's own (the others pad it), which copies take
    the step, and how many rows each has (known on the host, so that no check waits
    for the device): batch normalisation's statistics count only those."""

    def __init__(self, mask, active, counts):
        self.mask, self.active, self.counts = mask, active, counts


def batch_norm(layer, x, weight, bias, buffers, rows):
    """`layer` on stacked `x` with each copy's own `weight`, `bias` and running
    statistics (`buffers`: running_mean, running_var, num_batches_tracked, updated in
    place for the copies that take the step): batch statistics over each copy's own
    rows in training (`rows` a `BatchRows`), running statistics in evaluation."""
    running_mean, running_var, tracked = buffers
    n_copies, n_slots, n_channels = x.shape[:3]
    spatial = x.dim() - 3
    shape = (n_copies, 1, n_channels) + (1,) * spatial
    if rows is None:
        mean, var = running_mean.view(shape), running_var.view(shape)
    elif (layer.momentum is not None and (rows.counts == n_slots).all()
          and n_slots * math.prod(x.shape[3:]) > 1):
        return _whole_batch_norm(layer, x, weight, bias, buffers)
    else:
        mask = rows.mask.to(x.dtype).view((n_copies, n_slots) + (1,) * (spatial + 1))
        dims = (1,) + tuple(range(3, x.dim()))
        counts = rows.mask.sum(dim=1).to(x.dtype) * math.prod(x.shape[3:])
        if (rows.counts * math.prod(x.shape[3:]) == 1).any():
            raise ValueError("Expected more than 1 value per channel when training, got "
                             f"input size {torch.Size([1, *x.shape[2:]])}: a net's last "
                             "minibatch holds one row, which batch normalisation cannot "
                             "normalise (its own fit fails alike). Set the net's "
                             "iterator_train__drop_last=True, or a batch_size that leaves "
                             "no single row.")
        safe = counts.clamp(min=1).view(n_copies, 1)
        mean = (x * mask).sum(dim=dims) / safe
        var = (((x - mean.view(shape)) ** 2) * mask).sum(dim=dims) / safe
        with torch.no_grad():
            active = rows.active.view(n_copies, 1)
            tracked.add_(rows.active.to(tracked.dtype))
            momentum = (layer.momentum if layer.momentum is not None else
                        1.0 / tracked.clamp(min=1).to(x.dtype).view(n_copies, 1))
            unbiased = var * safe / (safe - 1).clamp(min=1)
            running_mean.copy_(torch.where(active, (1 - momentum) * running_mean
                                           + momentum * mean, running_mean))
            running_var.copy_(torch.where(active, (1 - momentum) * running_var
                                          + momentum * unbiased, running_var))
        mean, var = mean.view(shape), var.view(shape)
    out = (x - mean) / torch.sqrt(var + layer.eps)
    if weight is not None:
        out = out * weight.view(shape) + bias.view(shape)
    return out


def _whole_batch_norm(layer, x, weight, bias, buffers):
    """`batch_norm` in training where every copy takes a whole minibatch and the layer
    has a fixed momentum: torch's own batch normalisation, each copy's channels as
    channels of their own, so that each copy's statistics are its separate fit's."""
    running_mean, running_var, tracked = buffers
    n_copies, n_slots, n_channels, *spatial = x.shape
    with torch.no_grad():
        tracked.add_(1)
    out = F.batch_norm(x.transpose(0, 1).reshape(n_slots, n_copies * n_channels, *spatial),
                       running_mean.view(-1), running_var.view(-1),
                       None if weight is None else weight.reshape(-1),
                       None if bias is None else bias.reshape(-1), True, layer.momentum,
                       layer.eps)
    return out.view(n_slots, n_copies, n_channels, *spatial).transpose(0, 1)


def layer_norm(layer, x, weight, bias):
    """`layer` (a LayerNorm) on stacked `x` with each copy's own `weight` and `bias`:
    torch's normalisation over the last axes, which is the same for every copy, then
    each copy's scale and shift."""
    out = F.layer_norm(x, layer.normalized_shape, None, None, layer.eps)
    shape = ((x.shape[0],) + (1,) * (x.dim() - 1 - len(layer.normalized_shape))
             + tuple(layer.normalized_shape))
    if weight is not None:
        out = out * weight.view(shape)
    return out if bias is None else out + bias.view(shape)


def linear(x, transposed, bias):
    """A dense layer on `x`, stacked (copies, rows, ..., in) or shared by every copy
    (rows, ..., in), with its weights as the stack stores them (`lean_layers`):
    `transposed` (copies, in, out) and `bias` (copies, 1, out)."""
    if isinstance(x, Stacked):
        x = x.tensor
        if x.dim() == 3:  # (copies, rows, in): no reshape, whose view the backward pass pays
            return (torch.bmm(x, transposed) if bias is None
                    else torch.baddbmm(bias, x, transposed))
        flat = x.reshape(x.shape[0], -1, x.shape[-1])
        out = torch.bmm(flat, transposed) if bias is None else torch.baddbmm(bias, flat,
                                                                             transposed)
        return out.view(*x.shape[:-1], transposed.shape[2])
    out = torch.matmul(x.reshape(-1, x.shape[-1]), transposed)
    if bias is not None:
        out = out + bias
    return out.view(transposed.shape[0], *x.shape[:-1], transposed.shape[2])


def lean_layers(module, graphs):
    """The dense layers that the traced passes (`graphs`) only call, on one input, and
    whose weights they read nowhere else: the stack stores their weights transposed,
    (copies, in, out), and their biases as (copies, 1, out), the forms a batched matrix
    product takes, so that no step's forward or backward pass views them (`linear`)."""
    if any(graph is None for graph in graphs.values()):
        return set()
    layers = {name for name, part in module.named_modules() if isinstance(part, nn.Linear)}
    for graph in graphs.values():
        for node in graph.nodes:
            if node.op == "call_module" and (len(node.args) != 1 or node.kwargs):
                layers.discard(node.target)
            elif node.op == "get_attr":
                layers.discard(node.target.rpartition(".")[0])
    return layers


def conv2d(layer, x, weight, bias):
    """A 2-D convolution with stacked kernels as one batched matrix product: each
    copy's input unfolded into its patches (rows x positions, channels x kernel), times
    its kernels; no grouped convolution, which the CPU runs slowly."""
    n_copies, n_slots, channels, height, width = x.shape
    patches = F.unfold(x.reshape(n_copies * n_slots, channels, height, width),
                       layer.kernel_size, layer.dilation, layer.padding, layer.stride)
    n_positions = patches.shape[-1]
    patches = patches.view(n_copies, n_slots, -1, n_positions).transpose(2, 3).reshape(
        n_copies, n_slots * n_positions, -1)
    kernels = weight.reshape(n_copies, weight.shape[1], -1).transpose(1, 2)
    out = (torch.bmm(patches, kernels) if bias is None
           else torch.baddbmm(bias.unsqueeze(1), patches, kernels))
    out_height = (height + 2 * layer.padding[0] - layer.dilation[0]
                  * (layer.kernel_size[0] - 1) - 1) // layer.stride[0] + 1
    out_width = n_positions // out_height
    # contiguous, as a convolution returns it (the caller may view it)
    return out.view(n_copies, n_slots, out_height, out_width, -1).permute(0, 1, 4, 2, 3).contiguous()


def _folds(layer, input_dims):
    """Whether `layer` may run on the copies folded into the rows: it acts on each row
    alone, holds nothing, and never reduces or reshapes the rows' own axis."""
    if not isinstance(layer, _ROW_WISE):
        return False
    if isinstance(layer, (nn.Softmax, nn.LogSoftmax)):
        # an implicit axis is chosen by the input's dimensions: 0 for 0, 1 and 3
        dim = layer.dim if layer.dim is not None else (0 if input_dims in (0, 1, 3) else 1)
        return dim != 0 and dim >= -(input_dims - 1)
    if isinstance(layer, nn.Flatten):
        return layer.start_dim != 0 and layer.start_dim >= -(input_dims - 1)
    if isinstance(layer, nn.Unflatten):
        return isinstance(layer.dim, int) and layer.dim != 0 and layer.dim >= -(input_dims - 1)
    return True


def _unfoldable(layer):
    return (type(layer) is nn.Conv2d and layer.groups == 1
            and layer.padding_mode == "zeros" and not isinstance(layer.padding, str))


class StackedForward:
    """The forward pass of copies of `module` with stacked parameters and buffers.

    Parameters
    ----------
    module : torch.nn.Module
        One copy (its weights are not read).
    unfold_convolutions : bool
        Whether 2-D convolutions run as unfolded patches times kernels (`conv2d`)
        rather than through ``vmap`` (a grouped convolution).
    graphs : dict, default=None
        The module's `traces`, made once for all the chunks of a tier: tracing patches
        torch's modules for the whole process, which must not happen while other
        threads train.
    """

    def __init__(self, module, unfold_convolutions, graphs=None):
        self.module = module
        self.meta = copy.deepcopy(module).to("meta")
        self.unfold_convolutions = unfold_convolutions
        self.graphs = traces(module) if graphs is None else graphs
        self.traced = all(graph is not None for graph in self.graphs.values())
        self.lean_layers = lean_layers(module, self.graphs)
        self.programs = ({mode: _program(graph, module, self.meta, self.lean_layers)
                          for mode, graph in self.graphs.items()} if self.traced else None)
        # whether training draws dropout noise, and normalises batches
        self.draws = any(isinstance(part, DROPOUTS) and 0 < part.p
                         for part in module.modules())
        self.batch_norms = any(isinstance(part, BATCH_NORMS) for part in module.modules())
        # whether a pass ran something through vmap, whose work this engine does not
        # know to be free of host reads (a CUDA graph captures none)
        self.vmapped = not self.traced

    def __call__(self, params, buffers, x, training=False, draws=None, rows=None):
        """Every copy's output: `params`, `buffers` (dicts of stacked tensors by
        name), on `x` (a `Stacked` value, or rows shared by every copy); in training,
        dropout noise from `draws` and batch statistics over `rows`."""
        if self.programs is None:  # untraced
            self.meta.train(training)
            state = {**params, **buffers}
            stacked = isinstance(x, Stacked)
            return vmap(lambda state, x: functional_call(self.meta, state, (x,)),
                        in_dims=(0, 0 if stacked else None))(
                state, x.tensor if stacked else x)
        env = {}
        for node, layer in self.programs[training]:
            if node.op == "placeholder":
                env[node] = x
                continue
            args = _filled(node.args, env)
            kwargs = _filled(node.kwargs, env) if node.kwargs else {}
            if node.op == "output":
                out = args[0]
                return out.tensor if isinstance(out, Stacked) else out
            if node.op == "call_module":
                env[node] = self._module(layer, args, kwargs, params, buffers, training,
                                         draws, rows)
            else:
                env[node] = self._run(node, args, kwargs, params, buffers)
        raise RuntimeError("the traced graph has no output")

    def _run(self, node, args, kwargs, params, buffers):
        if node.op == "get_attr":
            state = params.get(node.target, buffers.get(node.target))
            return Stacked(state) if state is not None else _attribute(self.module,
                                                                        node.target)
        if node.op == "call_method":
            function = getattr(torch.Tensor, node.target)
            if node.target in _SHAPE_METHODS and isinstance(args[0], Stacked):
                return function(args[0].tensor[0], *args[1:], **kwargs)
        else:
            function = node.target
            if (function is getattr and isinstance(args[0], Stacked)
                    and args[1] in _SHAPE_ATTRIBUTES):
                return getattr(args[0].tensor[0], args[1])
            if (function in _ELEMENTWISE_FUNCTIONS and len(args) == 1
                    and isinstance(args[0], Stacked)):
                return Stacked(function(args[0].tensor, **kwargs))
            if function in _AXIS_FUNCTIONS and args and isinstance(args[0], Stacked):
                dim = kwargs.get("dim", args[1] if len(args) > 1 else None)
                if isinstance(dim, int):
                    rest = {key: value for key, value in kwargs.items() if key != "dim"}
                    return Stacked(function(args[0].tensor, dim if dim < 0 else dim + 1,
                                            *args[2:], **rest))
            if function in (operator.add, operator.mul, operator.sub, operator.truediv):
                if all(isinstance(a, Stacked) for a in args) and (
                        args[0].tensor.dim() == args[1].tensor.dim()):
                    return Stacked(function(args[0].tensor, args[1].tensor))
        return self._over_copies(function, args, kwargs)

    def _module(self, called, args, kwargs, params, buffers, training, draws, rows):
        layer = called.layer
        own = {name: params[key] for name, key in called.params}
        x = args[0] if args else None
        if called.lean:
            return Stacked(linear(x, own["weight"], own.get("bias")))
        if type(layer) is nn.LayerNorm and isinstance(x, Stacked) and len(args) == 1 and (
                not kwargs):
            return Stacked(layer_norm(layer, x.tensor, own.get("weight"), own.get("bias")))
        if isinstance(layer, DROPOUTS) and isinstance(x, Stacked):
            return Stacked(dropout(layer, x.tensor, draws)) if training else x
        if isinstance(layer, BATCH_NORMS) and isinstance(x, Stacked):
            running = [buffers[called.buffers[name]]
                       for name in ("running_mean", "running_var", "num_batches_tracked")]
            return Stacked(batch_norm(layer, x.tensor, own.get("weight"), own.get("bias"),
                                      running, rows if training else None))
        if (self.unfold_convolutions and _unfoldable(layer) and isinstance(x, Stacked)
                and x.tensor.dim() == 5):
            return Stacked(conv2d(layer, x.tensor, own["weight"], own.get("bias")))
        if isinstance(layer, _ELEMENTWISE) and isinstance(x, Stacked) and len(args) == 1 and (
                not kwargs):
            return Stacked(layer(x.tensor))
        if isinstance(x, Stacked) and len(args) == 1 and not kwargs and _folds(
                layer, x.tensor.dim() - 1):
            tensor = x.tensor
            out = layer(tensor.reshape(-1, *tensor.shape[2:]))
            return Stacked(out.view(*tensor.shape[:2], *out.shape[1:]))
        meta = called.meta.train(training)
        state = {**own, **{name: buffers[key] for name, key in called.buffers.items()}}
        if not state:
            return self._over_copies(layer, args, kwargs)
        return self._over_copies(lambda state, *a, **k: functional_call(meta, state, a, k),
                                 args, kwargs, state)

    def _over_copies(self, function, args, kwargs, state=None):
        out, through_vmap = _vmapped(function, args, kwargs, state)
        self.vmapped = self.vmapped or through_vmap
        return out


class _Called(NamedTuple):
    """A layer a traced graph calls, its parameters' and buffers' names in the stack,
    its copy on the meta device (for vmap), and whether it is a dense layer whose
    weights the stack stores lean (`lean_layers`)."""

    layer: nn.Module
    params: list
    buffers: dict
    meta: nn.Module
    lean: bool


def _program(graph, module, meta, lean):
    """The graph's nodes, each with what it calls (`_Called`) found once; `lean`: the
    dense layers whose weights the stack stores lean."""
    program = []
    for node in graph.nodes:
        called = None
        if node.op == "call_module":
            layer = module.get_submodule(node.target)
            called = _Called(
                layer, [(name, f"{node.target}.{name}") for name, _ in layer.named_parameters()],
                {name: f"{node.target}.{name}" for name, _ in layer.named_buffers()},
                meta.get_submodule(node.target), node.target in lean)
        program.append((node, called))
    return program


def _filled(arg, env):
    """`arg` (a node's args or kwargs) with every node replaced by its value."""
    if isinstance(arg, tuple) and all(isinstance(a, torch.fx.Node) for a in arg):
        return tuple(env[a] for a in arg)
    return torch.fx.node.map_arg(arg, lambda node: env[node])


def _attribute(module, target):
    value = module
    for name in target.split("."):
        value = getattr(value, name)
    return value


def _vmapped(function, args, kwargs, state=None):
    """`function` over the copies: the stacked values (and `state`, a dict of stacked
    tensors given as the function's first argument) take the copies' axis, the others
    are the same for every copy; without a stacked value it runs once. Returns its
    output and whether it ran through vmap."""
    leaves, spec = _PYTREE.tree_flatten((args, kwargs))
    positions = [i for i, leaf in enumerate(leaves) if isinstance(leaf, Stacked)]
    if not positions and state is None:
        return function(*args, **kwargs), False

    def per_copy(state_copy, *values):
        filled = list(leaves)
        for index, value in zip(positions, values):
            filled[index] = value
        call_args, call_kwargs = _PYTREE.tree_unflatten(filled, spec)
        if state is None:
            return function(*call_args, **call_kwargs)
        return function(state_copy, *call_args, **call_kwargs)

    out = vmap(per_copy, in_dims=(None if state is None else 0, *[0] * len(positions)))(
        state, *[leaves[i].tensor for i in positions])
    return _PYTREE.tree_map(Stacked, out), True
