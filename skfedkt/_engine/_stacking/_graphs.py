"""A stack's training step on a GPU, captured once as a CUDA graph and replayed.

A step of small networks on a GPU is Python and kernel launches more than arithmetic:
the students' and the final model's many minibatches, one after the other, set a
round's time. A CUDA graph launches a whole step's kernels (forward, backward and the
optimizer's update) at once. It replays the very kernels of the step it recorded, on
the same weights and optimizer state, so a replayed step computes what the eager one
would; only its inputs change, copied into the graph's own buffers first.

A step is captured only where nothing in it reads the host or changes from step to
step: every copy steps, on a full minibatch, at one learning rate, with one step
count (`StackedOptimizer.steps_together`); no dropout draws (each copy's generator
is advanced by the host); every layer runs as the stack's own arithmetic, not through
``vmap``. Every other step runs eagerly, as on the CPU.
"""

import torch

# whether a stack on a GPU replays its full steps as a CUDA graph (tests compare both)
CAPTURE_STEPS = True
# eager steps on a side stream before a capture, as torch asks of a graph that holds a
# backward pass (autograd and cuBLAS set up their state for the stream first)
WARMUP_STEPS = 3


class StepGraph:
    """One training step, `step` (a function of device tensors that updates the
    stack in place and returns each copy's loss), captured for inputs shaped as
    `inputs`, and replayed on new inputs of those shapes."""

    def __init__(self, step, inputs):
        self.inputs = [tensor.clone() for tensor in inputs]
        self.graph = torch.cuda.CUDAGraph()
        # other threads' work on the device does not break this capture
        with torch.cuda.graph(self.graph, capture_error_mode="thread_local"):
            self.loss = step(*self.inputs)

    def __call__(self, *inputs):
        for static, value in zip(self.inputs, inputs):
            static.copy_(value)
        self.graph.replay()
        return self.loss


class CapturedSteps:
    """When a stack's full steps are eager, warming up, or replayed (`StepGraph`).

    Parameters
    ----------
    step : callable
        The stack's full step, of device tensors only.
    """

    def __init__(self, step):
        self.step = step
        self.warmed_up = 0
        self.graph = None
        self.key = None
        self.side_stream = torch.cuda.Stream()

    def __call__(self, key, inputs):
        """Each copy's loss after a full step on `inputs`; `key` names what the graph
        holds as constants (the learning rate): a new one means a new capture."""
        if key != self.key:
            self.graph, self.key, self.warmed_up = None, key, 0
        if self.graph is not None:
            return self.graph(*inputs)
        if self.warmed_up < WARMUP_STEPS:
            self.warmed_up += 1
            current = torch.cuda.current_stream()
            self.side_stream.wait_stream(current)
            with torch.cuda.stream(self.side_stream):
                loss = self.step(*inputs)
            current.wait_stream(self.side_stream)
            return loss
        self.graph = StepGraph(self.step, inputs)
        return self.graph(*inputs)
