#!/usr/bin/env bash
# The main job: set up (tests/setup.sh), then the side-by-side benchmark of
# pure-Python google-adk and adk-fastcompact on built-in realistic sessions.
# Extra arguments go to `python -m adk_fastcompact bench` (try --help).
# The setup prints its own lines only (the build's output if it fails); the
# bench's progress goes to stderr (a bar on a terminal, a line per phase
# elsewhere) and its tables to stdout, the machine line last.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
source tests/setup.sh
python -m adk_fastcompact bench "$@"
