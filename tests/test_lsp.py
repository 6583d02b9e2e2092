"""`shapelang lsp` in a real session over stdio: diagnostics as `shapelang check` gives
them, hover, definition, references, completion, signature help and quick fixes."""
from __future__ import annotations

import json
import subprocess
import sys
import time

import pytest

pytest.importorskip("pygls", reason="the language server needs the `lsp` extra (pygls)")
from lsp_session import BAD, GOOD, ROOT, Session, run
from lsprotocol import types as t

MHA = (ROOT / "specs" / "mha_self_attention.shape").read_text()
URI = "file:///tmp/lsp-test/attn.shape"


def _units(s: str) -> int:
    return len(s.encode("utf-16-le")) // 2


def _expected(tmp_path, text: str) -> list[dict]:
    """What `shapelang check --format json` reports, with its ranges in LSP units."""
    path = tmp_path / "spec.shape"
    path.write_text(text, encoding="utf-8")
    out = subprocess.run([sys.executable, "-m", "shapelang", "check", "--format", "json", str(path)],
                         capture_output=True, text=True, cwd=ROOT, timeout=60, check=False)
    lines = text.split("\n")
    rows = []
    for d in json.loads(out.stdout)["diagnostics"]:
        start = (d["line"] - 1, _units(lines[d["line"] - 1][:d["column"] - 1]))
        end = (d["end_line"] - 1, _units(lines[d["end_line"] - 1][:d["end_column"] - 1]))
        rows.append({"code": d["code"], "message": d["message"], "severity": d["severity"],
                     "range": (start, end), "notes": d["notes"], "help": d["help"]})
    return rows


def _got(diags: list[t.Diagnostic]) -> list[dict]:
    return [{"code": d.code, "message": d.message,
             "severity": "error" if d.severity == t.DiagnosticSeverity.Error else "warning",
             "range": ((d.range.start.line, d.range.start.character),
                       (d.range.end.line, d.range.end.character)),
             "notes": [r.message[len("note: "):] for r in d.related_information or []
                       if r.message.startswith("note: ")],
             "help": next((r.message[len("help: "):] for r in d.related_information or []
                           if r.message.startswith("help: ")), None)}
            for d in diags]


def _pos(text: str, line_has: str, word: str, offset: int = 0) -> tuple[int, int]:
    """LSP position of `word` on the first line containing `line_has`."""
    for k, line in enumerate(text.split("\n")):
        if line_has in line:
            return k, _units(line[:line.index(word, line.index(line_has))]) + offset
    raise AssertionError(line_has)


def test_diagnostics_are_those_of_check_and_a_fix_clears_them(tmp_path):
    async def scenario():
        async with Session() as s:
            s.open(URI, BAD, 1)
            first = await s.diagnostics(URI, 1)
            s.replace(URI, GOOD, 2)
            fixed = await s.diagnostics(URI, 2)
            return first, fixed, s.capabilities
    first, fixed, caps = run(scenario)
    expected = _expected(tmp_path, BAD)
    assert [e["code"] for e in expected] == ["E101", "E112", "E001"]
    assert _got(first) == expected
    # the emoji counts two UTF-16 units: the E112 range ends after `"😀é"` at 3 + 5
    assert _got(first)[1]["range"] == ((6, 3), (6, 8))
    assert all(d.source == "shapelang" for d in first)
    assert first[0].code_description is not None and "diagnostics" in first[0].code_description.href
    assert list(fixed) == [] and _expected(tmp_path, GOOD) == []
    assert caps.hover_provider and caps.definition_provider and caps.references_provider
    assert caps.completion_provider and caps.signature_help_provider and caps.code_action_provider


def test_warnings_keep_severity_and_notes(tmp_path):
    text = MHA.replace("softmax -1", "softmax -2")

    async def scenario():
        async with Session() as s:
            s.open(URI, text)
            return await s.diagnostics(URI, 1)
    got = _got(run(scenario))
    assert got == _expected(tmp_path, text)
    assert [(g["code"], g["severity"]) for g in got] == [("W303", "warning")]
    assert got[0]["notes"]


