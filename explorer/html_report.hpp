#pragma once

// `prism report FILE --html OUT`: the study's self-contained interactive page, written by the
// post-processing script (scripts/prism_results.py html), which prism runs with Debian's Python.

#include <string>
#include <vector>

namespace prism::explorer {

/// Where `prism report --html` looks for prism_results.py, in order: $PRISM_RESULTS_SCRIPT;
/// `<dir of the prism binary>/../share/prism/prism_results.py` (an installed layout);
/// `<dir of the prism binary>/../../scripts/prism_results.py` (the build tree, build/explorer);
/// the source tree's scripts/ this binary was built from.
std::vector<std::string> results_script_candidates();

/// Runs `PYTHON SCRIPT html RESULTS -o OUTPUT` (PYTHON: $PRISM_PYTHON or /usr/bin/python3) with
/// the first candidate script that exists, its output and errors passed through. Returns its
/// exit status (0 written, 1 the script refused the file); throws IoError when no script is
/// found or Python cannot be started.
int write_html_report(const std::string& results, const std::string& output);

}  // namespace prism::explorer
