#pragma once

// Thin, checked helpers over the HDF5 C API for the result store. Every failure throws
// prism::IoError "FILE: OBJECT: what failed: why" (why: the operating system's error, e.g. "no
// space left on device", which makes it an io::StorageError; else the library's reason without
// its internals); HDF5's own printing to stderr is switched off by `silence_errors`, which every
// entry point calls.

#include <cstdint>
#include <string>
#include <vector>

#include <hdf5.h>

#include "io/detail/hdf5_handle.hpp"

namespace prism::io::detail {

/// The operating system's text for `error_number`, lower-case ("no space left on device").
std::string system_error_text(int error_number);

/// Turns off HDF5's automatic error printing (once per process; idempotent).
void silence_errors() noexcept;

/// The current HDF5 error stack boiled down for a user: the operating system's error (with its
/// errno) when a system call failed, else the most specific reason free of library internals.
struct LibraryError {
    std::string text;      ///< "" when the stack is empty
    int error_number = 0;  ///< errno of a failed system call, 0 if none
};
LibraryError library_error();
/// library_error().text
std::string last_error();

/// Throws IoError "file: object: what: why" (StorageError when a system call failed); `object`
/// may be empty. Clears the HDF5 error stack.
[[noreturn]] void fail(const std::string& file, const std::string& object, const std::string& what);

/// Where an operation happens, for error messages.
struct Where {
    const std::string& file;
    std::string object;
};

/// File access properties for result files: default (earliest) library version bounds, so
/// that files stay readable by older HDF5/h5py, also after a writer was killed; file locking on
/// but ignored where the file system does not support it (Lustre, NFS without locks).
Handle file_access_plist(const Where& where);

/// 1 if `path` is an HDF5 file, 0 if not, negative on error.
htri_t is_hdf5_file(const std::string& path);

// Objects --------------------------------------------------------------------------------------

/// True if `path` (relative to `loc`, one level) names a link.
bool link_exists(hid_t loc, const std::string& name, const Where& where);
Handle create_group(hid_t loc, const std::string& name, const Where& where);
Handle open_group(hid_t loc, const std::string& name, const Where& where);
Handle open_dataset(hid_t loc, const std::string& name, const Where& where);
void delete_link(hid_t loc, const std::string& name, const Where& where);

// Types ----------------------------------------------------------------------------------------

/// Variable-length UTF-8 string type (h5py reads it as str).
Handle vlen_string_type(const Where& where);
/// Enumeration on an unsigned 8-bit base with values 0..labels.size()-1 in label order.
Handle enum_type(const std::vector<std::string>& labels, const Where& where);
/// Labels of an enumeration type ordered by value; the values must be 0..n-1.
std::vector<std::string> enum_labels(hid_t type, const Where& where);

// Attributes -----------------------------------------------------------------------------------

bool has_attribute(hid_t obj, const std::string& name, const Where& where);
void write_attribute(hid_t obj, const std::string& name, const std::string& value,
                     const Where& where);
void write_attribute(hid_t obj, const std::string& name, std::uint64_t value, const Where& where);
void write_attribute(hid_t obj, const std::string& name, std::int64_t value, const Where& where);
void write_attribute(hid_t obj, const std::string& name, const std::vector<std::string>& values,
                     const Where& where);
void write_attribute(hid_t obj, const std::string& name, const std::vector<std::uint64_t>& values,
                     const Where& where);
std::string read_string_attribute(hid_t obj, const std::string& name, const Where& where);
std::vector<std::string> read_strings_attribute(hid_t obj, const std::string& name,
                                                const Where& where);
std::uint64_t read_u64_attribute(hid_t obj, const std::string& name, const Where& where);
std::int64_t read_i64_attribute(hid_t obj, const std::string& name, const Where& where);
std::vector<std::uint64_t> read_u64s_attribute(hid_t obj, const std::string& name,
                                               const Where& where);

// Datasets that grow along their first dimension ------------------------------------------------

/// Creates an empty dataset of shape [0, columns...] (unlimited rows), chunked by `chunk_rows`
/// rows, with shuffle + deflate level 4 when `compress`. `columns` empty makes a 1-D column.
/// Uncompressed chunks keep their size and place when rewritten, so small tables that are
/// rewritten at every commit stay valid on disk if the writer is killed.
Handle create_growing(hid_t loc, const std::string& name, hid_t file_type, std::size_t chunk_rows,
                      const std::vector<hsize_t>& columns, const Where& where,
                      bool compress = true);

/// File creation properties: file space is never reused within a session, so that data the
/// on-disk metadata still points to is not overwritten before the next flush.
Handle file_create_plist(const Where& where);
/// Rows (first dimension) of a dataset.
std::uint64_t row_count(hid_t dataset, const Where& where);
/// Rows per chunk of a chunked dataset (0 if not chunked).
std::uint64_t chunk_rows(hid_t dataset, const Where& where);
/// Resizes the first dimension to `rows` (grows or truncates).
void resize_rows(hid_t dataset, std::uint64_t rows, const Where& where);
/// Writes `count` rows of `mem_type` from `data` at rows [start, start+count), growing the
/// dataset when needed. `data` holds count * (product of the other dimensions) elements.
void write_rows(hid_t dataset, hid_t mem_type, const void* data, std::uint64_t start,
                std::uint64_t count, const Where& where);
/// Reads the first `count` rows into `out` (count * row size elements of `mem_type`).
void read_rows(hid_t dataset, hid_t mem_type, void* out, std::uint64_t count, const Where& where);
/// Reads rows [start, start+count) into `out`.
void read_row_range(hid_t dataset, hid_t mem_type, void* out, std::uint64_t start,
                    std::uint64_t count, const Where& where);
/// Variable-length string rows.
void write_string_rows(hid_t dataset, const std::vector<std::string>& values, std::uint64_t start,
                       const Where& where);
std::vector<std::string> read_string_rows(hid_t dataset, std::uint64_t count, const Where& where);

}  // namespace prism::io::detail