def test_hover_definition_references():
    async def scenario():
        async with Session() as s:
            s.open(URI, MHA)
            await s.diagnostics(URI, 1)
            out = {
                "binding": await s.hover(URI, *_pos(MHA, "weights: scores", "weights", 2)),
                "use": await s.hover(URI, *_pos(MHA, "weights @ Vh", "Vh", 1)),
                "dim": await s.hover(URI, *_pos(MHA, "dim Dh", "Dh", 1)),
                "dim_use": await s.hover(URI, *_pos(MHA, "Qh: Q", "Dh", 0)),
                "step": await s.hover(URI, *_pos(MHA, "Kt: Kh", "transpose", 3)),
                "decl": await s.hover(URI, *_pos(MHA, "Q: X @", "X", 0)),
                "def_dim": await s.definition(URI, *_pos(MHA, "Qh: Q", "Dh", 1)),
                "def_tensor": await s.definition(URI, *_pos(MHA, "heads: weights", "weights", 0)),
                "def_param": await s.definition(URI, *_pos(MHA, "out: merged", "W_o", 1)),
                "refs": await s.references(URI, *_pos(MHA, "scores: Qh", "scores", 0)),
                "refs_no_decl": await s.references(URI, *_pos(MHA, "scores: Qh", "scores", 0), False),
            }
            return out
    r = run(scenario)
    text = r["binding"].contents.value
    assert "[B, H, S, S]" in text and "[1, 8, 4, 4]" in text          # symbolic and at the example
    assert "[B, H, S, Dh]" in r["use"].contents.value and "[1, 8, 4, 64]" in r["use"].contents.value
    assert "Dh = D/H" in r["dim"].contents.value and "64" in r["dim"].contents.value
    assert "Dh = D/H" in r["dim_use"].contents.value
    assert "[B, H, Dh, S]" in r["step"].contents.value and "[1, 8, 64, 4]" in r["step"].contents.value
    assert "input X: [B, S, D]" in r["decl"].contents.value
    assert (r["def_dim"].range.start.line, r["def_dim"].range.start.character) == _pos(MHA, "dim Dh", "Dh")
    assert r["def_dim"].range.end.character - r["def_dim"].range.start.character == 2
    assert r["def_tensor"].range.start == t.Position(*_pos(MHA, "weights: scores", "weights"))
    assert r["def_param"].range.start == t.Position(*_pos(MHA, "param W_o", "W_o"))
    lines = MHA.split("\n")
    used = sorted(k for k, line in enumerate(lines)
                  if not line.lstrip().startswith("#") and "scores" in line.split("#")[0])
    assert sorted(loc.range.start.line for loc in r["refs"]) == used
    assert len(r["refs_no_decl"]) == len(r["refs"]) - 1
    assert all(loc.uri == URI for loc in r["refs"])


BLOCKY = """\
dim B, S, D, L
example B=2, S=5, D=8, L=3
input x: [B, S, D]
block Layer(h: [B, S, D]):
  param W: [D, D]
  y: h @ W -> gelu
  return y + h
end
out: x -> stack L Layer
"""


