#pragma once

#include <cstdint>
#include <functional>
#include <ostream>
#include <string>

namespace prism::explorer {

/// Progress report of a sweep. On a terminal, a live line redrawn in place with '\r' (bar,
/// done/total, percent, points/s, ETA, elapsed), at most once per `terminal_interval_s`;
/// otherwise (a batch job's log) one plain line per `interval_s`. The clock is injected
/// (seconds, monotonic) so that tests are exact; steady_clock_s() is the real one.
///
/// Rates count only the points done by this process: after start_at(n) (points already done
/// before a resume) the rate is (done - n) / elapsed and the ETA is (total - done) / rate.
class Progress {
  public:
    static constexpr double terminal_interval_s = 0.2;  ///< at most 5 redraws per second
    static constexpr int bar_width = 20;

    /// Starts the clock now. Throws prism::Error when interval_s is not positive or clock_s is
    /// empty.
    Progress(std::uint64_t total, std::ostream& out, bool is_terminal,
             std::function<double()> clock_s, double interval_s = 5.0);

    /// Points already done before this process started (resume); call before update().
    void start_at(std::uint64_t done_before);

    /// Reports that `done` points (of all, including those before a resume) are complete and
    /// prints when the throttle allows. Ignored after finish().
    void update(std::uint64_t done);

    /// Prints the final line (points done, total time, mean points/s) once; on a terminal it
    /// replaces the live line and ends it with '\n'. Later calls do nothing.
    void finish();

    /// Seconds since construction, by the injected clock.
    double elapsed_s() const;
    /// Mean points per second since construction, for points done by this process; 0 before
    /// any time has passed.
    double rate_per_s() const;
    /// Seconds left at the mean rate; NaN when unknown (no rate yet), 0 when complete.
    double eta_s() const;

    std::uint64_t total() const noexcept { return total_; }
    std::uint64_t done() const noexcept { return done_; }

    /// The text of the current report, without '\r' or '\n' (what update() would print).
    std::string live_line() const;
    std::string plain_line() const;
    std::string final_line() const;

  private:
    void draw(const std::string& text);

    std::uint64_t total_;
    std::ostream& out_;
    bool is_terminal_;
    std::function<double()> clock_s_;
    double interval_s_;
    double start_s_;
    double now_s_;
    double last_print_s_;
    bool printed_ = false;
    bool finished_ = false;
    std::uint64_t done_ = 0;
    std::uint64_t done_before_ = 0;
    std::size_t last_width_ = 0;  // of the live line, to blank out what a shorter one leaves
};

/// "0.4s", "9.9s" under 10 s; then "42s", "3m07s", "2h05m09s", "3d04h12m", ">99999d"; "--" for
/// NaN, infinite or negative.
std::string format_duration(double seconds);

/// Whether file descriptor `fd` (2 for stderr) is a terminal.
bool is_terminal(int fd);

/// std::chrono::steady_clock in seconds, for Progress.
std::function<double()> steady_clock_s();

}  // namespace prism::explorer
