#include "io/loss_curves.hpp"

#include <array>
#include <cerrno>
#include <cmath>
#include <cstdlib>
#include <fstream>
#include <map>
#include <sstream>

#include <fmt/format.h>

#include "io/detail/bounded_read.hpp"
#include "io/work_limits.hpp"
#include "src/common/error.hpp"

namespace prism::io {

namespace {

constexpr std::size_t kMinPoints = 5;
/// A loss in nats per token is below ~20 (a perplexity below ~10^9): larger values are not a
/// loss curve, and past ~1e154 the fit's squares overflow.
constexpr double kMaxLoss = 1e6;

std::string trim(const std::string& text) {
    const auto begin = text.find_first_not_of(" \t\r");
    if (begin == std::string::npos) return {};
    const auto end = text.find_last_not_of(" \t\r");
    return text.substr(begin, end - begin + 1);
}

std::vector<std::string> split(const std::string& line) {
    std::vector<std::string> out;
    std::stringstream in(line);
    std::string field;
    while (std::getline(in, field, ',')) out.push_back(trim(field));
    if (!line.empty() && line.back() == ',') out.emplace_back();
    return out;
}

[[noreturn]] void fail(const std::string& path, std::size_t line, const std::string& message) {
    throw ConfigError(path, static_cast<std::int64_t>(line), 0, message);
}

double number(const std::string& path, std::size_t line, const std::string& column,
              const std::string& text) {
    errno = 0;
    char* end = nullptr;
    const double value = std::strtod(text.c_str(), &end);
    if (text.empty() || end != text.c_str() + text.size() || errno == ERANGE ||
        !std::isfinite(value)) {
        fail(path, line, fmt::format("{}: '{}' is not a finite number", column, text));
    }
    return value;
}

}  // namespace

std::vector<LossCurve> parse_loss_curves(const std::string& text, const std::string& path) {
    static const std::array<std::string, 3> kColumns{"learning_rate", "step", "loss"};
    std::array<std::size_t, 3> at{};
    std::size_t fields = 0;
    bool have_header = false;
    std::vector<LossCurve> curves;
    std::map<double, std::size_t> by_rate;
    std::map<double, std::size_t> last_line;
    std::stringstream in(text);
    std::string raw;
    for (std::size_t line = 1; std::getline(in, raw); ++line) {
        const std::string content = trim(raw);
        if (content.empty() || content.front() == '#') continue;
        const std::vector<std::string> row = split(content);
        if (!have_header) {
            for (std::size_t k = 0; k < kColumns.size(); ++k) {
                std::size_t found = row.size();
                for (std::size_t i = 0; i < row.size(); ++i) {
                    if (row[i] == kColumns[k]) found = i;
                }
                if (found == row.size()) {
                    fail(path, line,
                         fmt::format("header: no '{}' column (the header must name "
                                     "learning_rate, step and loss)",
                                     kColumns[k]));
                }
                at[k] = found;
            }
            fields = row.size();
            have_header = true;
            continue;
        }
        if (row.size() != fields) {
            fail(path, line, fmt::format("{} fields, but the header has {}", row.size(), fields));
        }
        const double rate = number(path, line, "learning_rate", row[at[0]]);
        const double step = number(path, line, "step", row[at[1]]);
        const double loss = number(path, line, "loss", row[at[2]]);
        if (std::fabs(loss) > kMaxLoss) {
            // the fit squares residuals: near 1e154 they overflow and the predictions turn
            // negative (issue 33)
            fail(path, line,
                 fmt::format("loss: {} is not a training loss (at most {:g} in magnitude)",
                             row[at[2]], kMaxLoss));
        }
        if (!(rate > 0)) fail(path, line, fmt::format("learning_rate: {} must be > 0", row[at[0]]));
        auto [it, inserted] = by_rate.try_emplace(rate, curves.size());
        if (inserted) {
            curves.push_back(LossCurve{rate, {}, {}, line});
        }
        LossCurve& curve = curves[it->second];
        if (!curve.steps.empty() && !(step > curve.steps.back())) {
            fail(path, line,
                 fmt::format("step: {} is not after step {} of learning_rate {} (line {})",
                             row[at[1]], curve.steps.back(), rate, last_line[rate]));
        }
        curve.steps.push_back(step);
        curve.losses.push_back(loss);
        last_line[rate] = line;
    }
    if (!have_header) fail(path, 0, "no header line (learning_rate,step,loss) and no data");
    if (curves.empty()) fail(path, 0, "no data rows after the header");
    for (const LossCurve& curve : curves) {
        if (curve.steps.size() < kMinPoints) {
            fail(path, 0,
                 fmt::format("learning_rate {}: {} points; a fit needs at least {}",
                             curve.learning_rate, curve.steps.size(), kMinPoints));
        }
    }
    return curves;
}

std::vector<LossCurve> read_loss_curves(const std::string& path) {
    std::string text = detail::read_bounded(path, kMaxCsvFileBytes, "loss-curve file");
    if (text.starts_with("\xEF\xBB\xBF")) text.erase(0, 3);  // a UTF-8 byte-order mark
    return parse_loss_curves(text, path);
}

}  // namespace prism::io