def test_blocks_and_names_inside_them():
    async def scenario():
        async with Session() as s:
            s.open(URI, BLOCKY)
            diags = await s.diagnostics(URI, 1)
            return diags, {
                "def_block": await s.definition(URI, *_pos(BLOCKY, "stack L", "Layer", 1)),
                "def_input": await s.definition(URI, *_pos(BLOCKY, "y: h", "h", 0)),
                "def_param": await s.definition(URI, *_pos(BLOCKY, "y: h", "W", 0)),
                "hover_local": await s.hover(URI, *_pos(BLOCKY, "return y", "y", 0)),
                "hover_block": await s.hover(URI, *_pos(BLOCKY, "block Layer", "Layer", 1)),
                "refs_D": await s.references(URI, *_pos(BLOCKY, "dim B", "D", 0)),
            }
    diags, r = run(scenario)
    assert list(diags) == []
    assert r["def_block"].range.start == t.Position(*_pos(BLOCKY, "block Layer", "Layer"))
    assert r["def_input"].range.start == t.Position(*_pos(BLOCKY, "block Layer", "h"))
    assert r["def_param"].range.start == t.Position(*_pos(BLOCKY, "param W", "W"))
    assert "[B, S, D]" in r["hover_local"].contents.value and "[2, 5, 8]" in r["hover_local"].contents.value
    assert "block Layer(h: [B, S, D])" in r["hover_block"].contents.value
    assert len(r["refs_D"]) == sum(line.count("D") for line in BLOCKY.split("\n"))


def test_completion_and_signature_help():
    from shapelang.checker.ops.table import TABLE

    text = MHA + "probe: merged -> \nprobe2: merged -> transpose 1 \nprobe3: merged @ \n"
    async def scenario():
        async with Session() as s:
            s.open(URI, text)
            await s.diagnostics(URI, 1)
            line = text.split("\n").index("probe: merged -> ")
            return (await s.completion(URI, line, len("probe: merged -> ")),
                    await s.signature(URI, line + 1, len("probe2: merged -> transpose 1 ")),
                    await s.completion(URI, line + 2, len("probe3: merged @ ")))
    ops, sig, names = run(scenario)
    items = {i.label: i for i in ops.items}
    assert set(TABLE) <= set(items)
    assert items["transpose"].detail == TABLE["transpose"].usage
    assert TABLE["softmax"].doc in items["softmax"].documentation.value
    assert sig.signatures[0].label == TABLE["transpose"].usage and sig.active_parameter == 1
    labels = {i.label for i in names.items}
    assert {"B", "S", "D", "H", "Dh", "X", "W_q", "scores", "merged"} <= labels
    assert "transpose" not in labels and "probe" not in labels


@pytest.mark.parametrize("broken, fixed_line", [
    (MHA.replace("softmax -1", "softmax -2"), "weights: scores -> softmax -1"),
    (GOOD.replace("Q @ (K -> transpose 1 2)", "Q @ K"), "scores: Q @ (K -> transpose -2 -1)"),
])
def test_code_action_applies_the_proved_fix(broken, fixed_line):
    async def scenario():
        async with Session() as s:
            s.open(URI, broken)
            diags = await s.diagnostics(URI, 1)
            actions = await s.code_actions(URI, diags[0].range, diags)
            edits = actions[0].edit.changes[URI]
            s.edit(URI, 2, edits)
            after = await s.diagnostics(URI, 2)
            return diags, actions, edits, after
    diags, actions, edits, after = run(scenario)
    assert len(actions) == 1 and actions[0].kind == t.CodeActionKind.QuickFix
    assert actions[0].diagnostics[0].code == diags[0].code
    lines = broken.split("\n")
    e = edits[0]
    line = lines[e.range.start.line]
    assert line[:e.range.start.character] + e.new_text + line[e.range.end.character:] == fixed_line
    assert list(after) == []


def test_latency_of_a_change_on_the_48_layer_spec():
    """The real figure is in bench/RESULTS.md (bench/lsp_latency.py); here only a generous bound."""
    sys.path.insert(0, str(ROOT))
    from bench.specgen import gpt_spec

    text = gpt_spec(48, "unrolled")
    changed = text.replace("x_48: ", "x_48: ", 1) + "\nextra: x_0 -> transpose 1 2\n"

    async def scenario():
        async with Session() as s:
            s.open(URI, text)
            assert list(await s.diagnostics(URI, 1, timeout=60)) == []
            start = time.perf_counter()
            s.replace(URI, changed, 2)
            assert list(await s.diagnostics(URI, 2, timeout=60)) == []
            took = time.perf_counter() - start
            hovered = await s.hover(URI, len(changed.split("\n")) - 2, 1)
            return took, hovered
    took, hovered = run(scenario, timeout=120)
    print(f"didChange -> publishDiagnostics on the 48-layer spec: {took:.2f} s")
    assert took < 10
    assert "[B, D, S]" in hovered.contents.value


