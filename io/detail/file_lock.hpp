#pragma once

// One writer per result file: a lock file `X.h5.lock` beside it, held with flock(2) for as long
// as the writer lives, claimed before X.h5 is touched.
//
// - The lock file appears already locked: it is made under a temporary name, locked, filled
//   with its holder ("pid 4242 on host n1 since 2026-11-22T06:15:12Z") and only then linked to
//   its name (link(2) fails if the name exists), so no second writer sees it unlocked.
// - A writer that dies (kill -9, node crash) loses its flock with its process: the next writer
//   finds the lock file unlocked, takes it over and says nothing. A stale file is harmless.
// - The holder removes the file when it releases the lock (after checking that the name still
//   names its file).
// - Where flock is not supported (Lustre mounted without `flock`, some NFS setups), the holder
//   record decides: a holder on this host whose process is gone is stale; any other holder is
//   taken as live and the error says to delete the lock file if no sweep is running.

#include <sys/types.h>

#include <string>
#include <utility>

namespace prism::io::detail {

class FileLock {
  public:
    FileLock() = default;
    FileLock(FileLock&& other) noexcept;
    FileLock& operator=(FileLock&& other) noexcept;
    FileLock(const FileLock&) = delete;
    FileLock& operator=(const FileLock&) = delete;
    ~FileLock() { release(); }

    /// Claims `target` for writing. Throws FileInUseError "TARGET: in use by another prism
    /// sweep (pid P on host H since T)" when a live process holds it, IoError when the lock
    /// file cannot be made ("TARGET.lock: cannot create the lock file: permission denied").
    static FileLock acquire(const std::string& target);

    /// "TARGET.lock"
    static std::string lock_path(const std::string& target);

    /// The holder record of TARGET's lock file when it names a live process of this host
    /// ("pid P on host H since T"), else "". Takes no lock (informative only).
    static std::string live_holder(const std::string& target);

    /// Removes the lock file and drops the lock; does nothing when none is held.
    void release() noexcept;
    bool held() const noexcept { return fd_ >= 0; }

  private:
    FileLock(int fd, std::string path, dev_t device, ino_t inode) noexcept
        : fd_(fd), path_(std::move(path)), device_(device), inode_(inode) {}

    int fd_ = -1;
    std::string path_;
    dev_t device_ = 0;
    ino_t inode_ = 0;
};

}  // namespace prism::io::detail
