#pragma once

// The files that `steps fit`, `trace fit` (and their --qq) write: checked before any input is
// read, as `sweep` and `recover` check theirs, so that no command replaces a file it was not
// told to, least of all one of its own inputs.

#include <string>
#include <vector>

namespace prism::explorer {

/// Throws ConfigError (bad input, exit 2) when `output` (named by `option`, "-o") is one of
/// `inputs` (the same file by any path), is not a regular file where it exists (a directory,
/// /dev/null), or exists and `overwrite` is false.
void check_new_output(const std::string& output, const std::string& option,
                      const std::vector<std::string>& inputs, bool overwrite);

}  // namespace prism::explorer
