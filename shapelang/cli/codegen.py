"""`shapelang codegen` and `shapelang run`: 0 ok, 1 findings, 2 usage or I/O."""
from __future__ import annotations

import json
import sys

from ..codegen.generator import generate, write_atomic
from ..codegen.naming import CodegenError
from ..codegen.runner import (
    SizesError,
    _import_torch,
    parse_sizes,
    report_json,
    report_text,
    resolve_sizes,
    run_spec,
)
from .common import checked_spec


def codegen_command(args) -> int:
    """`shapelang codegen` and `shapelang run`: 0 ok, 1 findings, 2 usage or I/O."""
    spec = checked_spec(args.file, out=sys.stderr,
                        refusal=f"shapelang: no code for {args.file}: it does not check")
    if isinstance(spec, int):
        return spec
    try:
        source = generate(spec).source
    except CodegenError as err:
        print(f"shapelang: cannot generate code for {args.file}: {err}", file=sys.stderr)
        return 1
    if not args.output:
        sys.stdout.write(source)
        return 0
    try:
        write_atomic(args.output, source, force=args.force)
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
        _import_torch()
    except ImportError:
        print("shapelang: `run` needs PyTorch: pip install 'shapelang[torch]'", file=sys.stderr)
        return 2
    try:
        sizes = resolve_sizes(spec, parse_sizes(args.sizes))
    except SizesError as err:
        print(f"shapelang: {err}", file=sys.stderr)
        return 2
    try:
        rep = run_spec(spec, sizes)
    except CodegenError as err:
        print(f"shapelang: cannot generate code for {args.file}: {err}", file=sys.stderr)
        return 1
    if getattr(args, "format", "text") == "json":
        sys.stdout.write(json.dumps(report_json(rep), indent=2) + "\n")
    else:
        sys.stdout.write(report_text(rep))
    return 0 if rep.ok else 1
