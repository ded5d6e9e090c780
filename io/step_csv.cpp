#include "io/step_csv.hpp"

#include <charconv>
#include <cmath>
#include <sstream>

#include <fmt/format.h>

#include "io/detail/bounded_read.hpp"
#include "io/work_limits.hpp"
#include "src/common/error.hpp"

namespace prism::io {

namespace {

std::vector<std::string> split(const std::string& line) {
    std::vector<std::string> out;
    std::string cell;
    std::istringstream in(line);
    while (std::getline(in, cell, ',')) out.push_back(cell);
    if (!line.empty() && line.back() == ',') out.emplace_back();
    return out;
}

double number(const std::string& cell, const std::string& path, int line, const char* column) {
    double v = 0;
    const char* end = cell.data() + cell.size();
    const auto [ptr, ec] = std::from_chars(cell.data(), end, v);
    if (ec != std::errc() || ptr != end || cell.empty()) {
        throw ConfigError(
            fmt::format("{}:{}: column '{}': '{}' is not a number", path, line, column, cell));
    }
    return v;
}

}  // namespace

StepRun read_step_csv(const std::filesystem::path& file, const StepSelection& selection) {
    StepRun run;
    run.path = file.string();
    const std::string& path = run.path;
    std::string text = detail::read_bounded(file, kMaxCsvFileBytes, "step file");
    // a UTF-8 byte-order mark (spreadsheets write one) is not part of the first column's name
    if (text.starts_with("\xEF\xBB\xBF")) text.erase(0, 3);
    std::istringstream in(std::move(text));
    std::string line;
    if (!std::getline(in, line)) {
        throw ConfigError(fmt::format("{}: empty file (no header)", path));
    }
    if (!line.empty() && line.back() == '\r') line.pop_back();
    const std::vector<std::string> header = split(line);
    const auto column = [&](const char* name) {
        for (std::size_t i = 0; i < header.size(); ++i) {
            if (header[i] == name) return i;
        }
        throw ConfigError(fmt::format(
            "{}:1: no column '{}' in the header (need step, step_time_s, first_step_after_eval)",
            path, name));
    };
    const std::size_t step_col = column("step");
    const std::size_t time_col = column("step_time_s");
    const std::size_t eval_col = column("first_step_after_eval");
    int line_no = 1;
    while (std::getline(in, line)) {
        ++line_no;
        if (!line.empty() && line.back() == '\r') line.pop_back();
        if (line.empty()) continue;
        const std::vector<std::string> cells = split(line);
        if (cells.size() < header.size()) {
            throw ConfigError(fmt::format("{}:{}: {} columns, the header has {}", path, line_no,
                                          cells.size(), header.size()));
        }
        const double step = number(cells[step_col], path, line_no, "step");
        const double time = number(cells[time_col], path, line_no, "step_time_s");
        const double after_eval = number(cells[eval_col], path, line_no, "first_step_after_eval");
        if (!(time > 0) || !std::isfinite(time)) {
            throw ConfigError(
                fmt::format("{}:{}: column 'step_time_s': {} is not a finite positive time", path,
                            line_no, cells[time_col]));
        }
        ++run.rows;
        if (step <= selection.warmup_steps) {
            ++run.dropped_warmup;
        } else if (selection.drop_first_after_eval && after_eval != 0) {
            ++run.dropped_after_eval;
        } else {
            run.step_time_s.push_back(time);
            run.step_index.push_back(static_cast<std::int64_t>(std::llround(step)));
        }
    }
    if (run.step_time_s.empty()) {
        throw ConfigError(
            fmt::format("{}: no step left after dropping {} warm-up and {} first steps "
                        "after evaluation (of {})",
                        path, run.dropped_warmup, run.dropped_after_eval, run.rows));
    }
    return run;
}

}  // namespace prism::io
