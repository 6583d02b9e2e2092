"""`--format sarif` and `--format github`: findings for code scanning and pull requests."""
from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from shapelang import api
from shapelang.render.github import annotation, escape_data, escape_property
from shapelang.render.sarif import sarif_log
from shapelang.syntax.diagnostics import CODES, Diagnostic
from shapelang.syntax.nodes import Span

ROOT = Path(__file__).resolve().parent.parent
SCHEMA = ROOT / "tests" / "data" / "sarif-schema-2.1.0.json"
CASES = sorted(p for d in ("tests/cases", "tests/golden", "tests/provenance/bugs")
               for p in (ROOT / d).glob("*.shape"))


def _validator():
    jsonschema = pytest.importorskip("jsonschema", reason="the `ci` extra (jsonschema) is missing")
    if not SCHEMA.exists():
        pytest.skip("the official SARIF 2.1.0 schema is not vendored at tests/data/")
    return jsonschema.Draft4Validator(json.loads(SCHEMA.read_text()),
                                      format_checker=jsonschema.Draft4Validator.FORMAT_CHECKER)


@pytest.fixture(scope="module")
def logs():
    old = os.getcwd()
    os.chdir(ROOT)
    try:
        out = []
        for path in CASES:
            rel = path.relative_to(ROOT).as_posix()
            spec = api.check_file(rel)
            if spec.diagnostics:
                out.append((rel, spec, sarif_log([(rel, list(spec.diagnostics))], "0.1.0")))
        return out
    finally:
        os.chdir(old)


def test_every_case_with_findings_gives_its_results(logs):
    assert len(logs) >= 30
    assert any(d.severity != "error" for _, spec, _ in logs for d in spec.diagnostics)
    assert any(d.fix is not None for _, spec, _ in logs for d in spec.diagnostics)
    for rel, spec, log in logs:
        run = log["runs"][0]
        rules = run["tool"]["driver"]["rules"]
        assert [r["id"] for r in rules] == list(CODES)
        assert len(run["results"]) == len(spec.diagnostics)
        for d, r in zip(spec.diagnostics, run["results"]):
            assert r["ruleId"] == d.code and rules[r["ruleIndex"]]["id"] == d.code
            assert r["level"] == ("error" if d.severity == "error" else "warning")
            loc = r["locations"][0]["physicalLocation"]
            assert loc["artifactLocation"]["uri"] == rel
            assert (loc["region"]["startLine"], loc["region"]["startColumn"]) == (
                d.span.line, d.span.column)
            assert r["message"]["text"].startswith(d.message)
            if d.fix is not None:
                rep = r["fixes"][0]["artifactChanges"][0]["replacements"][0]
                assert rep["insertedContent"]["text"] == d.fix[1]
                # applying the SARIF replacement gives the proved line (shown without comment)
                line = spec.source.split("\n")[rep["deletedRegion"]["startLine"] - 1]
                a, b = rep["deletedRegion"]["startColumn"] - 1, rep["deletedRegion"]["endColumn"] - 1
                fixed = line[:a] + d.fix[1] + line[b:]
                # (an inserted line, e.g. a missing `assume`, comes first)
                assert fixed.split("\n")[0].split("#")[0].strip() == d.fix[2].split("#")[0].strip()


def test_every_case_validates_against_the_sarif_schema(logs):
    validator = _validator()
    for rel, _, log in logs:
        errors = sorted(validator.iter_errors(log), key=str)
        assert not errors, f"{rel}: {errors[0].message}"


def test_the_validator_rejects_a_broken_log(logs):
    validator = _validator()
    broken = json.loads(json.dumps(logs[0][2]))
    broken["runs"][0]["results"][0]["level"] = "fatal"
    assert list(validator.iter_errors(broken))


def _cli(*args):
    return subprocess.run([sys.executable, "-m", "shapelang", *args], check=False, cwd=ROOT,
                          capture_output=True, text=True, timeout=60)


def test_cli_sarif_and_github():
    r = _cli("check", "--format", "sarif", "tests/golden/mistakes.shape", "specs/gpt2_small.shape")
    assert r.returncode == 1
    log = json.loads(r.stdout)
    assert log["version"] == "2.1.0"
    uris = {x["locations"][0]["physicalLocation"]["artifactLocation"]["uri"]
            for x in log["runs"][0]["results"]}
    assert uris == {"tests/golden/mistakes.shape"}
    r = _cli("trace", "--format", "github", "tests/golden/mistakes.shape")
    assert r.returncode == 1
    lines = r.stdout.splitlines()
    assert lines and all(x.startswith("::error file=tests/golden/mistakes.shape,line=") for x in lines)
    assert any(",title=E101::" in x for x in lines)
    r = _cli("check", "--format", "github", "specs/gpt2_small.shape")
    assert (r.returncode, r.stdout) == (0, "")


def test_github_escaping():
    assert escape_data("50% a\r\nb") == "50%25 a%0D%0Ab"
    assert escape_property("a:b,c%") == "a%3Ab%2Cc%25"
    d = Diagnostic("W301", "mixes heads: [B, S]\nsee", Span(3, 4, 3, 9), severity="warning")
    assert annotation(d, "dir,x/a:b.shape") == (
        "::warning file=dir%2Cx/a%3Ab.shape,line=3,col=4,endLine=3,endColumn=9,"
        "title=W301::mixes heads: [B, S]%0Asee")


