"""Import, the sizes: which dim name each size of the traced graph gets.

Dynamic sizes come from the input axes (`idx: [B, S]`): torch.export gives each a symbol,
and an axis export found to be a multiple of c (`2*s1`) is named as a whole with an
`assume S % 2 == 0`. Fixed sizes are named from the module's configuration: every
integer attribute of the module, of its submodules and of a `config`/`cfg` object they
hold whose name is in `CONFIG_NAMES` (`n_embd` -> `D`, `n_head` -> `H`, ...). A size is then
written as one of those names, a quotient of two (`D/H`, declared as `dim Dh = D / H`), a
small multiple (`3*D`, `4*D`), or a new name of its own (`F` for the width inside a
feed-forward network, else `N`, `M`, ...). Names with the same value are told apart by
where the number stands (`named`: an image's channel axis is `C`, a convolution's kernel `P`,
a head split `H`, never the channels), then by the name given with `--size`; only when both
leave several names would the spec be a guess, and the import stops and says so.
"""
from __future__ import annotations

import sympy as sp
from torch import nn

from .load import ImportFailure

# configuration attribute -> dim name (docs/import.md shows the table)
CONFIG_NAMES = {
    "n_embd": "D", "n_embed": "D", "d_model": "D", "embed_dim": "D", "hidden_size": "D", "emb_dim": "D",
    "model_dim": "D", "n_state": "D",
    "n_head": "H", "nhead": "H", "num_heads": "H", "n_heads": "H", "num_attention_heads": "H",
    "n_kv_head": "Hkv", "n_kv_heads": "Hkv", "num_key_value_heads": "Hkv",
    "head_dim": "Dh", "head_size": "Dh",
    "kdim": "Dk", "vdim": "Dv",
    "vocab_size": "V", "n_vocab": "V", "ntoken": "V",
    "block_size": "Ctx", "n_ctx": "Ctx", "n_positions": "Ctx", "max_position_embeddings": "Ctx",
    "max_seq_len": "Ctx", "context_length": "Ctx", "max_len": "Ctx",
    "dim_feedforward": "F", "intermediate_size": "F", "d_ff": "F", "ffn_dim": "F", "n_inner": "F",
    "d_hid": "F",
    "n_layer": "L", "n_layers": "L", "num_layers": "L", "num_hidden_layers": "L", "nlayers": "L",
    "depth": "L",
    "n_mels": "C", "in_chans": "C", "in_channels": "C", "num_channels": "C", "n_channels": "C",
    "patch_size": "P",
}
COUNTS = {"L"}                        # names that count layers: never read into a shape
DERIVED = {("D", "H"): "Dh", ("D", "Hkv"): "Dkv", ("H", "Hkv"): "G"}
FRESH = {"ffn": ["F", "F2", "F3"], "model": ["D", "E", "D2"], "vocab": ["V", "V2"], "size": ["N", "M", "K", "N2", "M2", "K2"],
         "image": ["Img", "Img2"]}
PRODUCT_MAX = 16                      # a linear layer's width `k*D` is tried for k up to this
CONTEXT_ONLY = {"C", "P"}
CONTEXT_ROLE = {"channels": "C", "conv": "P"}   # the role that reads each of them first
BLOCK_DIMS = ["T", "U", "N", "M"]
WIDTHS = {"D", "E", "D2", "Dk", "Dv", "C"}   # the sizes whose multiples may be a linear layer's width
ORDER = ["V", "Ctx", "C", "P", "D", "H", "Hkv", "Dh", "Dk", "Dv", "F", "L"]


