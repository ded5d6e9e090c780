#pragma once

// The [training] keys of the schedule: Megatron's communication overlaps and the pipeline's
// layer split.

#include <toml++/toml.h>

#include "src/model/spec.hpp"

namespace prism::io::detail {

/// Reads overlap_param_gather, tp_comm_overlap, fsdp_prefetch, fsdp_pp_unsharded and the
/// uneven-split keys (account_for_embedding_in_pipeline_split, account_for_loss_in_pipeline_split,
/// first_stage_layers, last_stage_layers, layers_per_stage) of a [training] table whose keys
/// were checked. Which pp a split fits is checked per point (stage_split_problem); here only
/// what the file alone decides: the value ranges, exclusive settings, a list's sum. Throws
/// ConfigError at the offending node.
void apply_training_schedule_keys(const toml::table& table, const ModelSpec& model,
                                  TrainingSpec& training);

}  // namespace prism::io::detail
