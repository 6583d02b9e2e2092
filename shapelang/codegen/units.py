"""Codegen, the data passed between its parts: one `Unit` per nn.Module class being
written, and the `Generated` result. Plain data, no behaviour."""
from __future__ import annotations

from dataclasses import dataclass, field

from ..checker.ir import BlockIR


@dataclass
class Unit:
    """One nn.Module class: the whole spec (`block` None) or one instantiation of a block."""
    key: object
    label: str
    block: BlockIR | None
    inputs: list                      # (ref, TensorType, is_anonymous)
    params: list
    buffers: list
    bindings: list
    rename: dict = field(default_factory=dict)   # outer size -> the block's own dim (forward only)
    # the block's size parameters (`dim F` in its signature): outer size -> F, a constructor
    # argument (`Mlp(cfg, F)`), and F -> the outer size at this call
    size_rename: dict = field(default_factory=dict)
    size_args: dict = field(default_factory=dict)
    # the dims bound at calls that are constructor arguments too (generic.py), and the
    # constructor arguments __init__ uses
    bound_args: set = field(default_factory=set)
    init_own: set = field(default_factory=set)
    passed: dict = field(default_factory=dict)    # such an argument -> what its one call gives
    generic: bool = False                         # written once for every call (generic.py)
    # pass 1 (the emitter)
    arg_names: list = field(default_factory=list)
    init: list = field(default_factory=list)      # __init__ lines after super().__init__()
    body: list = field(default_factory=list)      # forward lines
    needed: set = field(default_factory=set)      # sizes the forward body uses (local names)
    init_syms: set = field(default_factory=set)   # sizes __init__ uses (spec names)
    readable: dict = field(default_factory=dict)  # size -> (arg index, axis)
    returns: list = field(default_factory=list)   # (name, code) returned by forward
    children: list = field(default_factory=list)  # child units, in order
    dead: set = field(default_factory=set)
    names: set = field(default_factory=set)       # every local name forward may use
    locals: set = field(default_factory=set)      # every name its Namer handed out or holds
    attrs: object = None                          # the AttrTree of its attribute names
    size_attrs: dict = field(default_factory=dict)  # config size -> its int attribute (`self.H`)
    config_sizes: list = field(default_factory=list)  # the config sizes forward uses, in order
    function: bool = False                        # a block with no state: a function, not a class
    stacked: bool = False                         # used by `stack` (always a module)
    comments: list = field(default_factory=list)  # the spec's comments on the block
    hoisted: list = field(default_factory=list)   # extra forward args its caller computes (hoist.py)
    hoisted_steps: set = field(default_factory=set)   # the ids of the steps its caller computes
    # pass 2 (the generator)
    class_name: str = ""
    text: str = ""


@dataclass
class Generated:
    source: str
    module_name: str
    top_class: str
    config_class: str
    fields: list          # (dim name, python field name) of the config
    args: list            # (python name, TensorType, ref) of the top forward, in order
    outputs: list         # (name, ref) returned by the top forward
    returns_dict: bool
    built_tables: bool = False   # it builds buffers in __init__ that no state dict holds (tables.py)