def test_changes_in_quick_succession_publish_only_the_last_version():
    async def scenario():
        async with Session() as s:
            s.open(URI, GOOD, 1)
            await s.diagnostics(URI, 1)
            for v in range(2, 7):           # typing: five changes inside the debounce window
                s.replace(URI, GOOD + "z: scores ->" + " relu" * v + "\n", v)
            s.replace(URI, BAD, 7)
            last = await s.diagnostics(URI, 7)
            unknown = await s.hover("file:///tmp/lsp-test/never-opened.shape", 0, 0)
            return [p.version for p in s.published[URI]], last, unknown
    versions, last, unknown = run(scenario)
    assert versions == [1, 7]
    assert [d.code for d in last] == ["E101", "E112", "E001"]
    assert unknown is None


def test_formatting_gives_the_layout_of_shapelang_fmt():
    from shapelang.fmt import format_text

    messy = "dim B,S ,D\ninput X :[B,S,D]\nY:X->linear D->relu   # a comment\n"
    broken = messy + "Z: X -> (\n"

    async def scenario():
        async with Session() as s:
            s.open(URI, messy)
            await s.diagnostics(URI, 1)
            edits = await s.formatting(URI)
            s.replace(URI, broken, 2)
            await s.diagnostics(URI, 2)
            return s.capabilities, edits, await s.formatting(URI)
    caps, edits, refused = run(scenario)
    assert caps.document_formatting_provider
    assert len(edits) == 1 and edits[0].range.start == t.Position(0, 0)
    assert edits[0].new_text == format_text(messy)
    assert "Y: X -> linear D -> relu" in edits[0].new_text
    assert not refused     # a file that does not parse is left alone


DTYPES = ("dim B, S, L\nexample B=2, S=3, L=3\ninput ids: [B, S] int\ninput pad: [B, S] bool\n"
          "input x: [B, S, 4]\nblock Layer(h: [B, S, 4]):\n  return h -> linear 4\nend\n")


@pytest.mark.parametrize("line, code, title, fixed", [
    ("y: ids -> softmax -1", "E120", "E120: write it as `y: ids -> to float -> softmax -1`",
     "y: ids -> to float -> softmax -1"),
    pytest.param("y: 1 - pad", "E120", "E120: write it as `y: 1 - (pad -> to float)`", "y: 1 - (pad -> to float)",
                 marks=pytest.mark.exhaustive),
    pytest.param("y: -pad", "E120", "E120: write it as `y: -(pad -> to float)`", "y: -(pad -> to float)",
                 marks=pytest.mark.exhaustive),
    ("y: x -> stack (L - 1) Layer", "E109", "E109: add the line `assume L >= 2`", "assume L >= 2"),
])
def test_dtype_casts_and_assumptions_are_quick_fixes(line, code, title, fixed):
    """The proved rewrites of a dtype refusal and of a size that may not be positive are
    offered as quick fixes; applying one, as an editor does, clears every finding."""
    text = DTYPES + line + "\n"

    async def scenario():
        async with Session() as s:
            s.open(URI, text)
            diags = await s.diagnostics(URI, 1)
            actions = await s.code_actions(URI, diags[0].range, diags)
            s.edit(URI, 2, actions[0].edit.changes[URI])
            after = await s.diagnostics(URI, 2)
            return diags, actions, after
    diags, actions, after = run(scenario)
    assert [d.code for d in diags] == [code]
    assert len(actions) == 1 and actions[0].kind == t.CodeActionKind.QuickFix
    assert actions[0].title == title
    (edit,) = actions[0].edit.changes[URI]
    lines = text.split("\n")
    line_at = lines[edit.range.start.line]
    new = line_at[:edit.range.start.character] + edit.new_text + line_at[edit.range.end.character:]
    assert new.split("\n")[0] == fixed
    assert list(after) == []


