#include "io/detail/file_lock.hpp"

#include <fcntl.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <csignal>
#include <cstdlib>
#include <cstring>
#include <string>
#include <utility>

#include "io/detail/hdf5_util.hpp"
#include "io/detail/result_format.hpp"
#include "io/io_errors.hpp"
#include "src/common/error.hpp"

namespace prism::io::detail {

namespace {

std::string host_name() {
    char name[256] = {};
    if (::gethostname(name, sizeof name - 1) != 0) return "unknown";
    return name;
}

/// flock(2) cannot work on this file system (as opposed to: the lock is held).
bool flock_unsupported(int error_number) {
    return error_number == ENOLCK || error_number == ENOSYS || error_number == EOPNOTSUPP ||
           error_number == EINVAL;
}

void write_holder(int fd) {
    const std::string record = "pid " + std::to_string(::getpid()) + " on host " + host_name() +
                               " since " + now_iso8601() + "\n";
    if (::ftruncate(fd, 0) != 0) return;  // the record is informative only
    ssize_t ignored = ::pwrite(fd, record.data(), record.size(), 0);
    (void)ignored;
}

std::string read_holder(int fd) {
    char buffer[512] = {};
    const ssize_t n = ::pread(fd, buffer, sizeof buffer - 1, 0);
    std::string record = n > 0 ? std::string(buffer, static_cast<std::size_t>(n)) : std::string();
    while (!record.empty() && (record.back() == '\n' || record.back() == '\r')) record.pop_back();
    for (char& c : record) {
        if (c < ' ') c = ' ';
    }
    return record;
}

/// Whether the holder record names a process of this host that no longer exists.
bool holder_is_gone(const std::string& record) {
    const std::string host = " on host " + host_name() + " since ";
    if (record.rfind("pid ", 0) != 0 || record.find(host) == std::string::npos) return false;
    const long pid = std::strtol(record.c_str() + 4, nullptr, 10);
    if (pid <= 0) return false;
    return ::kill(static_cast<pid_t>(pid), 0) != 0 && errno == ESRCH;
}

bool same_file(int fd, const std::string& path, struct stat* out) {
    struct stat by_fd {};
    struct stat by_path {};
    if (::fstat(fd, &by_fd) != 0 || ::stat(path.c_str(), &by_path) != 0) return false;
    if (out != nullptr) *out = by_fd;
    return by_fd.st_dev == by_path.st_dev && by_fd.st_ino == by_path.st_ino;
}

[[noreturn]] void in_use(const std::string& target, const std::string& holder, bool no_flock,
                         const std::string& lock) {
    std::string message = target + ": in use by another prism sweep";
    if (!holder.empty()) message += " (" + holder + ")";
    if (no_flock) {
        message +=
            "; this file system does not support locks: if no sweep writes it, delete " + lock;
    }
    throw FileInUseError(message);
}

}  // namespace

std::string FileLock::lock_path(const std::string& target) { return target + ".lock"; }

std::string FileLock::live_holder(const std::string& target) {
    const int fd = ::open(lock_path(target).c_str(), O_RDONLY | O_CLOEXEC);
    if (fd < 0) return "";
    const std::string holder = read_holder(fd);
    ::close(fd);
    const std::string host = " on host " + host_name() + " since ";
    if (holder.rfind("pid ", 0) != 0 || holder.find(host) == std::string::npos) return "";
    const long pid = std::strtol(holder.c_str() + 4, nullptr, 10);
    if (pid <= 0 || (::kill(static_cast<pid_t>(pid), 0) != 0 && errno == ESRCH)) return "";
    return holder;
}

FileLock::FileLock(FileLock&& other) noexcept
    : fd_(std::exchange(other.fd_, -1)),
      path_(std::move(other.path_)),
      device_(other.device_),
      inode_(other.inode_) {}

FileLock& FileLock::operator=(FileLock&& other) noexcept {
    if (this != &other) {
        release();
        fd_ = std::exchange(other.fd_, -1);
        path_ = std::move(other.path_);
        device_ = other.device_;
        inode_ = other.inode_;
    }
    return *this;
}

void FileLock::release() noexcept {
    if (fd_ < 0) return;
    struct stat by_path {};
    // Remove the name only while it is still ours (and while we still hold the lock, so that a
    // process that opened it meanwhile finds it unlinked and starts over).
    if (::stat(path_.c_str(), &by_path) == 0 && by_path.st_dev == device_ &&
        by_path.st_ino == inode_) {
        ::unlink(path_.c_str());
    }
    ::close(fd_);
    fd_ = -1;
}

FileLock FileLock::acquire(const std::string& target) {
    const std::string lock = lock_path(target);
    for (int attempt = 0; attempt < 8; ++attempt) {
        // 1. A fresh lock file, locked before it gets its name.
        const auto stamp = std::chrono::steady_clock::now().time_since_epoch().count();
        const std::string temporary =
            lock + "." + std::to_string(::getpid()) + "." + std::to_string(stamp) + ".tmp";
        const int fd = ::open(temporary.c_str(), O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
        if (fd < 0) {
            if (errno == EEXIST) continue;
            throw IoError(lock + ": cannot create the lock file: " + system_error_text(errno));
        }
        const bool locked = ::flock(fd, LOCK_EX | LOCK_NB) == 0;
        const int lock_error = locked ? 0 : errno;
        if (!locked && !flock_unsupported(lock_error)) {
            ::close(fd);
            ::unlink(temporary.c_str());
            throw IoError(lock + ": cannot lock: " + system_error_text(lock_error));
        }
        write_holder(fd);
        if (::link(temporary.c_str(), lock.c_str()) == 0) {
            ::unlink(temporary.c_str());
            struct stat own {};
            ::fstat(fd, &own);
            return FileLock(fd, lock, own.st_dev, own.st_ino);
        }
        const int link_error = errno;
        ::close(fd);
        ::unlink(temporary.c_str());
        if (link_error != EEXIST) {
            throw IoError(lock + ": cannot create the lock file: " + system_error_text(link_error));
        }

        // 2. The name exists: is its holder alive?
        const int existing = ::open(lock.c_str(), O_RDWR | O_CLOEXEC);
        if (existing < 0) {
            if (errno == ENOENT) continue;  // released meanwhile
            throw IoError(lock + ": cannot open the lock file: " + system_error_text(errno));
        }
        if (::flock(existing, LOCK_EX | LOCK_NB) == 0) {
            // Its holder died: take it over, unless the name moved on meanwhile.
            struct stat own {};
            if (!same_file(existing, lock, &own)) {
                ::close(existing);
                continue;
            }
            write_holder(existing);
            return FileLock(existing, lock, own.st_dev, own.st_ino);
        }
        const int held_error = errno;
        const std::string holder = read_holder(existing);
        if (flock_unsupported(held_error)) {
            struct stat own {};
            if (holder_is_gone(holder) && same_file(existing, lock, &own)) {
                write_holder(existing);
                return FileLock(existing, lock, own.st_dev, own.st_ino);
            }
            ::close(existing);
            in_use(target, holder, true, lock);
        }
        ::close(existing);
        if (held_error == EWOULDBLOCK) in_use(target, holder, false, lock);
        throw IoError(lock + ": cannot lock: " + system_error_text(held_error));
    }
    throw IoError(lock + ": cannot claim the lock file (it keeps changing)");
}

}  // namespace prism::io::detail
