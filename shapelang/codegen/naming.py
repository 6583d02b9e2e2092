"""Codegen, names and sizes as Python text: the lowest layer of the code generator.

Spec text reaches the generated source only through this module:

- every spec name becomes an identifier through `Namer` / `safe_identifier`,
  which keeps clear of Python keywords and soft keywords, builtins, dunder and
  name-mangled (`__x`) names, the attributes of nn.Module, the internals of
  dataclasses and the module's own names (`torch`, `nn`, `math`, `cfg`, ...);
- every string becomes a literal through `py_str` (repr), text inside a
  docstring through `doc_text`, and text in a comment through `comment_text`;
- every number through `Printer`, which refuses what is not finite.

`Printer` turns sympy sizes and scalars into Python (`D // H`, `1 / math.sqrt(Dk)`).
"""
from __future__ import annotations

import builtins
import keyword
import math
import re
import unicodedata

import sympy as sp

# the names the generated module itself defines or uses at module level
MODULE_NAMES = {"torch", "nn", "math", "dataclass", "causal_mask", "_record", "F"}
# never a name of ours: the module's names, keywords, builtins, and names ruff finds ambiguous
RESERVED = ({"self", "cfg", "_", "l", "O", "I"} | (MODULE_NAMES - {"F"}) | set(keyword.kwlist)
            | set(keyword.softkwlist) | {n for n in dir(builtins) if not n.startswith("_")})
# what a dataclass defines or uses inside the methods it writes (`_type_D`, `_dflt_D`, MISSING):
# a config field never starts with `_`, and never takes one of these
DATACLASS_NAMES = {"MISSING", "KW_ONLY", "InitVar", "ClassVar", "field", "fields"}
# dir(torch.nn.Module) and dir(torch.nn.Module()) of PyTorch 2.13, without its dunders (a test
# compares the list with the installed torch); a parameter, buffer or submodule must not shadow them
NN_MODULE_ATTRS = {
    "T_destination", "_apply", "_backward_hooks", "_backward_pre_hooks", "_buffers", "_call_impl",
    "_compiled_call_impl", "_forward_hooks", "_forward_hooks_always_called", "_forward_hooks_with_kwargs",
    "_forward_pre_hooks", "_forward_pre_hooks_with_kwargs", "_get_backward_hooks",
    "_get_backward_pre_hooks", "_get_name", "_is_full_backward_hook", "_load_from_state_dict",
    "_load_state_dict_post_hooks", "_load_state_dict_pre_hooks", "_maybe_warn_non_full_backward_hook",
    "_modules", "_named_members", "_non_persistent_buffers_set", "_parameters",
    "_register_load_state_dict_pre_hook", "_register_state_dict_hook", "_replicate_for_data_parallel",
    "_save_to_state_dict", "_slow_forward", "_state_dict_hooks", "_state_dict_pre_hooks", "_version",
    "_wrapped_call_impl", "add_module", "apply", "bfloat16", "buffers", "call_super_init", "children",
    "compile", "cpu", "cuda", "double", "dump_patches", "eval", "extra_repr", "float", "forward",
    "get_buffer", "get_extra_state", "get_parameter", "get_submodule", "half", "ipu", "load_state_dict",
    "modules", "mtia", "named_buffers", "named_children", "named_modules", "named_parameters",
    "parameters", "register_backward_hook", "register_buffer", "register_forward_hook",
    "register_forward_pre_hook", "register_full_backward_hook", "register_full_backward_pre_hook",
    "register_load_state_dict_post_hook", "register_load_state_dict_pre_hook", "register_module",
    "register_parameter", "register_state_dict_post_hook", "register_state_dict_pre_hook",
    "requires_grad_", "set_extra_state", "set_submodule", "share_memory", "state_dict", "to",
    "to_empty", "train", "training", "type", "xpu", "zero_grad"}
# attribute names a module of ours must not take (keywords are refused by safe_identifier)
MODULE_ATTRS = NN_MODULE_ATTRS | {"cfg"}


class CodegenError(Exception):
    """The spec checks but uses something codegen cannot express."""

# ------------------------------------------------------------------ printing sizes

ADD, MUL, UNARY_P, POW, ATOM = 1, 2, 3, 4, 5


