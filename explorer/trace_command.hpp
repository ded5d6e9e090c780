#pragma once

// `prism trace fit TRACE.json[.gz]... -o variability.toml`: the variability of DESIGN.md
// section 2 fitted from PyTorch profiler traces (src/fit/trace_fit.hpp), written as a
// variability profile with the provenance and goodness of fit of every number.

#include <string>
#include <vector>

#include <CLI/CLI.hpp>

namespace prism::explorer {

struct TraceCommand {
    std::vector<std::string> traces;
    std::string output;                ///< the profile (TOML)
    std::string qq_output;             ///< optional CSV of QQ pairs per class
    std::string base = "prism-paper";  ///< where the values the traces cannot give come from
    std::string name;                  ///< the profile's name (default: the output's stem)
    double min_kernel_us = 20;
    bool overwrite = false;  ///< replace an existing --output / --qq
};

/// Registers `trace fit` on `app`; returns the `trace` subcommand (true when it was given).
CLI::App* add_trace_command(CLI::App& app, TraceCommand& command);

/// Runs it: prints what was read and fitted, writes the profile. Exit code kExitOk; throws
/// ConfigError (a bad trace, naming the file; the same trace twice; an unknown base preset; an
/// existing output) or IoError (an output that cannot be written).
int run_trace_command(const TraceCommand& command);

}  // namespace prism::explorer
