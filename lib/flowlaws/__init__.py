"""flowlaws: the library of the book *flowlaws*.

One module per idea, in the order of the book:

- :mod:`flowlaws.models`   the architectures (two-layer nets, SwiGLU, attention, MoE)
- :mod:`flowlaws.laws`     their conservation laws and the Lie-algebra count of all laws
- :mod:`flowlaws.flow`     gradient flow and discrete optimisers that record invariants
- :mod:`flowlaws.runtime`  device choice and reproducible seeds
- :mod:`flowlaws.viz`      the book's figure style

Weight-shape convention, used everywhere: PyTorch's ``out x in``. A linear layer
``y = W x`` stores ``W`` with shape ``(n_out, n_in)``.
"""

from flowlaws.runtime import pick_device, seed_everything

__version__ = "0.1.0"
__all__ = ["pick_device", "seed_everything", "__version__"]
