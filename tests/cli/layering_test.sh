#!/usr/bin/env bash
# One-way dependencies (DESIGN.md "Layers"): src/ includes neither io/ nor explorer/ headers,
# io/ does not include explorer/, and the model never includes MPI, HDF5 or TOML headers.
# Arguments: PRISM MPIEXEC N SCRATCH SOURCE_DIR
set -uo pipefail
src=$5
cd "$src" || exit 1
fails=0
check() {  # DIR REGEX WHAT
    local hits
    hits=$(grep -rnE "$2" "$1" --include='*.hpp' --include='*.cpp' || true)
    if [ -n "$hits" ]; then echo "FAIL $1 includes $3:"; echo "$hits"; fails=$((fails + 1)); else echo "ok   $1 does not include $3"; fi
}
check src '#include "(io|explorer)/' 'io/ or explorer/ headers'
check src '#include <(mpi\.h|hdf5\.h|H5[A-Za-z]*\.h|toml\+\+/)' 'MPI, HDF5 or TOML headers'
check io '#include "explorer/' 'explorer/ headers'
check io '#include <mpi\.h>' 'MPI'
exit "$fails"