def config_sizes(module: nn.Module, kwargs: dict | None = None) -> tuple[dict[str, int], dict[str, str]]:
    """dim name -> value, from the integer attributes the module and its parts carry and the
    keyword arguments it was built with (`--arg n_state=384`); and dim name -> the attribute
    or argument it came from."""
    found: dict[str, int] = {}
    source: dict[str, str] = {}

    def take(owner) -> None:
        attrs = getattr(owner, "__dict__", {})
        own: dict[str, int] = {}
        attr: dict[str, str] = {}
        for key, value in attrs.items():
            if key in CONFIG_NAMES and isinstance(value, int) and not isinstance(value, bool) and value > 0:
                own[CONFIG_NAMES[key]] = value
                attr[CONFIG_NAMES[key]] = key
        # kdim/vdim equal to embed_dim are the model width, not sizes of their own
        for extra, same in (("Dk", "D"), ("Dv", "D"), ("Hkv", "H")):   # Phi's kv heads = heads: plain MHA
            if own.get(extra) is not None and own.get(extra) == own.get(same):
                del own[extra]
        for name, value in own.items():
            if name not in found:
                found[name], source[name] = value, attr[name]

    if kwargs:
        holder = type("Arguments", (), {})()
        holder.__dict__.update(kwargs)
        take(holder)
    for sub in module.modules():
        take(sub)
        for holder in ("config", "cfg", "args", "params", "hparams"):
            inner = getattr(sub, holder, None)
            if inner is not None and not isinstance(inner, (nn.Module, int, float, str)):
                take(inner)
    return found, source


def _finite(x) -> int | None:
    x = sp.sympify(x)
    return int(x) if x.is_Integer else None


