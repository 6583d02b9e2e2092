"""`shapelang serve`: a local page to write a spec, or work an exercise, with the
diagnostics and the trace picture following as you type.

Three parts: `app` (the HTTP server, standard library only, loopback addresses only),
`worker` (the process where every check and grade runs, under a time limit) and `work`
(what a check or a grade answers, over the public API and the teaching stage). The page
itself is `static/` (plain HTML, CSS and JavaScript; nothing fetched from elsewhere).
Nothing here is imported by `check` or `trace`. See docs/serve.md.
"""
