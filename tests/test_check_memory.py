"""What a long-running checker (the language server, `serve`'s worker, a notebook) keeps between
checks: a finished check is freed as soon as it is dropped, by reference counting alone (no
reference cycle ties its parse tree and IR to the checker's parts), and checking many different
texts over and over keeps a bounded number of objects alive (every cache is bounded)."""
from __future__ import annotations

import gc

from bench.specgen import gpt_spec, llama_spec
from shapelang.checker.checker import check_text
from shapelang.checker.session import CheckSession

TEXTS = ([gpt_spec(n, form).replace("gelu", act) for n in (1, 2) for form in ("unrolled", "stack")
          for act in ("gelu", "relu")] + [llama_spec(1, "unrolled"), llama_spec(2, "stack")])


def test_a_dropped_check_is_freed_without_the_garbage_collector():
    text = gpt_spec(3, "unrolled")
    check_text(text)
    gc.collect()
    was = gc.isenabled()
    gc.disable()
    try:
        before = len(gc.get_objects())
        spec = check_text(text)
        made = len(gc.get_objects()) - before
        assert spec.ok and made > 1000
        del spec
        left = gc.collect()   # what only the collector could free: objects in reference cycles
    finally:
        if was:
            gc.enable()
    # (a softmax step's own provenance names the step: a few objects per attention layer)
    assert left < made / 5, f"{left} of the {made} objects of a check were left in reference cycles"


def test_checking_many_texts_again_and_again_keeps_a_bounded_number_of_objects():
    session = CheckSession("doc.shape")
    live = []
    for _ in range(3):
        for text in TEXTS:
            check_text(text)
            session.check(text)
        gc.collect()
        live.append(len(gc.get_objects()))
    # the first round fills the process's caches; the rounds after it hold no more
    assert live[2] <= live[1] * 1.01, live


def test_a_check_leaves_the_collector_as_it_found_it_even_when_it_stops():
    """The collector is paused during a check (checker/collector.py) and only then: on after a
    check that found it on, also when a newer edit stops the check (`Stale`) or a fix is
    re-checked inside it; off after one that found it off (a caller's own pause is kept)."""
    from shapelang.checker.checker import Stale

    seen = []
    broken = gpt_spec(1, "unrolled").replace("linear 4*D", "linear 4*D -> view [B, S, 3, D]")
    was = gc.isenabled()
    gc.enable()
    try:
        spec = check_text(broken)
        assert not spec.ok and gc.isenabled()
        try:
            check_text(gpt_spec(2, "unrolled"), stale=lambda: seen.append(gc.isenabled()) or len(seen) > 3)
        except Stale:
            pass
        else:
            raise AssertionError("the check did not stop when it went stale")
        assert seen and not any(seen), "the collector ran during the check"
        assert gc.isenabled()
        gc.disable()
        check_text(gpt_spec(1, "stack"))
        assert not gc.isenabled()
    finally:
        (gc.enable if was else gc.disable)()


def test_the_command_line_checks_the_whole_library_without_the_collector_in_bounded_memory():
    """The `shapelang check` process turns the collector off (cli.entry; `main()` called as a
    function leaves it alone): what a check leaves must then be freed by reference counting,
    or checking many files grows. The whole spec library in one process peaks within a few MB
    of one spec."""
    import glob
    import os
    import subprocess
    import sys

    from shapelang.cli import main

    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    files = sorted(glob.glob(os.path.join(root, "specs", "**", "*.shape"), recursive=True))
    assert len(files) > 30

    def peak_kb(paths) -> int:
        # the console script's own exit (os._exit) reports the process's peak and the collector
        code = ("import gc, os, resource, sys; real = os._exit\n"
                "def leave(status):\n"
                "    print(gc.isenabled(), resource.getrusage(resource.RUSAGE_SELF).ru_maxrss, file=sys.stderr)\n"
                "    sys.stderr.flush(); real(status)\n"
                "os._exit = leave; sys.argv = ['shapelang', 'check', *sys.argv[1:]]\n"
                "from shapelang.cli import entry; entry()")
        out = subprocess.run([sys.executable, "-c", code, *paths], capture_output=True, text=True,
                             cwd=root, timeout=600, check=True)
        enabled, kb = out.stderr.strip().splitlines()[-1].split()
        assert enabled == "False", "the check process kept the collector on"
        return int(kb)

    one, every = peak_kb(files[:1]), peak_kb(files)
    assert every < one + 40_000, f"{len(files)} specs peaked at {every} KB, one at {one} KB"
    was = gc.isenabled()
    gc.enable()
    try:
        assert main(["check", files[0]]) == 0 and gc.isenabled()
    finally:
        (gc.enable if was else gc.disable)()


def test_what_a_check_keeps_skips_the_young_generation_and_frozen_objects_stay_frozen():
    """After a check, the collector's next passes over the young generations do not walk the
    check's result (it is moved to the oldest generation without a pass); a process's own
    frozen objects (gc.freeze, as a forking server keeps them) are never unfrozen; garbage
    cycles made afterwards are still collected."""
    was = gc.isenabled()
    gc.enable()
    passes = []

    def count(phase, info):
        if phase == "stop" and info["generation"] < 2:
            passes.append(info)
    try:
        gc.collect()
        gc.callbacks.append(count)
        spec = check_text(gpt_spec(3, "unrolled"))
        gc.callbacks.remove(count)
        assert spec.ok and gc.isenabled()
        assert not passes, "the young generations were walked during the check"
        oldest = {id(o) for o in gc.get_objects(generation=2)}
        assert id(spec) in oldest and spec.bindings and all(id(b) in oldest for b in spec.bindings)

        class Cycle:
            pass
        a, b = Cycle(), Cycle()
        a.b, b.a = b, a
        del a, b
        assert gc.collect() >= 2            # the collector still finds new cycles

        theirs = [[] for _ in range(3)]
        assert any(o is theirs for o in gc.get_objects())
        gc.freeze()
        try:
            assert not any(o is theirs for o in gc.get_objects())     # frozen: out of every generation
            assert check_text(gpt_spec(1, "unrolled")).ok
            assert not any(o is theirs for o in gc.get_objects()), "the check unfroze them"
        finally:
            gc.unfreeze()
    finally:
        if count in gc.callbacks:
            gc.callbacks.remove(count)
        (gc.enable if was else gc.disable)()
