"""The syntax stage: `.shape` text -> nodes. Grammar loading, the parser, the nodes,
and the diagnostics every later stage reports with."""
