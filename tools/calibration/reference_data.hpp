#pragma once

// The published A100 measurements of tests/data/reference as experiments of the model, shared by
// prism_calibrate (tools/) and the calibration tests (tests/calibration/). Header-only: the
// tests and the tool each compile it. Every case is built from the shipped GPU preset through
// the experiment loader, so what is checked is what a user's experiment file gets.

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "io/experiment_loader.hpp"
#include "src/common/error.hpp"
#include "src/model/deterministic.hpp"
#include "src/model/spec.hpp"

namespace prism::calibration {

/// A CSV file with one header line and numeric or text cells. '#' and blanks are stripped from
/// the front of cells ("# layers" -> "layers").
struct Table {
    std::vector<std::string> header;
    std::vector<std::vector<std::string>> rows;

    int column(const std::string& name) const {
        for (std::size_t i = 0; i < header.size(); ++i)
            if (header[i] == name) return int(i);
        throw IoError("csv: no column '" + name + "'");
    }
    double number(std::size_t row, const std::string& name) const {
        return std::stod(rows.at(row).at(column(name)));
    }
    const std::string& text(std::size_t row, const std::string& name) const {
        return rows.at(row).at(column(name));
    }
};

inline std::vector<std::string> split_csv_line(const std::string& line) {
    std::vector<std::string> cells;
    std::stringstream in(line);
    std::string cell;
    while (std::getline(in, cell, ',')) {
        while (!cell.empty() && (cell.back() == '\r' || cell.back() == ' ')) cell.pop_back();
        while (!cell.empty() && (cell.front() == ' ' || cell.front() == '#')) cell.erase(0, 1);
        cells.push_back(cell);
    }
    return cells;
}

inline Table read_table(const std::string& path) {
    std::ifstream in(path);
    if (!in) throw IoError("cannot read " + path);
    Table t;
    std::string line;
    while (std::getline(in, line)) {
        if (line.empty()) continue;
        if (t.header.empty()) {
            t.header = split_csv_line(line);
        } else {
            t.rows.push_back(split_csv_line(line));
        }
    }
    return t;
}

/// One training configuration of a published run, in the terms of the experiment file. The
/// defaults are those of the published A100 runs: GPT (MHA, f = 4h, GeLU, tied embedding),
/// bf16, Megatron's unfused attention core, no distributed optimizer, no overlaps.
struct Case {
    std::string label;
    std::string set;  ///< reference set (file) the row comes from
    int layers = 0, hidden = 0, heads = 0, seq = 2048, vocab = 51200;
    int kv_heads = 0;  ///< 0 = heads
    int ffn = 0;       ///< 0 = 4 hidden
    bool gated_mlp = false, tied_embeddings = true;
    std::int64_t global_batch = 0;
    int tp = 1, pp = 1, dp = 1, cp = 1, microbatch = 1, interleave = 1, zero_stage = 0;
    std::string recompute = "none";
    std::string precision = "bf16";
    bool sequence_parallel = false;
    bool flash_attention = false, overlap_grad_reduce = false, overlap_param_gather = false;
    bool tp_comm_overlap = false;
    bool pipeline_slots = false;          ///< Megatron's embedding and loss slots (uneven split)
    std::string hardware_overrides;       ///< TOML lines added to the [hardware.gpu] table
    std::string training_overrides;       ///< TOML lines added to the [training] table
    std::string stack = "megatron-core";  ///< software stack preset (configs/presets/stacks)
    std::string gpu = "a100-80gb";        ///< GPU preset the run used
    bool fp8_params = false;
    /// Hidden / attention dropout with p > 0 (TrainingSpec::dropout: only the masks' memory).
    /// true where the table's recipe is not read for it (Megatron's GPT defaults, p = 0.1).
    bool dropout = true;
    /// Main-gradient buffer and its DP reduction in fp32 (TrainingSpec::grad_reduce_in_fp32:
    /// memory and the reduction's bytes). true where the run's software defaults to it
    /// (Megatron-LM with bf16, FSDP's reduce_dtype = fp32); each loader says why.
    bool grad_reduce_in_fp32 = true;
    /// Pure bf16 training (TrainingSpec::pure_bf16; implies bf16 gradients).
    bool pure_bf16 = false;
    double measured = 0;  ///< step time (s) or TFLOP/s per GPU, per dataset
    /// Published peak memory per GPU in GiB (torchtitan: the allocator's peak reserved); 0 =
    /// not published. Checked, never fitted (docs/torchtitan_sac.md).
    double measured_memory_gib = 0;
    bool train = false;  ///< used by the fit (else held out)
};

/// The [stack] table of `c`: its stack preset, and with `ceilings` every factor 1 and no host
/// time (the hardware's kernel ceilings: the fit multiplies them itself).
inline std::string stack_table(const Case& c, bool ceilings) {
    std::string t = fmt::format("[stack]\npreset = \"{}\"\n", c.stack);
    if (ceilings) {
        t += "gemm_efficiency = 1\nfp8_gemm_efficiency = 1\nattention_efficiency = 1\n"
             "hbm_efficiency = 1\ncollective_efficiency = 1\nkernel_launch = \"0 us\"\n"
             "overlap_compute_cost = 0\n";
    }
    return t;
}

/// Experiment for `c` on the shipped GPU preset `gpu_preset` (empty: the case's own) with the
/// case's stack preset; `ceilings`: the stack's factors left out (see stack_table).
inline Experiment make_experiment(const Case& c, const std::string& gpu_preset = "",
                                  bool ceilings = false) {
    auto flag = [](bool b) { return b ? "true" : "false"; };
    const std::string text = fmt::format(
        "[model]\nlayers = {}\nhidden = {}\nheads = {}\nkv_heads = {}\nffn = {}\nvocab = {}\n"
        "seq = {}\ngated_mlp = {}\ntied_embeddings = {}\n\n"
        "[training]\nglobal_batch = {}\nprecision = \"{}\"\nflash_attention = {}\n"
        "overlap_grad_reduce = {}\noverlap_param_gather = {}\ntp_comm_overlap = {}\n"
        "fp8_params = {}\ndropout = {}\ngrad_reduce_in_fp32 = {}\npure_bf16 = {}\n"
        "account_for_embedding_in_pipeline_split = {}\naccount_for_loss_in_pipeline_split = "
        "{}\n{}\n"
        "[hardware.gpu]\npreset = \"{}\"\n{}\n{}\n[defaults]\n"
        "tp = {}\npp = {}\ndp = {}\ncp = {}\nmicrobatch = {}\ninterleave = {}\n"
        "zero_stage = {}\nrecompute = \"{}\"\nsequence_parallel = {}\n",
        c.layers, c.hidden, c.heads, c.kv_heads > 0 ? c.kv_heads : c.heads,
        c.ffn > 0 ? c.ffn : 4 * c.hidden, c.vocab, c.seq, flag(c.gated_mlp),
        flag(c.tied_embeddings), c.global_batch, c.precision, flag(c.flash_attention),
        flag(c.overlap_grad_reduce), flag(c.overlap_param_gather), flag(c.tp_comm_overlap),
        flag(c.fp8_params), flag(c.dropout), flag(c.grad_reduce_in_fp32), flag(c.pure_bf16),
        flag(c.pipeline_slots), flag(c.pipeline_slots), c.training_overrides,
        gpu_preset.empty() ? c.gpu : gpu_preset, c.hardware_overrides, stack_table(c, ceilings),
        c.tp, c.pp, c.dp, c.cp, c.microbatch, c.interleave, c.zero_stage, c.recompute,
        flag(c.sequence_parallel));
    return io::parse_experiment(text, c.label);
}

/// The columns the newer reference tables share: the model's shape (layers, hidden, heads,
/// vocab, seq) and the batch (global_batch, micro_batch) of row `i` into `c`; returns the row's
/// GPU count (column gpus), from which each table derives its data-parallel degree.
inline int read_shape_and_batch(const Table& t, std::size_t i, Case& c) {
    c.layers = int(t.number(i, "layers"));
    c.hidden = int(t.number(i, "hidden"));
    c.heads = int(t.number(i, "heads"));
    c.vocab = int(t.number(i, "vocab"));
    c.seq = int(t.number(i, "seq"));
    c.global_batch = std::int64_t(t.number(i, "global_batch"));
    c.microbatch = int(t.number(i, "micro_batch"));
    return int(t.number(i, "gpus"));
}

inline std::string data_file(const std::string& dir, const char* name) {
    return dir + "/reference/" + name;
}

/// Korthikanti et al. 2022 Table 5: both modes of every model; measured = step time (s).
inline std::vector<Case> korthikanti_table5(const std::string& data_dir) {
    const Table t = read_table(data_file(data_dir, "korthikanti_2022_table5_a100.csv"));
    std::vector<Case> cases;
    for (std::size_t i = 0; i < t.rows.size(); ++i) {
        for (int mode = 0; mode < 2; ++mode) {
            Case c;
            c.layers = int(t.number(i, "layers"));
            c.hidden = int(t.number(i, "hidden"));
            c.heads = int(t.number(i, "heads"));
            c.seq = int(t.number(i, "seq"));
            c.tp = int(t.number(i, "tp"));
            c.pp = int(t.number(i, "pp"));
            c.dp = int(t.number(i, "gpus")) / (c.tp * c.pp);
            c.interleave = int(t.number(i, "interleave"));
            c.global_batch = std::int64_t(t.number(i, "global_batch"));
            c.microbatch = int(t.number(i, "micro_batch"));
            c.recompute = mode == 0 ? "full" : "selective";
            c.sequence_parallel = mode == 1;
            c.measured = t.number(
                i, mode == 0 ? "step_s_full_recompute" : "step_s_seqpar_selective_recompute");
            c.label = t.text(i, "model") + (mode == 0 ? " full-recompute" : " seqpar+selective");
            c.set = "korthikanti-2022";
            cases.push_back(c);
        }
    }
    return cases;
}

/// Narayanan et al. SC'21 Table 1; measured = TFLOP/s per GPU. Micro-batch 1, no interleaving
/// (the table gives neither).
inline std::vector<Case> megatron_sc21(const std::string& data_dir) {
    const Table t = read_table(data_file(data_dir, "megatron_sc21_table1_a100.csv"));
    std::vector<Case> cases;
    for (std::size_t i = 0; i < t.rows.size(); ++i) {
        Case c;
        c.layers = int(t.number(i, "layers"));
        c.hidden = int(t.number(i, "hidden"));
        c.heads = int(t.number(i, "heads"));
        c.seq = int(t.number(i, "seq"));
        c.vocab = int(t.number(i, "vocab"));
        c.tp = int(t.number(i, "tp"));
        c.pp = int(t.number(i, "pp"));
        c.dp = int(t.number(i, "gpus")) / (c.tp * c.pp);
        c.global_batch = std::int64_t(t.number(i, "global_batch"));
        c.recompute = "full";
        c.grad_reduce_in_fp32 = false;  // fp16 runs: Megatron-LM reduces fp16 main gradients
        c.measured = t.number(i, "tflops_per_gpu");
        c.set = "megatron-sc21";
        c.label = t.text(i, "params_billion") + "B";
        cases.push_back(c);
    }
    return cases;
}

/// vTrain single-node ground truth; measured = iteration time (s). vTrain's validation configs
/// (VIA-Research/vTrain config/validation/*.json) set "use_checkpoint": true (full activation
/// recomputation) and "use_gradient_bucket": false (no overlapped gradient reduction); vocab
/// 51200 (GPT-2's, padded).
inline std::vector<Case> vtrain(const std::string& data_dir) {
    const Table t = read_table(data_file(data_dir, "vtrain_a100_single_node.csv"));
    std::vector<Case> cases;
    for (std::size_t i = 0; i < t.rows.size(); ++i) {
        Case c;
        c.global_batch = std::int64_t(t.number(i, "global batch"));
        c.microbatch = int(t.number(i, "micro batch"));
        c.hidden = int(t.number(i, "hidden size"));
        c.heads = int(t.number(i, "attention heads"));
        c.layers = int(t.number(i, "layers"));
        c.seq = int(t.number(i, "sequence length"));
        c.tp = int(t.number(i, "tensor parallelism"));
        c.dp = int(t.number(i, "data parallelism"));
        c.pp = int(t.number(i, "pipeline parallelism"));
        c.measured = t.number(i, "iteration time (ms)") * 1e-3;
        c.recompute = "full";
        // 16-bit gradient reduction, as the model had it before the flag reached the wire
        // (vTrain's configs state no dtype)
        c.grad_reduce_in_fp32 = false;
        c.set = "vtrain";
        c.stack = "deepspeed";  // Megatron-DeepSpeed
        c.label = fmt::format("vtrain row {}", i);
        cases.push_back(c);
    }
    return cases;
}

/// The stated split of the vTrain rows: even file rows (0-based) fit, odd rows test.
inline bool vtrain_is_train_row(std::size_t row) { return row % 2 == 0; }
/// The SC'21 rows used for fitting (0-based): 1.7B, 7.5B, 39.1B, 145.6B, 529.6B.
inline bool sc21_is_train_row(std::size_t row) { return row % 2 == 0; }

/// Achieved TFLOP/s per GPU as SC'21 counts it, from a result.
inline double tflops_per_gpu(const DeterministicResult& r, const DesignPoint& p) {
    return r.megatron_flops_per_step / (r.step_time_s * double(p.gpus())) * 1e-12;
}

/// Predicted value of `c` in the unit of `measured`, on `hw` (the experiment's hardware
/// replaced: used by the fit to try constants).
enum class Quantity { step_time_s, tflops_per_gpu };
/// `r` (of point `p`) in the unit `q`.
inline double predicted_value(const DeterministicResult& r, const DesignPoint& p, Quantity q) {
    return q == Quantity::step_time_s ? r.step_time_s : tflops_per_gpu(r, p);
}
inline double predict(const Experiment& e, const Case& c, Quantity q) {
    return predicted_value(evaluate_deterministic(e, e.defaults), e.defaults, q);
}

inline double relative_error(double predicted, double measured) {
    return (predicted - measured) / measured;
}

/// Mean and largest absolute relative error over a set of rows.
struct ErrorStats {
    double mean_abs = 0;  ///< the sum until finish(), then the mean
    double max_abs = 0;
    int n = 0;
    void add(double e) {
        mean_abs += std::abs(e);
        max_abs = std::max(max_abs, std::abs(e));
        ++n;
    }
    void finish() { mean_abs /= std::max(n, 1); }
};

}  // namespace prism::calibration
