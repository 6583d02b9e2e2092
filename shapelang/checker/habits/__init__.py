"""PyTorch habits answered: a line written the PyTorch way (`Q @ K.T`, `x.view(B, S, D)`,
`nn.Linear(D, 4*D)`) gets a message that names the habit and the line in shapelang.

answers.py turns a finding into that message and its candidate rewrite; spellings.py
reads a Python expression (with `ast`, never evaluated) and spells it in shapelang;
modules.py spells the `nn` modules."""
