"""The teaching stage: exercises and grading. Exercise format, grading engines,
value probes, the judge, feedback wording and result formats."""
