"""SARIF renderer: findings as a SARIF 2.1.0 log (`--format sarif`), for code scanning.

One run for all the files of a command. Rules come from the registry of codes
(shapelang.syntax.diagnostics.CODES); a proved fix becomes a SARIF fix with one
replacement. Columns count characters (`columnKind: unicodeCodePoints`), ends are
exclusive, as in SARIF.
"""
from __future__ import annotations

import os
from pathlib import Path
from urllib.parse import quote

from ..syntax.diagnostics import CODES, Diagnostic
from ..syntax.nodes import Span

SCHEMA_URI = "https://docs.oasis-open.org/sarif/sarif/v2.1.0/errata01/os/schemas/sarif-schema-2.1.0.json"


def information_uri() -> str | None:
    """The project's home page from the installed package's metadata, if it names one."""
    from importlib import metadata

    try:
        urls = metadata.metadata("shapelang").get_all("Project-URL") or []
    except metadata.PackageNotFoundError:
        return None
    for entry in urls:
        label, _, url = entry.partition(",")
        if label.strip().lower() in ("homepage", "documentation", "source") and url.strip():
            return url.strip()
    return None


def _root(start: Path) -> Path:
    """The repository the working folder is in (the folder holding `.git`), else the working
    folder: GitHub maps annotation and SARIF paths from the repository's root."""
    for folder in (start, *start.parents):
        if (folder / ".git").exists():
            return folder
    return start


def relative_path(path: str) -> str:
    """The file as the repository sees it: normalised (`sub/../a.shape` is `a.shape`) and
    relative to the repository's root when inside it, else absolute."""
    cwd = Path.cwd()
    p = Path(os.path.normpath(cwd / path))
    try:
        rel = Path(os.path.relpath(p, _root(cwd)))
    except ValueError:   # another drive
        return p.as_posix()
    return p.as_posix() if rel.as_posix().startswith("../") else rel.as_posix()


def artifact_uri(path: str) -> str:
    """A URI reference: relative when the file is inside the working folder, else file:."""
    rel = relative_path(path)
    return Path(rel).as_uri() if Path(rel).is_absolute() else quote(rel)


def _level(d: Diagnostic) -> str:
    return "error" if d.severity == "error" else "warning"


def _region(span: Span) -> dict:
    end_col = span.end_column
    if span.end_line == span.line and end_col <= span.column:
        end_col = span.column + 1
    line, col = max(1, span.line), max(1, span.column)
    return {"startLine": line, "startColumn": col,
            "endLine": max(span.end_line, line), "endColumn": max(1, end_col)}


def _edit_region(span: Span) -> dict:
    """The exact region a fix replaces: empty for an insertion (SARIF's insertion point)."""
    return {"startLine": span.line, "startColumn": span.column,
            "endLine": span.end_line, "endColumn": span.end_column}


def rules() -> list[dict]:
    return [{"id": code, "shortDescription": {"text": text},
             "defaultConfiguration": {"level": "warning" if code.startswith("W") else "error"}}
            for code, text in CODES.items()]


def result(d: Diagnostic, path: str, rule_index: dict[str, int]) -> dict:
    uri = artifact_uri(path)
    text = d.message
    if d.help:
        text += f"\nhelp: {d.help}"
    out = {"ruleId": d.code, "ruleIndex": rule_index[d.code], "level": _level(d),
           "message": {"text": text},
           "locations": [{"physicalLocation": {"artifactLocation": {"uri": uri},
                                               "region": _region(d.span)}}]}
    related = [{"id": k, "physicalLocation": {"artifactLocation": {"uri": uri},
                                              "region": _region(span)},
                "message": {"text": text}}
               for k, (span, text) in enumerate(d.labels)]
    if related:
        out["relatedLocations"] = related
    if d.fix is not None:
        span, replacement, line = d.fix
        out["fixes"] = [{"description": {"text": f"rewrite the line as: {line.strip()}"},
                         "artifactChanges": [{
                             "artifactLocation": {"uri": uri},
                             "replacements": [{"deletedRegion": _edit_region(span),
                                               "insertedContent": {"text": replacement}}]}]}]
    return out


def sarif_log(findings: list[tuple[str, list[Diagnostic]]], version: str) -> dict:
    """The SARIF log of (path, diagnostics) pairs."""
    table = rules()
    index = {r["id"]: i for i, r in enumerate(table)}
    results = [result(d, path, index) for path, diags in findings for d in diags]
    driver = {"name": "shapelang", "version": version, "rules": table}
    home = information_uri()
    if home:
        driver["informationUri"] = home
    return {"$schema": SCHEMA_URI, "version": "2.1.0",
            "runs": [{"tool": {"driver": driver},
                      "columnKind": "unicodeCodePoints",
                      "results": results}]}
