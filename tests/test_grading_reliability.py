"""Reliability of grading untrusted submissions: a seeded fuzzer over the course.

Every exercise of exercises/ gets a batch of submissions made from its honest
answers by random mutation: characters and lines changed, deleted, duplicated,
huge numbers, a byte-order mark, thousands of blank lines, junk, wrong answers,
unfilled blanks. The batch is graded through the real `shapelang grade`
command (in-process; a few uploads through a subprocess) and must show:

* no traceback, and every submission gets a result within the time limit;
* no undeserved marks: a wrong answer (or a deleted line, or a huge number)
  never scores more than the honest file minus that blank (the `@partial`
  share where the answer is right at the example sizes), an exercise with
  unfilled blanks and junk scores 0, and a harmless change (BOM, blank lines,
  CRLF, comments, trailing junk) keeps full marks;
* uploads with duplicated files or links score 0.

The seed is fixed, so a failure is reproducible; bounded to a few seconds per
exercise.
"""
from __future__ import annotations

import json
import os
import random
import re
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest
from shape_text import dims_of
from test_exercises import CASES, NAMES, ROOT, grader, submission

from shapelang import cli

SEED = 16
PER_KIND = 8                # submissions of each random kind, per exercise
TIME_LIMIT = 2.0            # seconds per submission, as given to `shapelang grade`
TOKENS = ["[", "]", "(", ")", ",", "->", "?", "#", "\n", " ", "**16", "*", "/", "-1", "0",
          "B", "D", "view", "\t", "`", "\"", "\u202e", "\r", ":", "expect", "= "]


@dataclass
class Case:
    kind: str
    text: str | bytes
    most: float          # the score may not exceed this
    least: float = 0.0   # nor fall below this
    blank: str | None = None




def _reference(name: str) -> dict:
    g = grader(name)
    out = {}
    for n, b in g.tmpl.blanks.items():
        out[n] = g.ref_answers.get(n) or g._reference_text(b).strip("`").split(" = ")[0]
    return out


def cases(name: str, rng: random.Random) -> list[Case]:
    g = grader(name)
    full = g.max_score
    share = 1 - g.options.partial            # what a half-right answer must lose at least
    honest = submission(name, {})
    ref = _reference(name)
    exercise = (ROOT / f"{name}.shape").read_text()
    out: list[Case] = []

    # harmless changes keep full marks
    out.append(Case("bom", "\ufeff" + honest, full, full))
    out.append(Case("bom-bytes", b"\xef\xbb\xbf" + honest.encode(), full, full))
    out.append(Case("blank lines", honest + "\n" * 5001, full, full))
    out.append(Case("crlf", honest.replace("\n", "\r\n"), full, full))
    out.append(Case("comments", re.sub(r"\n", "\n# a comment\n", honest, count=30), full, full))
    junk = "\n".join(rng.choice(["%% junk", "x -> -> ]", "@@@", "dim", "Q: ((("])
                     for _ in range(rng.randrange(50, 3000)))
    out.append(Case("trailing junk", honest + "\n" + junk + "\n", full, full))

    # wrong answers, with harmless noise around them
    wrongs = [(a, b) for a, b, words in CASES[name][1] if "right only" not in words]
    for n, r in ref.items():
        dims = dims_of(r)
        if dims and len(dims) >= 2:
            wrongs.append(({n: "[" + ", ".join(dims[:-1]) + "]"}, n))
    for answers, blank in wrongs:
        text = submission(name, answers)
        if rng.random() < 0.5:
            text = "\ufeff" + text + "\n" * rng.randrange(1, 6000)
        out.append(Case("wrong answer", text, full - g.tmpl.blanks[blank].points, blank=blank))

    # a huge number in an answer: at most the partial share for that blank
    for n, r in rng.sample(sorted(ref.items()), min(3, len(ref))):
        dims = dims_of(r)
        if dims and re.fullmatch(r"[A-Za-z_]\w*", dims[-1]):   # a size, not a number
            d = dims[-1]
            dims[-1] = f"({d})*((({d})**16)**16)**16"
            huge = "[" + ", ".join(dims) + "]"
            out.append(Case("huge", submission(name, {n: huge}),
                            full - share * g.tmpl.blanks[n].points, blank=n))

    # a deleted line with a blank: that blank scores nothing
    lines = honest.split("\n")
    for n, b in rng.sample(sorted(g.tmpl.blanks.items()), min(3, len(g.tmpl.blanks))):
        cut = lines[: b.line - 1] + lines[b.line:]
        out.append(Case("deleted line", "\n".join(cut), full - b.points, blank=n))

    # the exercise as handed out (nothing answered), mutated or padded with junk: 0
    for _ in range(PER_KIND):
        out.append(Case("unanswered", _mutate_chars(rng, exercise, avoid_blanks=True), 0.0))
        out.append(Case("unanswered + junk", exercise + "\n" + junk[: rng.randrange(1, 5000)], 0.0))

    # random damage: any score from 0 to full, but always a result
    for _ in range(PER_KIND * 3):
        out.append(Case("characters", _mutate_chars(rng, honest), full))
        out.append(Case("lines", _mutate_lines(rng, honest), full))
    out.append(Case("nul byte", honest.replace("\n", "\n\x00", 1), 0.0))
    return out