def test_the_example_workflow_runs_real_commands():
    yaml = pytest.importorskip("yaml", reason="PyYAML comes with pre-commit (the `ci` extra)")
    import shlex

    from shapelang.cli import _parser

    flow = yaml.safe_load((ROOT / "docs" / "github-workflow.yml").read_text())
    runs = [s["run"] for job in flow["jobs"].values() for s in job["steps"] if "run" in s]
    commands = [r.split(">")[0].split("||")[0] for r in runs if r.startswith("shapelang ")]
    assert len(commands) == 3
    for cmd in commands:
        argv = [a if not a.startswith("$(") else "x.shape"
                for a in shlex.split(cmd.replace("$(git ls-files '*.shape')", "$(files)"))][1:]
        _parser().parse_args(argv)   # exits on an unknown option


def test_paths_are_normalised_and_relative_to_the_repository_root(tmp_path, monkeypatch):
    """GitHub maps `file=` and SARIF URIs from the repository's root: a path written with
    `..` and from a subfolder becomes that file's path from the root, in both formats."""
    from cli_kit import run_cli

    repo = tmp_path / "repo"
    (repo / ".git").mkdir(parents=True)
    (repo / "models" / "sub").mkdir(parents=True)
    (repo / "models" / "attn.shape").write_text("dim B, D\ninput x: [B, D]\nparam w: [B, B]\ny: x @ w\n")
    work = repo / "models" / "sub"
    r = run_cli("check", "--format", "github", "../sub/../attn.shape", cwd=work)
    assert r.returncode == 1
    assert r.stdout.startswith("::error file=models/attn.shape,line=4,"), r.stdout
    r = run_cli("check", "--format", "sarif", str(work / ".." / "attn.shape"), cwd=work)
    log = json.loads(r.stdout)
    (uri,) = {x["locations"][0]["physicalLocation"]["artifactLocation"]["uri"] for x in log["runs"][0]["results"]}
    assert uri == "models/attn.shape"
    outside = tmp_path / "elsewhere.shape"      # a file outside the repository keeps its absolute path
    outside.write_text("dim B, D\ninput x: [B, D]\nparam w: [B, B]\ny: x @ w\n")
    r = run_cli("check", "--format", "github", str(outside), cwd=work)
    assert f"file={escape_property(outside.as_posix())}," in r.stdout


def _rel_uri(uri: str) -> bool:
    return not (uri.startswith(("/", "file:", "..")) or "://" in uri or "/../" in uri or "\\" in uri)


def test_the_log_meets_githubs_ingestion_rules(logs, monkeypatch):
    """What GitHub's code scanning (and the SARIF Multitool's GitHub rule set) asks of a log:
    every rule named and described in full, with help text and a help URI; the tool with its
    version and information URI; every location a region in a file relative to the root; a
    message on every result; and the log within GitHub's upload limits."""
    docs = "https://example.org/shapelang/docs/"
    monkeypatch.setenv("SHAPELANG_DOCS_URL", docs.rstrip("/"))
    from shapelang.checker.explanations import text

    headings = {line[4:] for line in (ROOT / "docs" / "diagnostics.md").read_text().splitlines()
                if line.startswith("### ")}
    for rel, spec, _ in logs:
        log = sarif_log([(rel, list(spec.diagnostics))], "0.1.0")
        (run,) = log["runs"]
        driver = run["tool"]["driver"]
        assert driver["informationUri"] == docs and driver["version"] == "0.1.0"
        names = set()
        for rule in driver["rules"]:
            title = CODES[rule["id"]]
            assert rule["name"][0].isupper() and rule["name"].isalnum() and rule["name"] not in names
            names.add(rule["name"])
            assert rule["shortDescription"]["text"] == title
            assert len(rule["fullDescription"]["text"]) > len(title)
            assert rule["help"]["text"] == text(rule["id"], title)
            assert rule["help"]["markdown"].startswith(f"### {rule['id']}: {title}")
            # the link lands on the code's own heading in the published docs
            assert f"{rule['id']}: {title}" in headings
            assert rule["helpUri"].startswith(docs + "diagnostics.md#" + rule["id"].lower() + "-")
        assert len(log["runs"]) <= 20 and len(run["results"]) <= 25_000
        for r in run["results"]:
            assert r["message"]["text"].strip()
            locations = r["locations"] + r.get("relatedLocations", [])
            assert len(locations) <= 1_000
            for loc in locations:
                phys = loc["physicalLocation"]
                assert _rel_uri(phys["artifactLocation"]["uri"]), phys
                assert phys["region"]["startLine"] >= 1


def test_no_links_without_a_published_address(logs, monkeypatch):
    """SARIF's helpUri and informationUri must be absolute: with no docs address configured
    they are left out rather than invented."""
    monkeypatch.delenv("SHAPELANG_DOCS_URL", raising=False)
    rel, spec, _ = logs[0]
    log = sarif_log([(rel, list(spec.diagnostics))], "0.1.0")
    driver = log["runs"][0]["tool"]["driver"]
    assert all("helpUri" not in r for r in driver["rules"])
    assert all(r["help"]["text"] for r in driver["rules"])
    monkeypatch.setenv("SHAPELANG_DOCS_URL", "docs/")      # not absolute: ignored
    assert "informationUri" not in sarif_log([], "0.1.0")["runs"][0]["tool"]["driver"]
