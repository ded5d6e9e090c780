#pragma once

#include <cstdint>
#include <stdexcept>
#include <string>
#include <string_view>
#include <utility>

namespace prism {

/// Root of every exception the project throws on purpose.
class Error : public std::runtime_error {
  public:
    using std::runtime_error::runtime_error;
};

/// A bad experiment file or command line. `what()` is the full user-facing message,
/// `file:line:col: key: problem` when the location is known.
class ConfigError : public Error {
  public:
    explicit ConfigError(const std::string& message) : Error(message) {}
    ConfigError(std::string file, std::int64_t line, std::int64_t column,
                const std::string& message)
        : Error(format_location(file, line, column) + message),
          file_(std::move(file)),
          line_(line),
          column_(column) {}

    const std::string& file() const noexcept { return file_; }
    std::int64_t line() const noexcept { return line_; }
    std::int64_t column() const noexcept { return column_; }

  private:
    static std::string format_location(const std::string& file, std::int64_t line,
                                       std::int64_t column) {
        // Appends piece by piece: `a + ":" + b` chains trip GCC 12's -Wrestrict false positive.
        std::string out;
        out.append(file.empty() ? std::string_view("<input>") : std::string_view(file));
        if (line > 0) {
            out.push_back(':');
            out.append(std::to_string(line));
            if (column > 0) {
                out.push_back(':');
                out.append(std::to_string(column));
            }
        }
        out.append(": ");
        return out;
    }

    std::string file_;
    std::int64_t line_ = 0;
    std::int64_t column_ = 0;
};

/// A file that cannot be read or written (HDF5, TOML, traces); names the path and dataset.
class IoError : public Error {
  public:
    using Error::Error;
};

/// A design point the model cannot evaluate (invalid combination, numerical failure).
class ModelError : public Error {
  public:
    using Error::Error;
};

/// An MPI call that failed, or a peer that broke the protocol.
class MpiError : public Error {
  public:
    using Error::Error;
};

}  // namespace prism
