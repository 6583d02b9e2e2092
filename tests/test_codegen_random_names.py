"""Random names, file names and comments through codegen (hypothesis).

Each example is a spec whose every name (dims, input, param, buffer, block,
block input, bindings) is drawn from Python keywords, soft keywords, builtins,
dunder and mangled names, nn.Module's attributes, dataclass internals, the
generated module's own names and random identifiers; its comments and file
name hold quotes, triple quotes, backslashes, NUL and other control
characters and unicode. The generated module must compile, import without
starting a process, executing text or importing anything but torch, math and
the standard modules a module of ours needs, then build at small sizes and
run forward with every shape as the checker proved.
"""
from __future__ import annotations

import builtins
import keyword
import os
import subprocess
import sys
import types
import warnings

import pytest
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st
from tiers import examples

from shapelang import codegen
from shapelang.checker.checker import check_text
from shapelang.codegen import naming, runner

torch = pytest.importorskip("torch")

HOSTILE = sorted(
    {n for n in keyword.kwlist + keyword.softkwlist + dir(builtins) + sorted(naming.NN_MODULE_ATTRS)
     if n.isidentifier()}
    | {"F", "nnf", "nnf_2", "nn", "torch", "math", "dataclass", "causal_mask", "_record", "cfg", "self", "_",
       "layer", "out", "x_input", "__slots__", "__post_init__", "__qualname__", "__dataclass_fields__",
       "__tbl", "__x__", "MISSING", "_type_B", "_dflt_B", "_return_type", "T", "TConfig", "l", "O", "I"})
NAME = st.one_of(st.sampled_from(HOSTILE), st.from_regex(r"[A-Za-z_][A-Za-z0-9_]{0,6}'?", fullmatch=True))
JUNK = st.one_of(
    st.sampled_from(['"""', "'''", "\\", "\\N{", "\\x", "\x00", '"', "'", "\x0b\x0c", "\x1b", "\u2028",
                     "\x85", "\ufeff", "é", "𝔘", "ﬁ", "${x}", "{0}", "%s"]),
    st.text(st.characters(exclude_characters="\n", exclude_categories=("Cs",)), max_size=12))
TEXT = st.lists(JUNK, max_size=4).map("".join)

SKELETON = """\
dim {B}, {D}
example {B}=2, {D}=4
assume {D} % 2 == 0
input {x}: [{B}, {D}]
param {w}: [{D}, {D}]
buffer {buf}: [{D}]
block {Blk}({z}: [{B}, {D}]):
  {h}: {z} -> linear {D} -> gelu # {c1}
  return {h} -> softmax -1
end
# {c0}
{y}: {x} @ {w} -> relu # {c2}
{u}: {y} * {buf} -> {Blk}
{v}, {t}: {u} -> chunk 2 -1
{r}: {x} -> stack 2 {Blk} -> scale 0.5
"""
KEYS = ["B", "D", "x", "w", "buf", "Blk", "z", "h", "y", "u", "v", "t", "r"]
ALLOWED_IMPORTS = {"torch", "math", "dataclasses", "typing", "__future__"}


class Forbidden(Exception):
    pass


def _forbidden(*_a, **_k):
    raise Forbidden("the generated module tried to start a process")


