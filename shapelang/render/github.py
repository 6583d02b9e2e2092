"""GitHub Actions renderer: one workflow command per finding (`--format github`).

`::error file=F,line=L,col=C,endLine=..,endColumn=..,title=E101::message` shows
the finding as an annotation on the pull request's diff. Values are escaped as
GitHub's toolkit does: %, CR and LF in the message; also `:` and `,` in properties.
"""
from __future__ import annotations

from ..syntax.diagnostics import Diagnostic


def escape_data(text: str) -> str:
    return text.replace("%", "%25").replace("\r", "%0D").replace("\n", "%0A")


def escape_property(text: str) -> str:
    return escape_data(text).replace(":", "%3A").replace(",", "%2C")


def annotation(d: Diagnostic, path: str) -> str:
    kind = "error" if d.severity == "error" else "warning"
    s = d.span
    props = {"file": path, "line": s.line, "col": s.column, "endLine": s.end_line,
             "endColumn": s.end_column, "title": d.code}
    if s.end_line != s.line:   # GitHub uses columns only on a one-line annotation
        del props["col"], props["endColumn"]
    head = ",".join(f"{k}={escape_property(str(v))}" for k, v in props.items())
    message = d.message + (f"\nhelp: {d.help}" if d.help else "")
    if d.fix is not None:
        message += f"\nfix: {d.fix[2].strip()}"
    return f"::{kind} {head}::{escape_data(message)}"


def github_text(findings: list[tuple[str, list[Diagnostic]]]) -> str:
    lines = [annotation(d, path) for path, diags in findings for d in diags]
    return "".join(line + "\n" for line in lines)
