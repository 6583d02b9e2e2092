"""`shapelang import MODULE:CLASS --input ...`: an existing nn.Module as a spec.

Exit codes: 0 the spec is written and proved faithful (its generated module, given the
original's weights, computes the same outputs at two sets of sizes, with the same
parameter count); 1 the module cannot be imported faithfully (nothing written), or the
spec is written with `opaque` steps (listed on stderr); 2 usage or I/O. torch is imported
by this command only.
"""
from __future__ import annotations

import json
import os
import sys
import warnings

from .. import api


def add_parser(sub) -> None:
    c = sub.add_parser("import", help="write the spec of an existing PyTorch module (needs torch)",
                       description="trace a PyTorch nn.Module with torch.export and write its spec; "
                       "exit 0 written and proved faithful, 1 not importable faithfully (or written "
                       "with opaque steps), 2 usage or I/O error")
    c.add_argument("target", metavar="MODULE:CLASS",
                   help="a class, a factory or a module instance: pkg.models:GPT, models.py:make_gpt")
    c.add_argument("--input", action="append", default=[], metavar="NAME=2x8:int",
                   help="an example input of forward (in order): its sizes, and int or bool if not float")
    c.add_argument("--dims", action="append", default=[], metavar="NAME=B,S",
                   help="the dim names of an input's axes (`_` for a fixed axis); default: B, S")
    c.add_argument("--size", action="append", default=[], metavar="F=2048",
                   help="a name for a fixed size the module's configuration does not name")
    c.add_argument("--arg", action="append", default=[], metavar="d_model=64",
                   help="a keyword argument for the class or factory")
    c.add_argument("--call", action="append", default=[], metavar="need_weights=false",
                   help="a keyword argument for forward")
    c.add_argument("-o", "--output", metavar="OUT.shape", help="write the spec here instead of stdout")
    c.add_argument("--weights", metavar="OUT.json",
                   help="write the weight mapping here (default: beside -o, as NAME.weights.json)")
    c.add_argument("--force", action="store_true", help="overwrite existing output files")


def _dims(items) -> dict:
    out = {}
    for item in items:
        name, eq, axes = item.partition("=")
        if not eq or not name.strip():
            raise ValueError(f"--dims {item}: write it as NAME=B,S")
        out[name.strip()] = [a.strip() for a in axes.split(",")]
    return out


def _sizes(items) -> dict:
    out = {}
    for item in items:
        for part in item.split(","):
            name, eq, value = part.partition("=")
            if not eq or not name.strip().isidentifier() or not value.strip().isdigit() or int(value) < 2:
                raise ValueError(f"--size {part}: write it as NAME=VALUE, a whole number from 2")
            out[name.strip()] = int(value)
    return out


def command(args) -> int:
    # a torch built without numpy warns while tracing; nothing the import does needs numpy
    warnings.filterwarnings("ignore", message="Failed to initialize NumPy")
    try:
        import torch  # noqa: F401
    except ImportError:
        print("shapelang: import needs PyTorch: pip install 'shapelang[torch]'", file=sys.stderr)
        return 2
    write_atomic, import_module, parse_kwargs = api.write_atomic, api.import_module, api.parse_kwargs
    ImportFailure, UsageError = api.ImportFailure, api.UsageError

    weights_path = args.weights
    if weights_path is None and args.output:
        weights_path = os.path.splitext(args.output)[0] + ".weights.json"
    for path in (args.output, weights_path):
        if path and os.path.isdir(path):
            print(f"shapelang: {path} is a directory; give a file name", file=sys.stderr)
            return 2
        if path and os.path.lexists(path) and not args.force:
            print(f"shapelang: {path} exists (use --force to replace it)", file=sys.stderr)
            return 2
    try:
        result = import_module(args.target, args.input, dims=_dims(args.dims), sizes=_sizes(args.size),
                               kwargs=parse_kwargs(args.arg), call_kwargs=parse_kwargs(args.call),
                               path=os.path.basename(args.output or "imported.shape"),
                               command=_command_text(args))
    except (UsageError, ValueError) as e:
        print(f"shapelang: {e}", file=sys.stderr)
        return 2
    except ImportFailure as e:
        print(f"shapelang: cannot import {args.target} faithfully: {e}", file=sys.stderr)
        return 1
    except (MemoryError, RecursionError) as e:
        print(f"shapelang: importing {args.target} ran out of {'memory' if isinstance(e, MemoryError) else 'stack'}"
              "; try smaller example sizes", file=sys.stderr)
        return 2
    except Exception as e:  # noqa: BLE001 - the user's module ran; report, never a traceback
        text = str(e).strip().splitlines()
        print(f"shapelang: importing {args.target} failed: {type(e).__name__}: {text[0][:400] if text else ''}",
              file=sys.stderr)
        return 2
    try:
        if args.output:
            write_atomic(args.output, result.text, force=args.force)
        else:
            sys.stdout.write(result.text)
        if weights_path:
            write_atomic(weights_path, json.dumps(result.mapping, indent=1) + "\n", force=args.force)
    except OSError as err:
        print(f"shapelang: cannot write: {err}", file=sys.stderr)
        return 2
    where = f"{args.output} and {weights_path}" if args.output else (weights_path or "stdout")
    if result.opaque:
        opaque = [line.strip()[2:] for line in result.text.splitlines() if line.strip().startswith("# opaque:")]
        print(f"shapelang: {result.class_name} imported with {result.opaque} opaque step(s), which the spec "
              f"keeps with their shapes only (written to {where}); its module cannot be generated until "
              "they are replaced:", file=sys.stderr)
        for line in opaque:
            print(f"  {line}", file=sys.stderr)
        return 1
    v = result.verified
    at = "; ".join(", ".join(f"{k}={x}" for k, x in s.items() if k in v.sizes[-1]) for s in v.sizes)
    if v.constant:
        print(f"shapelang: {result.class_name} imported to {where}, but not proved faithful: its output is "
              f"constant at {at} even with its constant parameters randomised, so comparing it with the "
              "generated module's tells nothing", file=sys.stderr)
        return 1
    noted = f" (with {v.randomised} constant parameter(s) randomised first)" if v.randomised else ""
    print(f"shapelang: {result.class_name} imported to {where}: {len(result.mapping['steps'])} learned "
          f"steps, {v.params_spec} parameters (the spec's count and the module's agree); the generated "
          f"module with these weights matches the original{noted} to {v.max_diff:.1e} at {at}", file=sys.stderr)
    return 0


def _command_text(args) -> str:
    parts = ["shapelang import", args.target]
    parts += [f"--input {x}" for x in args.input]
    parts += [f"--dims {x}" for x in args.dims]
    parts += [f"--size {x}" for x in args.size]
    parts += [f"--arg {x}" for x in args.arg]
    parts += [f"--call {x}" for x in args.call]
    return " ".join(parts)
