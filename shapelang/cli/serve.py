"""`shapelang serve`: the local playground page (shapelang.serve)."""
from __future__ import annotations

import sys

DEFAULT_PORT = 8765


def add_parser(sub) -> None:
    c = sub.add_parser("serve", help="a local page: write a spec (or work an exercise) with "
                       "diagnostics and the picture updating as you type",
                       description="Serve a local page on this machine only (127.0.0.1): an "
                       "editor whose diagnostics and trace picture follow as you type, or, with "
                       "--exercise, an exercise to fill in and grade. Stop it with Ctrl-C. "
                       "Exit status: 0 stopped, 2 usage or I/O error.")
    c.add_argument("file", nargs="?", metavar="FILE",
                   help="the spec to start from (it is never written; save a copy from the page)")
    c.add_argument("--exercise", metavar="EXERCISE.shape",
                   help="an exercise with blanks: fill them and self-grade as `shapelang grade` does")
    c.add_argument("--solution", metavar="SOLUTION.shape",
                   help="the exercise's solution (default: beside the exercise); never sent to the page")
    c.add_argument("--port", type=int, default=DEFAULT_PORT,
                   help=f"the port (default {DEFAULT_PORT}; 0: any free port)")
    c.add_argument("--host", default="127.0.0.1",
                   help="a loopback address to listen on (127.0.0.1, ::1 or localhost); nothing else "
                        "is accepted")
    c.add_argument("--open", action="store_true", help="open the page in the web browser")
    c.add_argument("--verbose", action="store_true", help="log every request on stderr")


def command(args) -> int:
    from ..serve.app import ServeError, loopback, start
    from ..serve.worker import SetupFailed

    def usage(message: str) -> int:
        print(f"shapelang: {message}", file=sys.stderr)
        return 2

    if args.file and args.exercise:
        return usage("give a FILE or --exercise, not both")
    if args.solution and not args.exercise:
        return usage("--solution goes with --exercise")
    if not 0 <= args.port <= 65535:
        return usage("--port takes a number from 0 to 65535")
    try:
        loopback(args.host)
        server = start(args.host, args.port, path=args.file, exercise=args.exercise,
                       solution=args.solution, verbose=args.verbose)
    except (ServeError, SetupFailed) as err:
        return usage(str(err))
    except OSError as err:
        return usage(f"cannot listen on {args.host}:{args.port}: {err.strerror or err}")
    what = f"the exercise {args.exercise}" if args.exercise else (args.file or "a new spec")
    print(f"shapelang: serving {what} at {server.url} (this machine only; Ctrl-C stops)",
          file=sys.stderr, flush=True)
    if args.open:
        import webbrowser
        webbrowser.open(server.url)
    try:
        server.serve_forever()
    except KeyboardInterrupt:
        pass
    finally:
        server.server_close()
    return 0