MASKED = ("dim B, S\nexample B=2, S=3\ninput ids: [B, S] int\ninput x: [B, S]\n"
          "pad: ids == 0\nkeep: pad -> logical_not\ny: where(keep, x, 0.0)\n")


def test_hover_shows_the_dtype_of_a_mask_and_of_ids():
    async def scenario():
        async with Session() as s:
            s.open(URI, MASKED)
            await s.diagnostics(URI, 1)
            return {"pad": await s.hover(URI, *_pos(MASKED, "pad: ids", "pad", 1)),
                    "ids": await s.hover(URI, *_pos(MASKED, "input ids", "ids", 1)),
                    "x": await s.hover(URI, *_pos(MASKED, "input x", "x", 0)),
                    "step": await s.hover(URI, *_pos(MASKED, "keep: pad", "logical_not", 2)),
                    "use": await s.hover(URI, *_pos(MASKED, "where(keep", "keep", 1))}
    r = run(scenario)
    assert "pad: [B, S] bool" in r["pad"].contents.value and "[2, 3]" in r["pad"].contents.value
    assert "ids: [B, S] int" in r["ids"].contents.value
    assert "x: [B, S]\n" in r["x"].contents.value   # float32, the default, is not written
    assert "[B, S] bool → [B, S] bool" in r["step"].contents.value
    assert "keep: [B, S] bool" in r["use"].contents.value


def _frame(message: dict) -> bytes:
    import json

    body = json.dumps(message).encode()
    return b"Content-Length: %d\r\n\r\n" % len(body) + body


def test_shutdown_and_exit_end_the_server_cleanly():
    """An editor's last two messages: the server answers `shutdown`, leaves on `exit` with
    status 0, and prints nothing on stderr (no traceback from flushing a closed stdout)."""
    import subprocess

    messages = [{"jsonrpc": "2.0", "id": 1, "method": "initialize",
                 "params": {"processId": None, "rootUri": None, "capabilities": {}}},
                {"jsonrpc": "2.0", "method": "initialized", "params": {}},
                {"jsonrpc": "2.0", "id": 2, "method": "shutdown"},
                {"jsonrpc": "2.0", "method": "exit"}]
    proc = subprocess.run([sys.executable, "-m", "shapelang", "lsp"], input=b"".join(map(_frame, messages)),
                          capture_output=True, timeout=120, cwd=ROOT, check=False)
    assert proc.returncode == 0, proc.stderr.decode()
    assert b'"id": 2' in proc.stdout.replace(b'"id":2', b'"id": 2')   # shutdown was answered
    assert b"Traceback" not in proc.stderr and b"Error" not in proc.stderr, proc.stderr.decode()


def test_a_check_that_a_newer_version_makes_stale_stops_and_the_next_one_is_whole():
    """The worker's check asks between statements whether the editor has moved on."""
    from shapelang.api import Stale, check
    from shapelang.lsp.documents import DocumentStore

    store = DocumentStore()
    store.update(URI, 1, MHA)
    asked = []

    def stale():        # version 2 arrives while the third statement is checked
        asked.append(1)
        return len(asked) > 2
    with pytest.raises(Stale):
        store.analysis(URI, stale=stale)
    assert store.checks == 0
    edited = MHA.replace("softmax -1", "softmax 5")
    store.update(URI, 2, edited)
    an = store.analysis(URI, stale=lambda: False)
    assert an.version == 2 and store.checks == 1
    assert an.spec.diagnostics == check(edited, "/tmp/lsp-test/attn.shape").diagnostics
