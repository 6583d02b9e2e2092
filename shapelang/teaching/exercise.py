"""Exercises: the file format, finding answers in a submission, `exercise make`.

An exercise is a `.shape` file with blanks (`?` or `?name`, the grammar's `Hole`
nodes) plus comment directives the grammar ignores; its reference solution is a
separate, complete `.shape` file. The format is described in exercises/README.md.
The parts, one module each:

  shapelang.teaching.template  the exercise's statements, blanks and directives
  shapelang.teaching.match     matching an exercise statement's nodes with a submission's
  shapelang.teaching.answers   the answers of a submission (`extract`)
  shapelang.teaching.make      `exercise make`: the student version of a solution
"""
from __future__ import annotations

from .answers import Answer, Extraction, extract
from .make import make
from .template import (
    MATCH_BUDGET,
    MAX_ANSWER,
    MAX_STATEMENT,
    Blank,
    ExerciseError,
    Options,
    Stmt,
    Template,
    _squash,
    fill,
    load_template,
)

__all__ = ["MATCH_BUDGET", "MAX_ANSWER", "MAX_STATEMENT", "Answer", "Blank", "ExerciseError",
           "Extraction", "Options", "Stmt", "Template", "_squash", "extract", "fill",
           "load_template", "make"]