class Sizes:
    """Names the sizes of one traced module; prints sympy sizes as spec text."""

    def __init__(self, config: dict[str, int], user: dict[str, int]):
        self.values: dict[str, int] = {}     # named size -> example value, in declaration order
        self.derived: dict[str, tuple] = {}  # Dh -> ("D", "H")
        self.used: set[str] = set()
        self.assumes: list[str] = []
        self.symbols: dict = {}              # export symbol -> sympy expression over our names
        self.dynamic: list[str] = []
        self.bounds: list = []               # (size, "<=", number) from export's ranges
        self.exact = False                   # floor(S/2) means S/2 with S even (reshape sizes)
        self.products: dict[str, tuple] = {}  # D -> ("H", "Dh"): a width no attribute gives
        self.fresh: list[str] = []           # names no attribute gave (`F`, `N`), in order
        self.divisors: dict = {}             # a dynamic size -> the stride that divides it
        self.local: dict = {}
        self.block_names: dict = {}          # block-local name -> the expression it stands for                # inside a block: an input's size expression -> its name
        self.memo: dict[int, str] = {}       # a value a role named (`Dh`, `4*D`): read so everywhere
        self.memo_uses: dict[int, set] = {}
        for name, value in list(user.items()) + list(config.items()):
            self.values.setdefault(name, value)
        for (a, b), name in DERIVED.items():
            va, vb = self.values.get(a), self.values.get(b)
            if va and vb and va % vb == 0 and name in self.values and self.values[name] == va // vb:
                del self.values[name]        # head_dim = n_embd // n_head: a derived size
        self.fresh_taken = set(self.values)
        self.user = set(user)                # the names given with --size: they win a tie

    # ------------------------------------------------------------------ dynamic axes
    def name_axis(self, expr, name: str, value: int) -> None:
        """Input axis `name` has the export size `expr` (a symbol, or c*symbol)."""
        e = sp.sympify(expr)
        if name not in self.values:
            self.values[name] = value
            self.dynamic.append(name)
        self.fresh_taken.add(name)
        self.used.add(name)
        if e.is_Symbol:
            self.symbols.setdefault(e, sp.Symbol(name, positive=True, integer=True))
            return
        coeff, rest = e.as_coeff_Mul()
        if rest.is_Symbol and coeff.is_Integer and coeff > 1:
            if rest not in self.symbols:
                self.symbols[rest] = sp.Symbol(name, positive=True, integer=True) / int(coeff)
                self.assumes.append(f"{name} % {int(coeff)} == 0")
            return
        raise ImportFailure(f"export gives the input axis `{name}` the size {e}, which the spec cannot name")

    def ranges(self, range_constraints) -> None:
        """`assume` lines for the bounds export found on the dynamic sizes."""
        for sym, vr in range_constraints.items():
            if sym not in self.symbols:
                continue
            mine = self.symbols[sym]
            upper, lower = _finite(vr.upper), _finite(vr.lower)
            # export's own lower bound of 2 (sizes 0 and 1 would be specialised) is no guard
            # written with the header, when the sizes of the weights have their names
            if lower is not None and lower > 2:
                self.bounds.append((mine, ">=", lower))
            if upper is not None and upper < 2**62:
                self.bounds.append((mine, "<=", upper))

    def relation(self, expr) -> str | None:
        """A runtime assertion export deferred (`s1 <= 1024`), as the text of an `assume`."""
        e = sp.sympify(expr)
        ops = {sp.Le: "<=", sp.Lt: "<", sp.Ge: ">=", sp.Gt: ">", sp.Eq: "==", sp.Ne: "!="}
        for cls, sign in ops.items():
            if isinstance(e, cls):
                lhs, rhs = e.args
                if isinstance(lhs, sp.Mod) and rhs == 0 and sign == "==":
                    return f"{self.text(lhs.args[0])} % {self.text(lhs.args[1])} == 0"
                return f"{self.text(lhs)} {sign} {self.text(rhs)}"
        return None

    # ------------------------------------------------------------------ fixed sizes
    def name_int(self, n: int, role: str | None = None) -> str:
        """A fixed size as spec text: a named size, a size a role derived before (a quotient
        such as `Dh`, a linear layer's `4*D`), a multiple of a width for a linear layer's
        width, or a new name. Sizes are never read as quotients or multiples only because
        the numbers fit: a 16 that equals D/H is `Dh` only after a reshape split D into H
        heads of 16 (`ratio`)."""
        if n <= 1:
            return str(n)
        hits = self.named(n, role)
        if len(hits) > 1:
            raise ImportFailure(
                f"the sizes {', '.join(hits)} are all {n}, so the spec cannot tell them apart: build "
                f"the module with distinct sizes (or name the size with --size NAME={n})")
        if hits:
            self.used.add(hits[0])
            return hits[0]
        if n in self.memo:
            self.used |= self.memo_uses[n]
            return self.memo[n]
        if role == "ffn":
            for k in range(2, PRODUCT_MAX + 1):
                widths = [name for name, v in self._fixed() if v * k == n and name in WIDTHS]
                if n % k == 0 and len(widths) == 1:
                    return self._remember(n, f"{k}*{widths[0]}", {widths[0]})
        # a number in an intermediate shape stays a number (the 3 of q, k, v); a width of a
        # weight with no name gets one of its own
        return self._fresh(n, role) if role and role not in ("conv", "input") else str(n)

    def _remember(self, n: int, text: str, uses: set) -> str:
        self.memo[n] = text
        self.memo_uses[n] = set(uses)
        self.used |= uses
        return text

    def named(self, n: int, role: str | None = "size") -> list[str]:
        """The fixed sizes a number `n` standing in `role` may be. Equal sizes are told apart by
        the role first (timm's vit_tiny: 3 heads and 3 channels; the channel axis of an image is
        `C`, a head split's `H`), then by the names given with --size."""
        hits = [k for k, v in self._fixed(role) if v == n]
        if len(hits) < 2:
            return hits
        context = [h for h in hits if h in CONTEXT_ONLY]
        if CONTEXT_ROLE.get(role) in context:
            hits = [CONTEXT_ROLE[role]]
        elif len(context) < len(hits):
            hits = [h for h in hits if h not in CONTEXT_ONLY]
        given = [h for h in hits if h in self.user]
        return given if len(given) == 1 else hits

    def _fixed(self, role: str | None = "size") -> list[tuple[str, int]]:
        """The fixed sizes a number in a shape may be: no layer count, no dynamic size; the
        channels and the patch side only where a role asks for them (an input's axes, a
        convolution's arguments), so the 3 of q, k, v is not read as 3 colour channels."""
        return [(k, v) for k, v in self.values.items() if k not in COUNTS and k not in self.dynamic
                and (role is not None or k not in CONTEXT_ONLY)]

    def bound(self, n: int) -> str:
        """A bound in an `assume`: a named fixed size of that value, else the number."""
        hits = self.named(n)
        if len(hits) == 1:
            self.used.add(hits[0])
            return hits[0]
        return str(n)

    def ratio(self, whole: int, part: int) -> str | None:
        """The size `whole / part` where the graph derives it (a reshape that splits D into H
        heads, a repeat of Hkv heads up to H): `Dh`, `G` (declared with their `assume`), or
        `D/M` for a pair with no usual name; None when `whole` or `part` has no name."""
        if not (isinstance(whole, int) and isinstance(part, int)) or part <= 1 or whole % part:
            return None
        n = whole // part
        if n in self.memo:
            return self.name_int(n)
        names = {}
        for v in (whole, part):
            hits = self.named(v)
            if len(hits) != 1:
                return None
            names[v] = hits[0]
        a, b = names[whole], names[part]
        name = DERIVED.get((a, b))
        hits = self.named(n)
        if hits == [name]:
            return self.name_int(n)        # head_dim given beside n_embd and n_head
        if hits:
            raise ImportFailure(
                f"{a}/{b} and {', '.join(hits)} are all {n}, so the spec cannot tell them apart: build "
                f"the module with distinct sizes (or name the size with --size NAME={n})")
        if name and name not in self.values and name not in self.derived:
            self.derived[name] = (a, b)
            return self._remember(n, name, {a, b})
        self.assumes.append(f"{a} % {b} == 0")
        return self._remember(n, f"{a}/{b}", {a, b})

    def _fresh(self, n: int, role: str | None) -> str:
        if role == "model" and "D" not in self.values:
            for (a, b), part in DERIVED.items():     # head_dim and n_heads given, the width not
                if a == "D" and b in self.values and part in self.values and self.values[b] * self.values[part] == n:
                    self.values["D"] = n
                    self.products["D"] = (b, part)
                    self.fresh_taken.add("D")
                    self.used |= {"D", b, part}
                    return "D"
        for name in FRESH.get(role, []) + FRESH["size"]:
            if name not in self.fresh_taken:
                self.fresh_taken.add(name)
                self.fresh.append(name)
                self.values[name] = n
                self.used.add(name)
                return name
        raise ImportFailure(f"too many unnamed sizes (at {n}): name them with --size NAME=VALUE")

    def count(self, n: int) -> str:
        """A layer count: `L` when the configuration says so."""
        hits = [k for k, v in self.values.items() if v == n and k in COUNTS]
        if hits:
            self.used.add(hits[0])
            return hits[0]
        return str(n)

    # ------------------------------------------------------------------ printing
    def text(self, e, role: str | None = None) -> str:
        """A size of the graph (an int, a symbol, an expression of them) as spec text."""
        if isinstance(e, int):
            return self.name_int(e, role)
        e = sp.sympify(e)
        if e.free_symbols:
            unknown = e.free_symbols - set(self.symbols) - {s for s in e.free_symbols
                                                            if str(s) in self.values}
            if unknown:
                raise ImportFailure(f"the size {e} depends on {', '.join(map(str, unknown))}, which no "
                                    "input axis names (a data-dependent size)")
            e = sp.expand(self._whole(e.xreplace(self.symbols)))
            e = sp.expand(e.xreplace(self.local))
        return self._print(e, role, top=True)

    def divisible(self, expr, k: int, k_text: str) -> None:
        """`assume S % k == 0` for a dynamic size a strided convolution divides (W202's
        assumption): its length is then `S/k`, as Whisper's stride-2 convolution over an even
        number of frames, and the floors export wrote for it are simplified with it."""
        e = sp.sympify(expr).xreplace(self.symbols)
        if not e.is_Symbol or k <= 1:
            return
        if e not in self.divisors:
            self.divisors[e] = k
            self.assumes.append(f"{e} % {k_text} == 0")

    def _whole(self, e):
        """Floors of a size known to be a multiple of k (`(S - 1) // 2 + 1` with S even: S/2)."""
        if not self.divisors or not e.has(sp.floor) and not any(
                type(a).__name__ == "FloorDiv" for a in sp.preorder_traversal(e)):
            return e
        e = e.replace(lambda a: type(a).__name__ == "FloorDiv", lambda a: sp.floor(a.args[0] / a.args[1]))
        whole = {s: sp.Dummy(positive=True, integer=True) for s in self.divisors}
        e = e.xreplace({s: k * whole[s] for s, k in self.divisors.items()})
        return sp.expand(e.xreplace({whole[s]: s / k for s, k in self.divisors.items()}))

    def block_dims(self, exprs: list, taken: set) -> dict:
        """Names for the sizes of a block's inputs that are expressions (`(S - 1) // 2 + 1`, the
        frames after a strided convolution): a dim named only in a block's input shapes is
        bound at every call, so the block reads `x: [B, T, D]`. Returns the old local names,
        to restore after the block."""
        saved = dict(self.local)
        for expr in exprs:
            e = sp.sympify(expr)
            if not e.free_symbols or e.is_Symbol:
                continue
            key = sp.expand(self._whole(e.xreplace(self.symbols)))
            if key.is_Symbol or key.xreplace(self.local).is_Symbol or not key.free_symbols:
                continue
            used = set(self.values) | {str(v) for v in self.local.values()} | taken
            name = next(n for n in BLOCK_DIMS + [f"T{k}" for k in range(2, 99)] if n not in used)
            self.local[key] = sp.Symbol(name, positive=True, integer=True)
            if name not in self.block_names:
                self.block_names[name] = key
        return saved

    def binds(self, e):
        """The name (a symbol) an input axis of size `e` binds in the block being written, or
        None for a fixed size or an expression."""
        e = e.node.expr if hasattr(e, "node") else e
        if isinstance(e, int):
            return None
        e = sp.sympify(e)
        if not e.free_symbols:
            return None
        e = sp.expand(self._whole(e.xreplace(self.symbols))).xreplace(self.local)
        return e if e.is_Symbol else None

    def bind_like(self, axes: list, first: list) -> None:
        """Read a block's input sizes with the names its class's first call gave them (`axes`
        and `first`: the symbols each input axis binds, None where fixed), so that the calls of
        one module class at other sizes (the decoder's length T where the encoder had S) write
        one block: its dims are bound at each call. Nothing changes unless the two name the
        axes one to one."""
        if len(axes) != len(first):
            return
        remap = {}
        for a, b in zip(axes, first):
            if (a is None) != (b is None) or a is not None and remap.setdefault(a, b) != b:
                return
        if len(set(remap.values())) != len(remap):
            return
        remap = {a: b for a, b in remap.items() if a != b}
        if remap:
            self.local = {k: remap.get(v, v) for k, v in self.local.items()} | \
                {a: b for a, b in remap.items() if a not in self.local}

    def bound_name(self, taken: set, note: str):
        """A name (a symbol) for a size a block's input binds at every call that no other size
        of the spec has (`dim T  # ...`): the first dynamic size not in `taken`, else a new one."""
        name = next((n for n in self.dynamic if n not in taken), None)
        if name is None:
            used = set(self.values) | {str(v) for v in self.local.values()} | set(self.block_names) | taken
            name = next(n for n in BLOCK_DIMS + [f"T{k}" for k in range(2, 99)] if n not in used)
            self.block_names[name] = note
        symbol = sp.Symbol(name, positive=True, integer=True)
        if name not in self.values:
            self.symbols.setdefault(symbol, symbol)
        return symbol

    def _print(self, e, role, top=False) -> str:
        if e.is_Integer:
            return self.name_int(int(e), role) if top else self._coeff(int(e))
        if e.is_Symbol:
            self.used.add(e.name)
            return e.name
        if e.is_Add:
            terms = e.as_ordered_terms()
            out = self._print(terms[0], role)
            for t in terms[1:]:
                if t.could_extract_minus_sign():
                    out += " - " + self._wrap(-t, role)
                else:
                    out += " + " + self._print(t, role)
            return out
        if e.is_Mul:
            num, den = sp.fraction(e)
            if den != 1:
                return f"{self._wrap(num, role)}/{self._wrap(den, role, tight=True)}"
            coeff, rest = e.as_coeff_Mul()
            parts = ([] if coeff == 1 else [self._coeff(int(coeff))]) + \
                [self._wrap(f, role, tight=True) for f in sp.Mul.make_args(rest)]
            return "*".join(parts)
        if isinstance(e, sp.floor) or type(e).__name__ == "FloorDiv":   # torch's own S // 2
            num, den = sp.fraction(sp.together(e.args[0] if isinstance(e, sp.floor) else e.args[0] / e.args[1]))
            if den.is_Integer and den > 1:
                if self.exact:      # a reshape to it needs it whole: that is a guard of the model
                    self.assumes.append(f"{self._print(num, role)} % {int(den)} == 0")
                    return f"{self._wrap(num, role)}/{int(den)}"
                return f"{self._wrap(num, role)} // {int(den)}"
        if e.is_Pow and e.exp.is_Integer and e.exp > 1:
            return f"{self._wrap(e.base, role, tight=True)}**{int(e.exp)}"
        raise ImportFailure(f"the size {e} has no spec form")

    def _wrap(self, e, role, tight=False) -> str:
        text = self._print(e, role)
        if e.is_Add or (tight and (e.is_Mul or e.is_Pow)) or text.startswith("-"):
            return f"({text})"
        return text

    def _coeff(self, n: int) -> str:
        """An integer factor inside an expression: a named size when exactly one has that value."""
        if n < 0:
            return "-" + self._coeff(-n)
        hits = self.named(n)
        if n > 3 and len(hits) == 1:      # 2 and 3 are a stride or q, k, v far more often than a size
            self.used.add(hits[0])
            return hits[0]
        return str(n)

    # ------------------------------------------------------------------ the spec's header
    def ordered(self) -> list[str]:
        """Dynamic sizes first, then the model's sizes in the usual reading order."""
        rank = {n: k for k, n in enumerate(ORDER)}
        fixed = sorted((n for n in self.values if n not in self.dynamic),
                       key=lambda n: (rank.get(n, len(ORDER)), list(self.values).index(n)))
        return list(self.dynamic) + fixed

    def header(self, comments: dict[str, str]) -> list[str]:
        """`dim`, `assume` and `example` lines for every size the spec uses."""
        ranges = [f"{self.text(e)} {op} {self.bound(n)}" for e, op, n in self.bounds]
        lines = []
        # fixed sizes written with their values: all (True) or some (a set of names)
        pinned_set = getattr(self, "pinned", False)
        def pinned_name(n):
            return n not in self.dynamic and (pinned_set is True or (pinned_set and n in pinned_set))
        for name in self.ordered():
            if name in self.used:
                note = comments.get(name)
                value = f" = {self.values[name]}" if pinned_name(name) else ""
                if name in self.products:
                    value = " = {} * {}".format(*self.products[name])
                lines.append(f"dim {name}{value}" + (f"  # {note}" if note else ""))
        for name, (a, b) in self.derived.items():
            lines.append(f"dim {name} = {a} / {b}")
        for name, key in self.block_names.items():    # bound at each call: no example value
            what = key if isinstance(key, str) else self._print(sp.expand(key), None, top=True)
            lines.append(f"dim {name}  # a block input's size, {what} where it is called")
        assumes = [f"{a} % {b} == 0" for a, b in self.derived.values()] + self.assumes + ranges
        seen = set()
        for a in assumes:
            if a not in seen:
                seen.add(a)
                lines.append(f"assume {a}")
        example = [f"{n}={self.values[n]}" for n in self.ordered() if n in self.used
                   and not pinned_name(n) and n not in self.products]
        if example:
            lines.append("example " + ", ".join(example))
        return lines
