"""`shapelang codegen` and `shapelang run`: 0 ok, 1 findings, 2 usage or I/O.

Neither ever shows a traceback: a module that cannot be written, built or run
is reported as a finding (exit 1).
"""
from __future__ import annotations

import json
import os
import sys

from .. import api
from .common import checked_spec


def _internal(what: str, path: str, err: Exception) -> int:
    first = str(err).strip().split("\n")[0][:300]
    print(f"shapelang: {what} {path} failed: {type(err).__name__}{': ' + first if first else ''} "
          "(an internal error of shapelang; please report it with the spec)", file=sys.stderr)
    return 1


def _same_file(a: str, b: str) -> bool:
    """Whether writing to `a` would replace or write through to the file `b`."""
    try:
        if os.path.realpath(a) == os.path.realpath(b):
            return True
        return os.path.exists(a) and os.path.samefile(a, b)
    except (OSError, ValueError):
        return False


def _output_problem(output: str, spec_path: str) -> str | None:
    """Why `-o output` cannot be written, before anything is generated (None: it can)."""
    if os.path.isdir(output):
        stem = os.path.splitext(os.path.basename(spec_path))[0] or "model"
        return (f"{output} is a directory; give the file to write, e.g. "
                f"-o {os.path.join(output, stem + '.py')}")
    if _same_file(output, spec_path):
        return f"{output} is the spec itself; give another file name (e.g. a .py file) for the module"
    return None


def codegen_command(args) -> int:
    """`shapelang codegen` and `shapelang run`: 0 ok, 1 findings, 2 usage or I/O."""
    to_stdout = not args.output or args.output == "-"
    if not to_stdout:
        problem = _output_problem(args.output, args.file)
        if problem:
            print(f"shapelang: {problem}", file=sys.stderr)
            return 2
    spec = checked_spec(args.file, out=sys.stderr,
                        refusal=f"shapelang: no code for {args.file}: it does not check")
    if isinstance(spec, int):
        return spec
    try:
        source = api.codegen(spec, names=getattr(args, "names", "dotted"),
                          attention=getattr(args, "attention", "sdpa")).source
    except api.CodegenError as err:
        print(f"shapelang: cannot generate code for {args.file}: {err}", file=sys.stderr)
        return 1
    except Exception as err:  # noqa: BLE001 - never a traceback
        return _internal("generating code for", args.file, err)
    if to_stdout:
        sys.stdout.write(source)
        return 0
    try:
        api.write_atomic(args.output, source, force=args.force)
    except FileExistsError:
        print(f"shapelang: {args.output} exists; add --force to overwrite it", file=sys.stderr)
        return 2
    except OSError as err:
        print(f"shapelang: cannot write {args.output}: {err.strerror or err}", file=sys.stderr)
        return 2
    print(f"wrote {args.output}", file=sys.stderr)
    return 0


def run_command(args) -> int:
    spec = checked_spec(args.file)
    if isinstance(spec, int):
        return spec
    try:
        api.torch_available()
    except ImportError:
        print("shapelang: `run` needs PyTorch: pip install 'shapelang[torch]'", file=sys.stderr)
        return 2
    try:
        sizes = api.resolve_sizes(spec, api.parse_sizes(args.sizes))
        rep = api.run_spec(spec, sizes)
    except api.SizesError as err:
        print(f"shapelang: {err}", file=sys.stderr)
        return 2
    except api.CodegenError as err:
        print(f"shapelang: cannot generate code for {args.file}: {err}", file=sys.stderr)
        return 1
    except Exception as err:  # noqa: BLE001 - never a traceback
        return _internal("running", args.file, err)
    if getattr(args, "format", "text") == "json":
        sys.stdout.write(json.dumps(api.report_json(rep), indent=2) + "\n")
    else:
        sys.stdout.write(api.report_text(rep))
    return 0 if rep.ok else 1
