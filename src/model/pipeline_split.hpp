#pragma once

// How the transformer layers are split over pipeline stages (DESIGN.md section 1, "p | L (or
// uneven split stated)"). Even by default (L / (p v) per model chunk); uneven as Megatron-Core's
// --account-for-embedding-in-pipeline-split / --account-for-loss-in-pipeline-split (the
// embedding and the loss each take one layer's slot in the first / last virtual stage, L + 2
// slots split evenly over the p v virtual stages), --decoder-first-pipeline-num-layers /
// --decoder-last-pipeline-num-layers (the first and last stage given, the others sharing the
// rest evenly), or an explicit list per stage. Llama 3 405B trained 126 layers on 16 stages with
// one layer fewer on the first and the last stage, whose embedding and output layer take that
// slot (Dubey et al. 2024, arXiv 2407.21783, section 3.3.2). Except for the slots, a stage's
// layers are split evenly over its v model chunks.

#include <optional>
#include <string>
#include <vector>

#include "src/model/spec.hpp"

namespace prism {

/// Why `training`'s split cannot place `model`'s layers on `pp` stages of `interleave` chunks
/// each, or nullopt. Short and stable (it is counted as a filter reason).
std::optional<std::string> stage_split_problem(const ModelSpec& model, const TrainingSpec& training,
                                               int pp, int interleave);

/// Layers of every model chunk: pp * interleave entries, chunk c of stage s at s * interleave +
/// c, summing to model.layers. Throws ModelError with the reason of stage_split_problem when the
/// split is impossible.
std::vector<int> chunk_layers(const ModelSpec& model, const TrainingSpec& training, int pp,
                              int interleave);

/// Layers of every stage (pp entries): chunk_layers summed over each stage's chunks.
std::vector<int> stage_layers(const ModelSpec& model, const TrainingSpec& training, int pp,
                              int interleave);

/// Whether every entry is the same (the plain even split).
bool is_even_split(const std::vector<int>& layers);

}  // namespace prism
