#pragma once

// Owning wrapper for an HDF5 identifier (file, group, dataset, attribute, dataspace, datatype,
// property list). Move-only; the destructor closes quietly and never throws.

#include <utility>

#include <hdf5.h>

namespace prism::io::detail {

class Handle {
  public:
    using Closer = herr_t (*)(hid_t);

    Handle() = default;
    Handle(hid_t id, Closer closer) noexcept : id_(id), closer_(closer) {}
    Handle(const Handle&) = delete;
    Handle& operator=(const Handle&) = delete;
    Handle(Handle&& other) noexcept
        : id_(std::exchange(other.id_, H5I_INVALID_HID)), closer_(other.closer_) {}
    Handle& operator=(Handle&& other) noexcept {
        if (this != &other) {
            reset();
            id_ = std::exchange(other.id_, H5I_INVALID_HID);
            closer_ = other.closer_;
        }
        return *this;
    }
    ~Handle() { reset(); }

    hid_t get() const noexcept { return id_; }
    bool valid() const noexcept { return id_ >= 0; }
    explicit operator bool() const noexcept { return valid(); }

    /// Closes the identifier; returns the HDF5 status (negative on failure), 0 when empty.
    herr_t close() noexcept {
        herr_t status = 0;
        if (id_ >= 0 && closer_ != nullptr) status = closer_(id_);
        id_ = H5I_INVALID_HID;
        return status;
    }

    void reset() noexcept { close(); }

    /// Forgets the identifier without closing it: for a file whose writes failed, whose close
    /// would flush more (HDF5 flushes on close); the process's exit lets it go.
    void abandon() noexcept { id_ = H5I_INVALID_HID; }

  private:
    hid_t id_ = H5I_INVALID_HID;
    Closer closer_ = nullptr;
};

inline Handle file_handle(hid_t id) { return Handle(id, &H5Fclose); }
inline Handle group_handle(hid_t id) { return Handle(id, &H5Gclose); }
inline Handle dataset_handle(hid_t id) { return Handle(id, &H5Dclose); }
inline Handle attribute_handle(hid_t id) { return Handle(id, &H5Aclose); }
inline Handle space_handle(hid_t id) { return Handle(id, &H5Sclose); }
inline Handle type_handle(hid_t id) { return Handle(id, &H5Tclose); }
inline Handle plist_handle(hid_t id) { return Handle(id, &H5Pclose); }

}  // namespace prism::io::detail