class Printer:
    """sympy -> Python. Sizes are whole (`a // b`); scalars are real (`1 / math.sqrt(Dk)`).

    `compact` prints for comments, the way the spec writes sizes (`3*D`, `D/H`).
    Every symbol printed is added to `used`.
    """

    def __init__(self, name, *, real: bool = False, compact: bool = False):
        self.name, self.real, self.compact = name, real, compact
        self.used: set = set()
        self.prec = ATOM   # precedence of the last expression printed

    def __call__(self, e) -> str:
        e = sp.sympify(e)
        if e.has(sp.oo, -sp.oo, sp.zoo, sp.nan):
            raise CodegenError(f"`{e}` is not a finite number")
        if not self.real and e.is_Add and any(sp.fraction(t)[1] != 1 for t in e.args):
            e = sp.together(e)
        text, self.prec = self._expr(e)
        return text

    def _p(self, e, prec: int) -> str:
        text, p = self._expr(e)
        return f"({text})" if p < prec else text

    def _div(self, num, den) -> tuple[str, int]:
        op = "/" if self.compact or self.real else "//"
        sep = op if self.compact else f" {op} "
        return self._p(num, MUL) + sep + self._p(den, UNARY_P), MUL

    def _expr(self, e) -> tuple[str, int]:
        if e.is_Integer:
            return str(int(e)), ATOM if e >= 0 else UNARY_P
        if e.is_Float:
            v = float(e)
            if not math.isfinite(v):
                raise CodegenError(f"the number {sp.Float(e, 6)} is beyond the range of a Python float")
            # as ruff format writes it: no `+` in an exponent (3.4028234663852886e38)
            return repr(v).replace("e+", "e"), ATOM if v >= 0 else UNARY_P
        if e.is_Rational:
            return self._div(sp.Integer(e.p), sp.Integer(e.q))
        if e is sp.pi:
            return ("pi" if self.compact else "math.pi"), ATOM
        if e.is_Symbol:
            self.used.add(e)
            return self.name(e), ATOM
        if e.is_Add:
            terms = e.as_ordered_terms()
            out = self._p(terms[0], ADD)
            for t in terms[1:]:
                if t.could_extract_minus_sign():
                    out += " - " + self._p(-t, MUL)
                else:
                    out += " + " + self._p(t, ADD)
            return out, ADD
        if e.is_Mul or (e.is_Pow and e.exp.is_negative):
            num, den = sp.fraction(e)
            if den != 1:
                return self._div(num, den)
            coeff, rest = e.as_coeff_Mul()
            if coeff == -1:
                return "-" + self._p(rest, UNARY_P), UNARY_P
            factors = ([coeff] if coeff != 1 else []) + list(sp.Mul.make_args(rest))
            sep = "*" if self.compact else " * "
            return sep.join(self._p(f, MUL if k == 0 else UNARY_P) for k, f in enumerate(factors)), MUL
        if e.is_Pow:
            base, exp = e.args
            if exp == sp.Rational(1, 2):
                return ("sqrt(" if self.compact else "math.sqrt(") + self._p(base, 0) + ")", ATOM
            if exp.is_Integer and 2 <= exp <= 8 and not self.compact and not self.real:
                # `P * P`, not `P**2`: an int to a power is a float in TorchScript
                return " * ".join([self._p(base, UNARY_P)] * int(exp)), MUL
            power = self._p(exp, ATOM) if exp.is_Integer else f"({self._p(exp, 0)})"
            left = self._p(base, ATOM)
            # black's rule: no spaces around ** when both sides are names, numbers or attributes
            simple = all(re.fullmatch(r"[A-Za-z_][\w.]*|\d+", t) for t in (left, power))
            return left + ("**" if self.compact or simple else " ** ") + power, POW
        if isinstance(e, sp.Mod):
            a, b = e.args
            sep = "%" if self.compact else " % "
            return self._p(a, MUL) + sep + self._p(b, UNARY_P), MUL
        if isinstance(e, sp.floor):
            num, den = sp.fraction(sp.together(e.args[0]))
            if den != 1:
                sep = "//" if self.compact else " // "
                return self._p(num, MUL) + sep + self._p(den, UNARY_P), MUL
            return f"math.floor({self._p(e.args[0], 0)})", ATOM
        if isinstance(e, (sp.Min, sp.Max)):
            fn = "min" if isinstance(e, sp.Min) else "max"
            return f"{fn}({', '.join(self._p(a, 0) for a in e.args)})", ATOM
        raise CodegenError(f"cannot write the size `{e}` in Python")