def _mutate_chars(rng: random.Random, text: str, avoid_blanks: bool = False) -> str:
    for _ in range(rng.randrange(1, 8)):
        k = rng.randrange(len(text) + 1)
        if avoid_blanks:        # keep every `?name` intact (a mutated blank is still empty)
            while 0 < k < len(text) and (re.match(r"[?\w]", text[k]) or text[k - 1] == "?"):
                k = rng.randrange(len(text) + 1)
        op = rng.randrange(3)
        if op == 0:
            text = text[:k] + text[k + rng.randrange(1, 20):] if not avoid_blanks else text
        elif op == 1:
            text = text[:k] + rng.choice(TOKENS) + text[k:]
        else:
            text = text[:k] + rng.choice(TOKENS) + text[k + 1:] if not avoid_blanks else text
    return text


def _mutate_lines(rng: random.Random, text: str) -> str:
    lines = text.split("\n")
    for _ in range(rng.randrange(1, 6)):
        k = rng.randrange(len(lines))
        op = rng.randrange(5)
        if op == 0:
            del lines[k]
        elif op == 1:
            lines.insert(k, lines[rng.randrange(len(lines))])
        elif op == 2:
            j = rng.randrange(len(lines))
            lines[k], lines[j] = lines[j], lines[k]
        elif op == 3:
            lines.insert(k, rng.choice(["%% junk", "Q: Q ->", "expect Q: [", "end", "block x("]))
        else:
            lines[k] = lines[k] * rng.randrange(2, 50)
        if not lines:
            lines = [""]
    return "\n".join(lines)


@pytest.mark.parametrize("name", NAMES)
def test_mutated_submissions_get_a_result_and_no_undeserved_marks(name, tmp_path, capsys):
    rng = random.Random(f"{SEED}-{name}")
    batch = cases(name, rng)
    subs = tmp_path / "subs"
    subs.mkdir()
    for k, case in enumerate(batch):
        path = subs / f"{k:03d}.shape"
        if isinstance(case.text, bytes):
            path.write_bytes(case.text)
        else:
            path.write_text(case.text, encoding="utf-8", newline="")
    out = tmp_path / "results.json"
    status = cli.main(["grade", str(ROOT / f"{name}.shape"), str(subs), "--format", "json",
                       "-o", str(out), "--time-limit", str(TIME_LIMIT)])
    err = capsys.readouterr().err
    assert "Traceback" not in err
    results = json.loads(out.read_text())["submissions"]
    assert len(results) == len(batch)
    failed = [r for r in results if r["internal_error"]]
    assert status == (3 if failed else 1)
    for r, case in zip(results, batch):
        what = f"{name} {r['file']} ({case.kind}): {r['score']}, {r['error']}"
        assert r["seconds"] < TIME_LIMIT + 1, what
        assert case.least <= r["score"] <= case.most + 1e-9, what
        if case.blank is not None:
            b = next(x for x in r["blanks"] if x["name"] == f"?{case.blank}")
            assert b["status"] != "correct", what
        if r["internal_error"]:
            # a failure of the grader is reported as such, and only where it is
            # known to happen (huge numbers in feedback) or on the time limit
            assert "grader failed" in r["error"], what
            assert case.kind == "huge" or "time limit" in r["error"], what
        assert len(r["notes"]) <= 21, what


# ------------------------------------------------------------------ uploads, through a subprocess

def _upload_cases(tmp_path: Path) -> list[tuple[str, Path]]:
    name = "02_split_heads"
    honest, wrong = submission(name, {}), submission(name, {"qh": "[B, S, D]"})
    ups = []
    dup = tmp_path / "duplicated"
    dup.mkdir()
    (dup / "answers.shape").write_text(wrong)
    (dup / "answers (1).shape").write_text(honest)
    ups.append(("duplicated files", dup))
    link = tmp_path / "link"
    link.mkdir()
    (link / "answers.shape").symlink_to(ROOT / "solutions" / f"{name}.shape")
    ups.append(("link to the solution", link))
    deep = tmp_path / "link-folder"
    (deep / "mine").mkdir(parents=True)
    (deep / "mine" / "answers.shape").write_text(wrong)
    (deep / "theirs").symlink_to(ROOT / "solutions", target_is_directory=True)
    ups.append(("link to a folder", deep))
    return ups


def test_hostile_uploads_score_nothing_through_the_command(tmp_path):
    env = {**os.environ, "PYTHONPATH": str(ROOT.parent)}
    for kind, up in _upload_cases(tmp_path):
        out = tmp_path / f"{kind}.json"
        done = subprocess.run([sys.executable, "-m", "shapelang", "grade",
                               str(ROOT / "02_split_heads.shape"), str(up), "--format",
                               "gradescope", "-o", str(out)], capture_output=True, text=True,
                              timeout=120, env=env, check=False)
        assert done.returncode == 1, (kind, done.stderr)
        assert "Traceback" not in done.stderr
        res = json.loads(out.read_text())
        assert res["score"] == 0, kind
