#!/usr/bin/env bash
# Gradescope runs this once when it builds the autograder image.
# It installs shapelang from the copy of the project in the zip (shapelang/).
set -eu
apt-get install -y python3 python3-pip >/dev/null 2>&1 || true
python3 -m pip install --no-cache-dir "${AUTOGRADER_SOURCE:-/autograder/source}/shapelang"
