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


DOCS_ENV = "SHAPELANG_DOCS_URL"


def docs_uri() -> str | None:
    """Where shapelang's docs/ folder is published, as an absolute http(s) URL ending in `/`:
    `$SHAPELANG_DOCS_URL` (the example workflow sets it), else a `Documentation` or `Homepage`
    Project-URL of the installed package. None when neither names one: SARIF's `helpUri` and
    `informationUri` must be absolute, and an invented address would send readers nowhere."""
    url = os.environ.get(DOCS_ENV, "").strip()
    if not url:
        from importlib import metadata

        try:
            entries = metadata.metadata("shapelang").get_all("Project-URL") or []
        except metadata.PackageNotFoundError:
            entries = []
        for entry in entries:
            label, _, value = entry.partition(",")
            if label.strip().lower() in ("documentation", "homepage") and value.strip():
                url = value.strip()
                break
    if not url.startswith(("https://", "http://")):
        return None
    return url if url.endswith("/") else url + "/"


def anchor(code: str, title: str) -> str:
    """The anchor GitHub's Markdown gives the heading `### CODE: title` in docs/diagnostics.md."""
    text = f"{code}: {title}".lower()
    return "".join(c if c.isalnum() or c in "-_" else "-" if c == " " else "" for c in text)


def rule_name(title: str) -> str:
    """A rule's `name`: its title in PascalCase (`matmul operands do not fit` is
    `MatmulOperandsDoNotFit`), as SARIF's rule-name convention asks."""
    words = "".join(c if c.isalnum() else "" if c == "'" else " " for c in title).split()
    return "".join(w[:1].upper() + w[1:] for w in words)


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
    """One rule per code, with what `shapelang explain CODE` says: its meaning as the full
    description, the whole explanation (wrong and right examples) as the help, and a link to the
    code's section of docs/diagnostics.md where the docs' address is known (`docs_uri`)."""
    from ..checker.explanations import EXPLANATIONS, markdown, text

    docs = docs_uri()
    out = []
    for code, title in CODES.items():
        rule = {"id": code, "name": rule_name(title), "shortDescription": {"text": title},
                "fullDescription": {"text": " ".join(EXPLANATIONS[code].means.split())},
                "help": {"text": text(code, title), "markdown": markdown({code: title})},
                "defaultConfiguration": {"level": "warning" if code.startswith("W") else "error"},
                # an error is proved for every size; a warning reads intent, and may be meant
                "properties": {"tags": ["correctness"],
                               "precision": "high" if code.startswith("W") else "very-high"}}
        if docs:
            rule["helpUri"] = f"{docs}diagnostics.md#{anchor(code, title)}"
        out.append(rule)
    return out


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
    home = docs_uri()
    if home:
        driver["informationUri"] = home
    return {"$schema": SCHEMA_URI, "version": "2.1.0",
            "runs": [{"tool": {"driver": driver},
                      "columnKind": "unicodeCodePoints",
                      "results": results}]}
