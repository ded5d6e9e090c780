#pragma once

#include <cstddef>
#include <ostream>
#include <string>
#include <vector>

namespace prism::explorer {

struct ReportOptions {
    std::size_t top = 10;              ///< rows of the ranking table
    std::string sort_metric;           ///< rank by this metric; empty = first objective
    bool descending = false;           ///< rank largest first (default: the objective's sense)
    std::vector<std::string> metrics;  ///< metrics to show; empty = objectives + key metrics
    bool show_front = true;
};

/// `prism report`: the file's header, counts, its Pareto front and the top points by a metric,
/// as aligned tables. Throws IoError for an unreadable file, ConfigError for an unknown metric.
void print_report(const std::string& path, const ReportOptions& options, std::ostream& out);

}  // namespace prism::explorer
