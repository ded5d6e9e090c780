#pragma once

// Shared by the experiment-loader tests: a minimal valid experiment and the error a text gives.

#include <string>

#include "io/experiment_loader.hpp"
#include "src/common/error.hpp"

namespace prism::test {

/// Lines 1-6 of a valid experiment; a test appends from line 7 on.
inline const std::string kBaseExperiment =
    "[model]\n"
    "preset = \"llama3-8b\"\n"
    "[training]\n"
    "global_batch = 512\n"
    "[hardware.h100]\n"
    "preset = \"h100-sxm\"\n";

/// The ConfigError message of parsing `text` as "exp.toml", or "no error".
inline std::string loader_error_of(const std::string& text) {
    try {
        io::parse_experiment(text, "exp.toml");
    } catch (const ConfigError& e) {
        return e.what();
    }
    return "no error";
}

}  // namespace prism::test
