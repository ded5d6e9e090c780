#include "explorer/progress.hpp"

#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <limits>
#include <utility>

#include "explorer/table.hpp"
#include "src/common/error.hpp"

namespace prism::explorer {
namespace {

std::string percent_text(std::uint64_t done, std::uint64_t total) {
    // Truncated, not rounded: 99.96% must not read 100.0% before the last point is in.
    const double permille = total == 0
                                ? 1000.0
                                : std::floor(1000.0 * static_cast<double>(std::min(done, total)) /
                                             static_cast<double>(total));
    char buf[32];
    std::snprintf(buf, sizeof buf, "%.1f%%", permille / 10.0);
    return buf;
}

std::string rate_text(double rate) { return format_number(rate, 4) + " points/s"; }

}  // namespace

Progress::Progress(std::uint64_t total, std::ostream& out, bool is_terminal,
                   std::function<double()> clock_s, double interval_s)
    : total_(total),
      out_(out),
      is_terminal_(is_terminal),
      clock_s_(std::move(clock_s)),
      interval_s_(interval_s) {
    if (!clock_s_) throw Error("progress: no clock");
    if (!(interval_s_ > 0.0)) {
        throw Error("progress: interval must be positive, got " + format_number(interval_s_));
    }
    start_s_ = clock_s_();
    now_s_ = start_s_;
    last_print_s_ = start_s_;
}

void Progress::start_at(std::uint64_t done_before) {
    done_before_ = done_before;
    done_ = std::max(done_, done_before);
}

double Progress::elapsed_s() const { return now_s_ - start_s_; }

double Progress::rate_per_s() const {
    const double elapsed = elapsed_s();
    if (!(elapsed > 0.0)) return 0.0;
    const std::uint64_t mine = done_ > done_before_ ? done_ - done_before_ : 0;
    return static_cast<double>(mine) / elapsed;
}

double Progress::eta_s() const {
    if (done_ >= total_) return 0.0;
    const double rate = rate_per_s();
    if (!(rate > 0.0)) return std::numeric_limits<double>::quiet_NaN();
    return static_cast<double>(total_ - done_) / rate;
}

std::string Progress::live_line() const {
    const double fraction =
        total_ == 0 ? 1.0
                    : static_cast<double>(std::min(done_, total_)) / static_cast<double>(total_);
    const int filled = static_cast<int>(std::floor(fraction * bar_width));
    // Appended piece by piece: "[" + std::string(n, c) trips a false -Wrestrict in GCC 12.
    std::string bar(static_cast<std::size_t>(bar_width + 2), '.');
    bar.front() = '[';
    bar.back() = ']';
    std::fill_n(bar.begin() + 1, filled, '#');
    return bar + " " + std::to_string(done_) + "/" + std::to_string(total_) + " " +
           percent_text(done_, total_) + "  " + rate_text(rate_per_s()) + "  ETA " +
           format_duration(eta_s()) + "  elapsed " + format_duration(elapsed_s());
}

std::string Progress::plain_line() const {
    return "progress: " + std::to_string(done_) + "/" + std::to_string(total_) + " points (" +
           percent_text(done_, total_) + "), " + rate_text(rate_per_s()) + ", ETA " +
           format_duration(eta_s()) + ", elapsed " + format_duration(elapsed_s());
}

std::string Progress::final_line() const {
    return "finished: " + std::to_string(done_) + "/" + std::to_string(total_) + " points in " +
           format_duration(elapsed_s()) + ", " + rate_text(rate_per_s());
}

void Progress::draw(const std::string& text) {
    // '\r' returns to the start of the line; spaces blank what a longer previous line left.
    std::string line = "\r" + text;
    if (text.size() < last_width_) line.append(last_width_ - text.size(), ' ');
    last_width_ = text.size();
    out_ << line << std::flush;
}

void Progress::update(std::uint64_t done) {
    if (finished_) return;
    done_ = std::max(done, done_before_);
    now_s_ = clock_s_();
    if (is_terminal_) {
        // The first update draws at once so that the bar appears as soon as work starts.
        if (printed_ && now_s_ - last_print_s_ < terminal_interval_s) return;
        draw(live_line());
    } else {
        if (now_s_ - last_print_s_ < interval_s_) return;
        out_ << plain_line() << '\n' << std::flush;
    }
    printed_ = true;
    last_print_s_ = now_s_;
}

void Progress::finish() {
    if (finished_) return;
    finished_ = true;
    now_s_ = clock_s_();
    if (is_terminal_) {
        draw(final_line());
        out_ << '\n' << std::flush;
    } else {
        out_ << final_line() << '\n' << std::flush;
    }
}

std::string format_duration(double seconds) {
    if (!std::isfinite(seconds) || seconds < 0.0) return "--";
    char buf[48];
    if (seconds < 9.95) {
        std::snprintf(buf, sizeof buf, "%.1fs", seconds);
        return buf;
    }
    if (seconds >= 1e5 * 86400.0) return ">99999d";  // and llround stays defined
    const long long s = std::llround(seconds);
    if (s < 60) {
        std::snprintf(buf, sizeof buf, "%llds", s);
    } else if (s < 3600) {
        std::snprintf(buf, sizeof buf, "%lldm%02llds", s / 60, s % 60);
    } else if (s < 86400) {
        std::snprintf(buf, sizeof buf, "%lldh%02lldm%02llds", s / 3600, s % 3600 / 60, s % 60);
    } else {
        std::snprintf(buf, sizeof buf, "%lldd%02lldh%02lldm", s / 86400, s % 86400 / 3600,
                      s % 3600 / 60);
    }
    return buf;
}

bool is_terminal(int fd) { return ::isatty(fd) == 1; }

std::function<double()> steady_clock_s() {
    return [] {
        const auto since_epoch = std::chrono::steady_clock::now().time_since_epoch();
        return std::chrono::duration<double>(since_epoch).count();
    };
}

}  // namespace prism::explorer
