#include "explorer/result_commands.hpp"

#include <filesystem>
#include <iostream>
#include <map>

#include <fmt/format.h>

#include "explorer/cli.hpp"
#include "explorer/design_space.hpp"
#include "io/experiment_loader.hpp"
#include "io/result_salvage.hpp"
#include "io/result_store.hpp"
#include "io/verify_store.hpp"
#include "src/common/error.hpp"

namespace prism::explorer {

namespace {

namespace fs = std::filesystem;

std::string way_forward(const std::string& path, const io::SalvagedResults& s) {
    const bool nothing = s.problem.find("nothing readable") != std::string::npos ||
                         (!s.header_read && s.problem.rfind("cut short: ", 0) != 0);
    if (nothing) {
        return "nothing can be saved: start again with `prism sweep EXPERIMENT.toml -o " + path +
               " --overwrite`";
    }
    return "save the committed rows that read back whole with `prism recover " + path +
           " -o NEW.h5`, then continue NEW.h5 with `prism sweep EXPERIMENT.toml -o NEW.h5 "
           "--resume`";
}

/// Why the file stands as it does, for the status line.
std::string writer_note(const std::string& path, const std::string& status,
                        std::int64_t format_version) {
    if (status == "complete") return "";
    if (format_version < 2) {
        // --resume refuses files of format 1: they are converted first (issue 33)
        return "; made in result format 1 by an older prism, which cannot be continued as it "
               "is: convert it with `prism recover " +
               path + " -o NEW.h5`, then continue NEW.h5 with --resume";
    }
    if (status != "running") return "";
    const std::string holder = io::result_file_writer(path);
    if (!holder.empty()) return "; being written by " + holder;
    return "; its writer stopped without closing it: continue with --resume";
}

/// A path that names no file a sweep could have written (a directory, /dev/null): bad input,
/// and no advice to sweep onto it with --overwrite, which the sweep would refuse.
void check_result_path(const std::string& path) {
    std::error_code ec;
    const auto status = fs::status(path, ec);
    if (fs::exists(status) && !fs::is_regular_file(status)) {
        throw ConfigError(
            fmt::format("{}: {}, not a result file", path,
                        fs::is_directory(status) ? "a directory" : "not a regular file"));
    }
}

}  // namespace

std::string damaged_file_message(const std::string& path) {
    const io::SalvagedResults s =
        io::salvage_result_file(path, io::SalvageMode::diagnose, std::string());
    if (s.problem.empty() || s.problem == "no such file") return "";
    return path + ": damaged: " + s.problem + "; " + way_forward(path, s);
}

int status_command(const std::string& path) {
    check_result_path(path);
    try {
        const io::ResultReader reader(path);
        const auto& h = reader.header();
        // A sweep stopped while it verified its front leaves a complete file without /verify:
        // the work is not done, and --resume does it.
        const bool unverified = h.status == "complete" &&
                                io::verification_requested(h.experiment_toml) &&
                                !io::read_verification(path).has_value();
        std::string verify_note;
        if (unverified) {
            const std::string holder = io::result_file_writer(path);
            verify_note = !holder.empty() ? "; its front is being verified by " + holder
                                          : std::string(
                                                "; the front's Monte Carlo verification (/verify, "
                                                "[evaluation] verify = \"montecarlo\") is missing: "
                                                "continue with --resume to verify");
        }
        std::cout << fmt::format(
            "{}: {} ({} of {} indices processed, {} rows{}{}){}\n", path,
            unverified ? "complete but not verified" : h.status, h.next_index, h.space_size,
            reader.rows(),
            reader.filtered_consistent() ? "" : "; filtered counts are recounted by --resume",
            writer_note(path, h.status, h.format_version), verify_note);
        if (h.status != "complete" && h.format_version < 2) return kExitError;  // not resumable
        return h.status == "complete" && !unverified ? kExitOk : kExitInterrupted;
    } catch (const IoError& e) {
        const std::string damaged = damaged_file_message(path);
        std::cerr << "prism: error: " << (damaged.empty() ? std::string(e.what()) : damaged)
                  << "\n";
        return kExitError;
    }
}

namespace {

/// The filtered counts below `next_index`, recounted from the experiment the file was made
/// from.
io::FilteredCounts recount(const io::SalvagedResults& s, const std::string& path) {
    const Experiment experiment =
        io::parse_experiment(s.header.experiment_toml, path + " (experiment_toml)");
    const DesignSpace space(experiment);
    return count_filtered(space, 0, s.next_index);
}

}  // namespace

int recover_command(const std::string& path, const std::string& output, bool overwrite) {
    std::error_code ec;
    if (fs::equivalent(path, output, ec)) {
        throw ConfigError("recover: -o " + output +
                          " is the damaged file itself; write the rows to another file");
    }
    check_result_path(path);
    // as `sweep` checks its output: an existing file is replaced only when asked (exit 2)
    const auto out_status = fs::status(output, ec);
    if (fs::exists(out_status) && !fs::is_regular_file(out_status)) {
        throw ConfigError("recover: -o " + output +
                          ": not a regular file (a result file must be one)");
    }
    if (fs::exists(out_status) && !overwrite) {
        throw ConfigError("recover: -o " + output +
                          ": file exists (use --overwrite to replace it)");
    }
    const std::string scratch = fs::absolute(output).parent_path().string();
    const io::SalvagedResults s = io::salvage_result_file(path, io::SalvageMode::recover, scratch);
    if (!s.header_read || s.rows.size() == 0) {
        std::cerr << fmt::format("prism: error: {}: {}; {}\n", path,
                                 s.problem.empty() ? "no committed rows" : s.problem,
                                 "nothing can be saved: start again with `prism sweep "
                                 "EXPERIMENT.toml -o " +
                                     path + " --overwrite`");
        return kExitError;
    }
    const io::FilteredCounts filtered = s.filtered_exact ? s.filtered : recount(s, path);
    io::ResultHeader header = s.header;
    io::ResultWriter writer = io::ResultWriter::create(
        output, header, s.columns, s.metrics, overwrite, io::chunk_rows_for(header.space_size));
    writer.append(s.rows);
    for (const auto& f : s.failures) writer.add_failure(f.index, f.message);
    writer.set_filtered(filtered);
    writer.flush(s.next_index);
    writer.set_status("interrupted");
    writer.close();
    std::cout << fmt::format(
        "{}: {} of {} committed rows of {} ({}), next index {} of {}; continue with `prism sweep "
        "EXPERIMENT.toml -o {} --resume`\n",
        output, s.rows.size(), s.rows_committed, path,
        s.problem.empty() ? "it reads whole" : s.problem, s.next_index, header.space_size, output);
    return kExitOk;
}

}  // namespace prism::explorer
