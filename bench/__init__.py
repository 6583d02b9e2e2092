"""Benchmarks for shapelang: `python -m bench` (see bench/RESULTS.md).

specgen.py        GPT specs with any number of layers, idiomatic and unrolled
reference_gpt.py  the same model as a nanoGPT-style nn.Module, for torch.export
nanogpt.py        nanoGPT's GPT (flash or manual attention): the forward benchmark's and the tests' reference
profile_checker.py  cProfile of the checker on the big unrolled specs
__main__.py       the runner: one table with every number side by side
"""