def import_guarded(source: str, name: str) -> dict:
    """Import generated source with process spawning, exec/eval and foreign imports refused."""
    real_import, real_exec, real_eval = builtins.__import__, builtins.exec, builtins.eval
    calls = []

    def guarded_import(target, globals=None, locals=None, fromlist=(), level=0):
        if (globals or {}).get("__name__") == name and target.split(".")[0] not in ALLOWED_IMPORTS:
            calls.append(f"import {target}")
            raise Forbidden(f"the generated module imports {target}")
        return real_import(target, globals, locals, fromlist, level)

    def guarded(real, what):
        def run(*args, **kwargs):
            if sys._getframe(1).f_globals.get("__name__") != "dataclasses":   # dataclass writes __init__ so
                calls.append(what)
                raise Forbidden(f"the generated module calls {what}")
            return real(*args, **kwargs)
        return run

    code = compile(source, f"<{name}>", "exec")
    module = types.ModuleType(name)
    with pytest.MonkeyPatch.context() as m:
        m.setitem(sys.modules, name, module)
        for mod, attrs in [(os, ["system", "popen", "execv", "execve", "execvp", "spawnv", "posix_spawn"]),
                           (subprocess, ["Popen", "run", "call", "check_call", "check_output", "getoutput"])]:
            for attr in attrs:
                if hasattr(mod, attr):
                    m.setattr(mod, attr, _forbidden)
        m.setattr(builtins, "__import__", guarded_import)
        m.setattr(builtins, "exec", guarded(real_exec, "exec"))
        m.setattr(builtins, "eval", guarded(real_eval, "eval"))
        real_exec(code, module.__dict__)
    assert not calls
    return module.__dict__


@settings(max_examples=examples(150), deadline=None, derandomize=True,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much])
@given(names=st.lists(NAME, min_size=len(KEYS), max_size=len(KEYS), unique=True),
       comments=st.lists(TEXT, min_size=3, max_size=3),
       file_name=st.tuples(TEXT, st.sampled_from([".shape", "", ".py", ".shape\\"])).map("".join))
def test_random_names_give_a_module_that_compiles_imports_safely_and_runs(names, comments, file_name):
    text = SKELETON.format(**dict(zip(KEYS, names)), c0=comments[0], c1=comments[1], c2=comments[2])
    spec = check_text(text, file_name or "spec.shape")
    assume(spec.ok)
    sizes = runner.resolve_sizes(spec)
    for instrument in (False, True):
        gen = codegen.generate(spec, instrument=instrument)
        with warnings.catch_warnings():
            warnings.simplefilter("error")        # an invalid escape sequence is a warning today
            compile(gen.source, "<generated>", "exec")
    gen = codegen.generate(spec)
    ns = import_guarded(gen.source, f"shapelang_random_{gen.module_name}")
    assert gen.module_name.isidentifier()
    model = ns[gen.top_class](ns[gen.config_class](**{py: sizes[n] for n, py in gen.fields}))
    with torch.no_grad():
        out = model(*runner.make_inputs(spec, gen, sizes))
    outputs = out if isinstance(out, dict) else {gen.outputs[0][0]: out}
    assert list(outputs) == [n for n, _ref in gen.outputs]
    proved = {n: t for b in spec.bindings for n, t in zip(b.names, b.types)}
    for n, value in outputs.items():
        assert list(value.shape) == [runner.value_at(d, spec, sizes) for d in proved[n].shape]
    rep = runner.run_spec(spec, sizes)       # every step's shape, and the same outputs as the clean module
    assert rep.ok, runner.report_text(rep)


IDENTIFIER = st.text(st.characters(categories=("Lu", "Ll", "Lt", "Lm", "Lo", "Nl", "Mn", "Mc", "Nd", "Pc")),
                     min_size=1, max_size=8)


@settings(max_examples=examples(300), deadline=None, derandomize=True)
@given(name=st.one_of(st.sampled_from(HOSTILE), IDENTIFIER, st.text(max_size=8)))
def test_every_name_maps_to_a_safe_identifier(name):
    for private in (True, False):
        py = naming.safe_identifier(name, private=private)
        assert py.isidentifier() and not keyword.iskeyword(py) and not keyword.issoftkeyword(py)
        assert py not in naming.RESERVED and not py.startswith("__")
        assert private or not py.startswith("_")
        compile(f"{py} = 1\nclass C:\n    {py} = 1\n    def f(self):\n        return self.{py}\n", "<n>", "exec")
        if name.isidentifier() and name.isascii() and not name.startswith("_"):
            assert py == name or py.rstrip("_") == name      # readable: the spec's name, at most with a `_`
    attr = naming.Namer(reserved=naming.RESERVED | naming.MODULE_ATTRS).claim(name)
    assert attr not in naming.NN_MODULE_ATTRS and not attr.startswith("__")