def _symbols_in(value) -> set:
    """Every sympy symbol inside a step's detail (sizes, scalars, shapes)."""
    if isinstance(value, sp.Basic):
        return set(value.free_symbols)
    if isinstance(value, dict):
        value = list(value.values())
    if isinstance(value, (list, tuple)):
        out = set()
        for v in value:
            out |= _symbols_in(v)
        return out
    return set()




def _is_special(name: str) -> bool:
    """Dunder names and names Python mangles inside a class body (`__x`)."""
    return name.startswith("__")


def safe_identifier(name: str, reserved=RESERVED, *, private: bool = True) -> str:
    """A Python identifier for a spec name: valid, no keyword, no special name, none of `reserved`.

    Ordinary names come back unchanged; `D'` becomes `D_prime`. A name Python would
    treat specially loses its leading underscores (`__slots__` -> `slots_`, `__tbl`
    -> `tbl_`), and so does any `_name` when `private` is False; a keyword or a
    reserved name gets a trailing `_`.
    """
    name = unicodedata.normalize("NFKC", name).replace("'", "_prime")
    name = "".join(c if ("a" + c).isidentifier() else "_" for c in name)
    if _is_special(name) or (not private and name.startswith("_")):
        name = name.strip("_") + "_"
    if not name.isidentifier() or not name.strip("_"):      # empty, `_`, or a leading digit
        name = "n_" + name.lstrip("_")
    while keyword.iskeyword(name) or keyword.issoftkeyword(name) or name in reserved:
        name += "_"
    return name


def _identifier(name: str) -> str:
    return safe_identifier(name)


def _snake(name: str) -> str:
    s = re.sub(r"(?<=[a-z0-9])([A-Z])", r"_\1", name)
    s = re.sub(r"(?<=[A-Z])([A-Z][a-z])", r"_\1", s)
    return s.lower()


def _camel(stem: str) -> str:
    parts = [p for p in re.split(r"[^A-Za-z0-9]+", stem) if p]
    name = "".join(p[:1].upper() + p[1:] for p in parts) or "Spec"
    return "Spec" + name if name[0].isdigit() else name


def class_name(label: str, reserved=RESERVED) -> str:
    """A class name for a block: its own name, or `<name>Block` if that name is not safe."""
    if safe_identifier(label, reserved) == label:
        return label
    return (safe_identifier(label, reserved).strip("_") or "Spec") + "Block"


class Namer:
    """Hands out distinct safe identifiers: `x`, then `x_2`, `x_3`, ..."""

    def __init__(self, taken=(), *, reserved=RESERVED, private: bool = True):
        self.taken = set(taken)
        self.claimed: set = set()      # the names handed out (taken holds these and the given ones)
        self.reserved, self.private = reserved, private

    def claim(self, want: str) -> str:
        base = safe_identifier(want, self.reserved, private=self.private)
        name, n = base, 2
        while name in self.taken:
            name, n = f"{base}_{n}", n + 1
        self.taken.add(name)
        self.claimed.add(name)
        return name


# ------------------------------------------------------------------ text in the source

def py_str(text: str) -> str:
    """A Python string literal for `text` (repr), in double quotes when that needs no escape."""
    r = repr(str(text))
    if r.startswith("'") and '"' not in text:
        r = '"' + r[1:-1] + '"'
    return r


def doc_text(text: str) -> str:
    """`text` as the content of a \"\"\"docstring\"\"\": quotes, backslashes and control characters
    escaped, so the docstring's value is `text` and nothing ends it early."""
    out = []
    for c in str(text):
        if c in '\\"':
            out.append("\\" + c)
        elif not c.isprintable():
            out.append(repr(c)[1:-1])
        else:
            out.append(c)
    return "".join(out)


def comment_text(text: str) -> str:
    """`text` for a `# comment`: one line, control characters (NUL, line breaks) escaped."""
    return "".join(c if c.isprintable() or c == "\t" else repr(c)[1:-1] for c in str(text))


def module_name(stem: str) -> str:
    """A plain ASCII module name for a file stem (for sys.modules, never for the source)."""
    return re.sub(r"[^A-Za-z0-9_]", "_", _identifier(stem)) or "spec"
