#!/usr/bin/env bash
# README.md stays short and its links and docs/ pages resolve (tests/cli/check_docs.py).
# Arguments as every cli test: PRISM MPIEXEC RANKS SCRATCH SOURCE_DIR.
set -euo pipefail
prism=$1 source_dir=$5
/usr/bin/python3 "$source_dir/tests/cli/check_docs.py" "$source_dir" "$prism"
