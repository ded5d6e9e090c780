#pragma once

// Errors of the io layer that callers tell apart from other IoErrors: a failure of the storage
// under a file (full disk, I/O error), and a result file claimed by another writer.

#include <string>
#include <utility>

#include "src/common/error.hpp"

namespace prism::io {

/// The operating system refused a read or write of `path` (ENOSPC, EIO, EDQUOT, ...).
/// `what()` is "PATH: OBJECT: what failed: no space left on device"; `reason()` is only the
/// operating system's text ("no space left on device").
class StorageError : public IoError {
  public:
    StorageError(const std::string& message, std::string path, int error_number, std::string reason)
        : IoError(message),
          path_(std::move(path)),
          error_number_(error_number),
          reason_(std::move(reason)) {}

    const std::string& path() const noexcept { return path_; }
    int error_number() const noexcept { return error_number_; }
    const std::string& reason() const noexcept { return reason_; }

  private:
    std::string path_;
    int error_number_ = 0;
    std::string reason_;
};

/// Another live process writes the result file (or holds its lock file). `what()` names the
/// file and the holder: "x.h5: in use by another prism sweep (pid 4242 on host n1 since ...)".
class FileInUseError : public IoError {
  public:
    using IoError::IoError;
};

}  // namespace prism::io
