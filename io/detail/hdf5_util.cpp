#include "io/detail/hdf5_util.hpp"

#include <algorithm>
#include <array>
#include <cctype>
#include <cstring>
#include <mutex>

#include "io/io_errors.hpp"
#include "src/common/error.hpp"

namespace prism::io::detail {

namespace {

void reclaim_vlen(hid_t type, hid_t space, void* buffer) {
#if H5_VERSION_GE(1, 12, 0)
    H5Treclaim(type, space, H5P_DEFAULT, buffer);
#else
    H5Dvlen_reclaim(type, space, H5P_DEFAULT, buffer);
#endif
}

/// What the library's error stack says, boiled down for a user: the operating system's error
/// when a system call failed (its errno, from the record that names it), a truncated file's
/// sizes, or the innermost record's text when it holds no library internals (pointers, flags,
/// field names); else the innermost record's error class ("unable to open file").
struct StackWalk {
    LibraryError error;
    bool first = true;
};

std::string lower_first(std::string text) {
    if (!text.empty())
        text[0] = static_cast<char>(std::tolower(static_cast<unsigned char>(text[0])));
    return text;
}

/// The integer after `key` in `text` ("errno = 28" -> 28), or -1.
long long number_after(const std::string& text, const std::string& key) {
    const auto at = text.find(key);
    if (at == std::string::npos) return -1;
    std::size_t i = at + key.size();
    if (i >= text.size() || std::isdigit(static_cast<unsigned char>(text[i])) == 0) return -1;
    long long value = 0;
    while (i < text.size() && std::isdigit(static_cast<unsigned char>(text[i])) != 0) {
        value = value * 10 + (text[i++] - '0');
    }
    return value;
}

bool is_clean(const std::string& text) {
    for (const char* internal : {"0x", "->", "=", "\n", "o_flags", "addr", "sblock", "%"}) {
        if (text.find(internal) != std::string::npos) return false;
    }
    return !text.empty();
}

herr_t walk_record(unsigned, const H5E_error2_t* err, void* client) {
    // Walking upward visits the most specific record first.
    auto* walk = static_cast<StackWalk*>(client);
    if (err == nullptr || err->desc == nullptr) return 0;
    const std::string desc = err->desc;
    if (walk->error.error_number == 0) {
        const long long number = number_after(desc, "errno = ");
        if (number > 0) {
            // The operating system's error says it all, whatever else the stack holds.
            walk->error.error_number = static_cast<int>(number);
            walk->error.text = lower_first(std::strerror(static_cast<int>(number)));
            walk->first = false;
            return 0;
        }
        if (desc.find("truncated file") != std::string::npos) {
            const long long eof = number_after(desc, "eof = ");
            const long long stored = number_after(desc, "stored_eof = ");
            walk->error.text = "the file is truncated (" + std::to_string(eof) +
                               " bytes; its superblock says " + std::to_string(stored) + ")";
            walk->first = false;
            return 0;
        }
    }
    if (walk->first && walk->error.error_number == 0) {
        walk->first = false;
        if (is_clean(desc)) {
            walk->error.text = lower_first(desc);
        } else {
            char text[256] = {};
            if (H5Eget_msg(err->min_num, nullptr, text, sizeof text) > 0) {
                walk->error.text = lower_first(text);
            }
        }
    }
    return 0;
}

[[noreturn]] void fail_at(const Where& where, const std::string& what) {
    fail(where.file, where.object, what);
}

template <typename T>
T check(T status, const Where& where, const std::string& what) {
    if (status < 0) fail_at(where, what);
    return status;
}

Handle scalar_space(const Where& where) {
    Handle space = space_handle(H5Screate(H5S_SCALAR));
    if (!space) fail_at(where, "cannot create a scalar dataspace");
    return space;
}

/// Opens `name` on `obj` for writing with `type`/`space`, replacing an attribute whose type
/// class or shape differs.
Handle attribute_for_write(hid_t obj, const std::string& name, hid_t type, hid_t space,
                           const Where& where) {
    const htri_t exists =
        check(H5Aexists(obj, name.c_str()), where, "cannot look up attribute '" + name + "'");
    if (exists > 0) {
        // Overwrite in place when type and shape agree: no churn in the object header on
        // every flush.
        Handle old = attribute_handle(H5Aopen(obj, name.c_str(), H5P_DEFAULT));
        Handle old_type = type_handle(old ? H5Aget_type(old.get()) : H5I_INVALID_HID);
        Handle old_space = space_handle(old ? H5Aget_space(old.get()) : H5I_INVALID_HID);
        if (old_type && old_space && H5Tequal(old_type.get(), type) > 0 &&
            H5Sextent_equal(old_space.get(), space) > 0) {
            return old;
        }
        old.close();
        check(H5Adelete(obj, name.c_str()), where, "cannot replace attribute '" + name + "'");
    }
    Handle attr =
        attribute_handle(H5Acreate2(obj, name.c_str(), type, space, H5P_DEFAULT, H5P_DEFAULT));
    if (!attr) fail_at(where, "cannot create attribute '" + name + "'");
    return attr;
}

Handle open_attribute(hid_t obj, const std::string& name, const Where& where) {
    const htri_t exists =
        check(H5Aexists(obj, name.c_str()), where, "cannot look up attribute '" + name + "'");
    if (exists == 0) fail_at(where, "missing attribute '" + name + "'");
    Handle attr = attribute_handle(H5Aopen(obj, name.c_str(), H5P_DEFAULT));
    if (!attr) fail_at(where, "cannot open attribute '" + name + "'");
    return attr;
}

std::vector<std::string> read_strings(hid_t attr_or_dataset, bool is_attribute, hid_t file_space,
                                      hid_t mem_space, std::size_t count, const Where& where,
                                      const std::string& what) {
    std::vector<std::string> out;
    if (count == 0) return out;
    Handle type =
        type_handle(is_attribute ? H5Aget_type(attr_or_dataset) : H5Dget_type(attr_or_dataset));
    if (!type) fail_at(where, "cannot get the type of " + what);
    if (H5Tget_class(type.get()) != H5T_STRING) fail_at(where, what + " is not a string");
    const htri_t variable = check(H5Tis_variable_str(type.get()), where, "cannot inspect " + what);
    out.reserve(count);
    if (variable > 0) {
        Handle mem_type = vlen_string_type(where);
        std::vector<char*> buffer(count, nullptr);
        const herr_t status = is_attribute ? H5Aread(attr_or_dataset, mem_type.get(), buffer.data())
                                           : H5Dread(attr_or_dataset, mem_type.get(), mem_space,
                                                     file_space, H5P_DEFAULT, buffer.data());
        if (status < 0) fail_at(where, "cannot read " + what);
        for (const char* s : buffer) out.emplace_back(s != nullptr ? s : "");
        Handle space =
            space_handle(H5Screate_simple(1, std::array<hsize_t, 1>{count}.data(), nullptr));
        reclaim_vlen(mem_type.get(), space.get(), buffer.data());
    } else {
        const std::size_t size = H5Tget_size(type.get());
        if (size == 0) fail_at(where, "cannot inspect " + what);
        Handle mem_type = type_handle(H5Tcopy(H5T_C_S1));
        check(H5Tset_size(mem_type.get(), size), where, "cannot build a string type");
        std::vector<char> buffer(size * count, '\0');
        const herr_t status = is_attribute ? H5Aread(attr_or_dataset, mem_type.get(), buffer.data())
                                           : H5Dread(attr_or_dataset, mem_type.get(), mem_space,
                                                     file_space, H5P_DEFAULT, buffer.data());
        if (status < 0) fail_at(where, "cannot read " + what);
        for (std::size_t i = 0; i < count; ++i) {
            const char* begin = buffer.data() + i * size;
            out.emplace_back(begin, std::find(begin, begin + size, '\0'));
        }
    }
    return out;
}

std::vector<hsize_t> dims_of(hid_t dataset, const Where& where) {
    Handle space = space_handle(H5Dget_space(dataset));
    if (!space) fail_at(where, "cannot get the dataspace");
    const int rank = H5Sget_simple_extent_ndims(space.get());
    if (rank < 1) fail_at(where, "expected an array dataset");
    std::vector<hsize_t> dims(static_cast<std::size_t>(rank));
    check(H5Sget_simple_extent_dims(space.get(), dims.data(), nullptr), where,
          "cannot get the extent");
    return dims;
}

}  // namespace

namespace {

/// HDF5 closes what is still open when the process exits; a file whose close failed (a full
/// disk) makes that close crash (HDF5 1.10.8, H5F__close_cb). The writer closes everything it
/// can itself, and a file left open keeps its last commit, so the exit-time close is turned
/// off before the library starts.
[[maybe_unused]] const bool kNoCloseAtExit = H5dont_atexit() >= 0;

}  // namespace

void silence_errors() noexcept {
    static std::once_flag once;
    std::call_once(once, [] { H5Eset_auto2(H5E_DEFAULT, nullptr, nullptr); });
}

std::string system_error_text(int error_number) { return lower_first(std::strerror(error_number)); }

LibraryError library_error() {
    StackWalk walk;
    H5Ewalk2(H5E_DEFAULT, H5E_WALK_UPWARD, &walk_record, &walk);
    return walk.error;
}

std::string last_error() { return library_error().text; }

void fail(const std::string& file, const std::string& object, const std::string& what) {
    std::string message = object.empty() ? file + ": " + what : file + ": " + object + ": " + what;
    const LibraryError library = library_error();
    H5Eclear2(H5E_DEFAULT);
    if (!library.text.empty()) message += ": " + library.text;
    if (library.error_number != 0) {
        throw StorageError(message, file, library.error_number, library.text);
    }
    throw IoError(message);
}

Handle file_access_plist(const Where& where) {
    Handle fapl = plist_handle(H5Pcreate(H5P_FILE_ACCESS));
    if (!fapl) fail_at(where, "cannot create file access properties");
#if (H5_VERS_MAJOR == 1 && H5_VERS_MINOR == 10 && H5_VERS_RELEASE >= 7) || H5_VERSION_GE(1, 12, 1)
    check(H5Pset_file_locking(fapl.get(), true, true), where, "cannot set file locking");
#endif
    // Dirty metadata (chunk indices, dataset extents, attributes) reaches the disk only at
    // H5Fflush, never half-way through by eviction: a killed writer leaves the state of its
    // last flush.
    H5AC_cache_config_t config{};
    config.version = H5AC__CURR_CACHE_CONFIG_VERSION;
    check(H5Pget_mdc_config(fapl.get(), &config), where, "cannot get the metadata cache config");
    config.evictions_enabled = false;
    config.incr_mode = H5C_incr__off;
    config.flash_incr_mode = H5C_flash_incr__off;
    config.decr_mode = H5C_decr__off;
    check(H5Pset_mdc_config(fapl.get(), &config), where, "cannot set the metadata cache config");
    return fapl;
}

Handle file_create_plist(const Where& where) {
    Handle fcpl = plist_handle(H5Pcreate(H5P_FILE_CREATE));
    if (!fcpl) fail_at(where, "cannot create file creation properties");
    check(H5Pset_file_space_strategy(fcpl.get(), H5F_FSPACE_STRATEGY_NONE, false, 1), where,
          "cannot set the file space strategy");
    return fcpl;
}

htri_t is_hdf5_file(const std::string& path) {
#if H5_VERSION_GE(1, 12, 0)
    return H5Fis_accessible(path.c_str(), H5P_DEFAULT);
#else
    return H5Fis_hdf5(path.c_str());
#endif
}

bool link_exists(hid_t loc, const std::string& name, const Where& where) {
    return check(H5Lexists(loc, name.c_str(), H5P_DEFAULT), where,
                 "cannot look up '" + name + "'") > 0;
}

Handle create_group(hid_t loc, const std::string& name, const Where& where) {
    Handle group =
        group_handle(H5Gcreate2(loc, name.c_str(), H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT));
    if (!group) fail_at(where, "cannot create group '" + name + "'");
    return group;
}

Handle open_group(hid_t loc, const std::string& name, const Where& where) {
    if (!link_exists(loc, name, where)) fail_at(where, "missing group '" + name + "'");
    Handle group = group_handle(H5Gopen2(loc, name.c_str(), H5P_DEFAULT));
    if (!group) fail_at(where, "cannot open group '" + name + "'");
    return group;
}

Handle open_dataset(hid_t loc, const std::string& name, const Where& where) {
    if (!link_exists(loc, name, where)) fail_at(where, "missing dataset '" + name + "'");
    Handle dataset = dataset_handle(H5Dopen2(loc, name.c_str(), H5P_DEFAULT));
    if (!dataset) fail_at(where, "cannot open dataset '" + name + "'");
    return dataset;
}

void delete_link(hid_t loc, const std::string& name, const Where& where) {
    check(H5Ldelete(loc, name.c_str(), H5P_DEFAULT), where, "cannot delete '" + name + "'");
}

Handle vlen_string_type(const Where& where) {
    Handle type = type_handle(H5Tcopy(H5T_C_S1));
    if (!type) fail_at(where, "cannot build a string type");
    check(H5Tset_size(type.get(), H5T_VARIABLE), where, "cannot build a string type");
    check(H5Tset_cset(type.get(), H5T_CSET_UTF8), where, "cannot build a string type");
    return type;
}

Handle enum_type(const std::vector<std::string>& labels, const Where& where) {
    Handle type = type_handle(H5Tenum_create(H5T_NATIVE_UINT8));
    if (!type) fail_at(where, "cannot build an enumeration type");
    for (std::size_t i = 0; i < labels.size(); ++i) {
        const auto value = static_cast<std::uint8_t>(i);
        check(H5Tenum_insert(type.get(), labels[i].c_str(), &value), where,
              "cannot add enumeration label '" + labels[i] + "'");
    }
    return type;
}

std::vector<std::string> enum_labels(hid_t type, const Where& where) {
    const int n = check(H5Tget_nmembers(type), where, "cannot read the enumeration labels");
    std::vector<std::string> labels(static_cast<std::size_t>(n));
    for (int i = 0; i < n; ++i) {
        char* name = H5Tget_member_name(type, static_cast<unsigned>(i));
        if (name == nullptr) fail_at(where, "cannot read the enumeration labels");
        std::string label(name);
        H5free_memory(name);
        // Read the value as a 64-bit integer whatever the base size is.
        long long value = 0;
        std::vector<unsigned char> raw(H5Tget_size(type), 0);
        check(H5Tget_member_value(type, static_cast<unsigned>(i), raw.data()), where,
              "cannot read the enumeration labels");
        Handle base = type_handle(H5Tget_super(type));
        if (!base) fail_at(where, "cannot read the enumeration labels");
        std::vector<unsigned char> widened(std::max<std::size_t>(raw.size(), 8), 0);
        std::copy(raw.begin(), raw.end(), widened.begin());
        check(H5Tconvert(base.get(), H5T_NATIVE_LLONG, 1, widened.data(), nullptr, H5P_DEFAULT),
              where, "cannot read the enumeration labels");
        std::copy_n(widened.data(), sizeof value, reinterpret_cast<unsigned char*>(&value));
        if (value < 0 || value >= n) {
            fail_at(where, "enumeration label '" + label + "' has value " + std::to_string(value) +
                               " outside 0.." + std::to_string(n - 1));
        }
        labels[static_cast<std::size_t>(value)] = std::move(label);
    }
    return labels;
}

bool has_attribute(hid_t obj, const std::string& name, const Where& where) {
    return check(H5Aexists(obj, name.c_str()), where, "cannot look up attribute '" + name + "'") >
           0;
}

void write_attribute(hid_t obj, const std::string& name, const std::string& value,
                     const Where& where) {
    Handle type = vlen_string_type(where);
    Handle space = scalar_space(where);
    Handle attr = attribute_for_write(obj, name, type.get(), space.get(), where);
    const char* data = value.c_str();
    check(H5Awrite(attr.get(), type.get(), &data), where, "cannot write attribute '" + name + "'");
}

void write_attribute(hid_t obj, const std::string& name, std::uint64_t value, const Where& where) {
    Handle space = scalar_space(where);
    Handle attr = attribute_for_write(obj, name, H5T_STD_U64LE, space.get(), where);
    check(H5Awrite(attr.get(), H5T_NATIVE_UINT64, &value), where,
          "cannot write attribute '" + name + "'");
}

void write_attribute(hid_t obj, const std::string& name, std::int64_t value, const Where& where) {
    Handle space = scalar_space(where);
    Handle attr = attribute_for_write(obj, name, H5T_STD_I64LE, space.get(), where);
    check(H5Awrite(attr.get(), H5T_NATIVE_INT64, &value), where,
          "cannot write attribute '" + name + "'");
}

void write_attribute(hid_t obj, const std::string& name, const std::vector<std::string>& values,
                     const Where& where) {
    Handle type = vlen_string_type(where);
    const hsize_t n = values.size();
    Handle space = space_handle(H5Screate_simple(1, &n, nullptr));
    if (!space) fail_at(where, "cannot create a dataspace");
    Handle attr = attribute_for_write(obj, name, type.get(), space.get(), where);
    std::vector<const char*> data;
    data.reserve(values.size());
    for (const auto& v : values) data.push_back(v.c_str());
    check(H5Awrite(attr.get(), type.get(), data.data()), where,
          "cannot write attribute '" + name + "'");
}

void write_attribute(hid_t obj, const std::string& name, const std::vector<std::uint64_t>& values,
                     const Where& where) {
    const hsize_t n = values.size();
    Handle space = space_handle(H5Screate_simple(1, &n, nullptr));
    if (!space) fail_at(where, "cannot create a dataspace");
    Handle attr = attribute_for_write(obj, name, H5T_STD_U64LE, space.get(), where);
    check(H5Awrite(attr.get(), H5T_NATIVE_UINT64, values.data()), where,
          "cannot write attribute '" + name + "'");
}

std::string read_string_attribute(hid_t obj, const std::string& name, const Where& where) {
    Handle attr = open_attribute(obj, name, where);
    Handle space = space_handle(H5Aget_space(attr.get()));
    if (!space) fail_at(where, "cannot read attribute '" + name + "'");
    const hssize_t n = H5Sget_simple_extent_npoints(space.get());
    if (n != 1) fail_at(where, "attribute '" + name + "' is not a single string");
    return read_strings(attr.get(), true, H5S_ALL, H5S_ALL, 1, where,
                        "attribute '" + name + "'")[0];
}

std::vector<std::string> read_strings_attribute(hid_t obj, const std::string& name,
                                                const Where& where) {
    Handle attr = open_attribute(obj, name, where);
    Handle space = space_handle(H5Aget_space(attr.get()));
    if (!space) fail_at(where, "cannot read attribute '" + name + "'");
    const hssize_t n = check(H5Sget_simple_extent_npoints(space.get()), where,
                             "cannot read attribute '" + name + "'");
    return read_strings(attr.get(), true, H5S_ALL, H5S_ALL, static_cast<std::size_t>(n), where,
                        "attribute '" + name + "'");
}

namespace {

template <typename T>
T read_scalar_attribute(hid_t obj, const std::string& name, hid_t mem_type, const Where& where) {
    Handle attr = open_attribute(obj, name, where);
    Handle type = type_handle(H5Aget_type(attr.get()));
    if (!type) fail_at(where, "cannot read attribute '" + name + "'");
    if (H5Tget_class(type.get()) != H5T_INTEGER) {
        fail_at(where, "attribute '" + name + "' is not an integer");
    }
    Handle space = space_handle(H5Aget_space(attr.get()));
    if (!space || H5Sget_simple_extent_npoints(space.get()) != 1) {
        fail_at(where, "attribute '" + name + "' is not a single integer");
    }
    T value{};
    check(H5Aread(attr.get(), mem_type, &value), where, "cannot read attribute '" + name + "'");
    return value;
}

}  // namespace

std::uint64_t read_u64_attribute(hid_t obj, const std::string& name, const Where& where) {
    return read_scalar_attribute<std::uint64_t>(obj, name, H5T_NATIVE_UINT64, where);
}

std::int64_t read_i64_attribute(hid_t obj, const std::string& name, const Where& where) {
    return read_scalar_attribute<std::int64_t>(obj, name, H5T_NATIVE_INT64, where);
}

std::vector<std::uint64_t> read_u64s_attribute(hid_t obj, const std::string& name,
                                               const Where& where) {
    Handle attr = open_attribute(obj, name, where);
    Handle type = type_handle(H5Aget_type(attr.get()));
    Handle space = space_handle(H5Aget_space(attr.get()));
    if (!type || !space) fail_at(where, "cannot read attribute '" + name + "'");
    if (H5Tget_class(type.get()) != H5T_INTEGER) {
        fail_at(where, "attribute '" + name + "' is not an integer array");
    }
    const hssize_t n = check(H5Sget_simple_extent_npoints(space.get()), where,
                             "cannot read attribute '" + name + "'");
    std::vector<std::uint64_t> values(static_cast<std::size_t>(n), 0);
    if (n > 0) {
        check(H5Aread(attr.get(), H5T_NATIVE_UINT64, values.data()), where,
              "cannot read attribute '" + name + "'");
    }
    return values;
}

Handle create_growing(hid_t loc, const std::string& name, hid_t file_type, std::size_t chunk_rows,
                      const std::vector<hsize_t>& columns, const Where& where, bool compress) {
    const Where here{where.file, where.object.empty() ? name : where.object};
    std::vector<hsize_t> dims{0};
    std::vector<hsize_t> max_dims{H5S_UNLIMITED};
    std::vector<hsize_t> chunk{std::max<hsize_t>(1, chunk_rows)};
    for (const hsize_t c : columns) {
        dims.push_back(c);
        max_dims.push_back(c);
        chunk.push_back(std::max<hsize_t>(1, c));
    }
    const int rank = static_cast<int>(dims.size());
    Handle space = space_handle(H5Screate_simple(rank, dims.data(), max_dims.data()));
    if (!space) fail_at(here, "cannot create a dataspace");
    Handle dcpl = plist_handle(H5Pcreate(H5P_DATASET_CREATE));
    if (!dcpl) fail_at(here, "cannot create a property list");
    check(H5Pset_chunk(dcpl.get(), rank, chunk.data()), here, "cannot set chunking");
    if (compress) {
        check(H5Pset_shuffle(dcpl.get()), here, "cannot set the shuffle filter");
        check(H5Pset_deflate(dcpl.get(), 4), here, "cannot set deflate compression");
    }
    Handle dataset = dataset_handle(H5Dcreate2(loc, name.c_str(), file_type, space.get(),
                                               H5P_DEFAULT, dcpl.get(), H5P_DEFAULT));
    if (!dataset) fail_at(here, "cannot create dataset");
    return dataset;
}

std::uint64_t row_count(hid_t dataset, const Where& where) { return dims_of(dataset, where)[0]; }

std::uint64_t chunk_rows(hid_t dataset, const Where& where) {
    Handle dcpl = plist_handle(H5Dget_create_plist(dataset));
    if (!dcpl) fail_at(where, "cannot get the creation properties");
    if (H5Pget_layout(dcpl.get()) != H5D_CHUNKED) return 0;
    std::array<hsize_t, 8> chunk{};
    const int rank = H5Pget_chunk(dcpl.get(), static_cast<int>(chunk.size()), chunk.data());
    if (rank < 1) fail_at(where, "cannot get the chunk shape");
    return chunk[0];
}

void resize_rows(hid_t dataset, std::uint64_t rows, const Where& where) {
    std::vector<hsize_t> dims = dims_of(dataset, where);
    dims[0] = rows;
    check(H5Dset_extent(dataset, dims.data()), where,
          "cannot resize to " + std::to_string(rows) + " rows");
}

namespace {

/// Selects rows [start, start+count) of `dataset` (which has at least that many rows); returns
/// the file and memory dataspaces.
std::pair<Handle, Handle> select_rows(hid_t dataset, std::uint64_t start, std::uint64_t count,
                                      const Where& where) {
    Handle file_space = space_handle(H5Dget_space(dataset));
    if (!file_space) fail_at(where, "cannot get the dataspace");
    const int rank = H5Sget_simple_extent_ndims(file_space.get());
    std::vector<hsize_t> dims(static_cast<std::size_t>(std::max(rank, 1)));
    check(H5Sget_simple_extent_dims(file_space.get(), dims.data(), nullptr), where,
          "cannot get the extent");
    std::vector<hsize_t> offset(dims.size(), 0);
    std::vector<hsize_t> shape = dims;
    offset[0] = start;
    shape[0] = count;
    check(H5Sselect_hyperslab(file_space.get(), H5S_SELECT_SET, offset.data(), nullptr,
                              shape.data(), nullptr),
          where, "cannot select rows");
    Handle mem_space = space_handle(H5Screate_simple(rank, shape.data(), nullptr));
    if (!mem_space) fail_at(where, "cannot create a dataspace");
    return {std::move(file_space), std::move(mem_space)};
}

}  // namespace

void write_rows(hid_t dataset, hid_t mem_type, const void* data, std::uint64_t start,
                std::uint64_t count, const Where& where) {
    if (count == 0) return;
    if (row_count(dataset, where) < start + count) resize_rows(dataset, start + count, where);
    auto [file_space, mem_space] = select_rows(dataset, start, count, where);
    check(H5Dwrite(dataset, mem_type, mem_space.get(), file_space.get(), H5P_DEFAULT, data), where,
          "cannot write rows " + std::to_string(start) + ".." + std::to_string(start + count - 1));
}

void read_rows(hid_t dataset, hid_t mem_type, void* out, std::uint64_t count, const Where& where) {
    read_row_range(dataset, mem_type, out, 0, count, where);
}

void read_row_range(hid_t dataset, hid_t mem_type, void* out, std::uint64_t start,
                    std::uint64_t count, const Where& where) {
    if (count == 0) return;
    if (row_count(dataset, where) < start + count) {
        fail_at(where, "has " + std::to_string(row_count(dataset, where)) + " rows, expected " +
                           std::to_string(start + count));
    }
    auto [file_space, mem_space] = select_rows(dataset, start, count, where);
    check(H5Dread(dataset, mem_type, mem_space.get(), file_space.get(), H5P_DEFAULT, out), where,
          "cannot read " + std::to_string(count) + " rows");
}

void write_string_rows(hid_t dataset, const std::vector<std::string>& values, std::uint64_t start,
                       const Where& where) {
    std::vector<const char*> data;
    data.reserve(values.size());
    for (const auto& v : values) data.push_back(v.c_str());
    Handle type = vlen_string_type(where);
    write_rows(dataset, type.get(), data.data(), start, values.size(), where);
}

std::vector<std::string> read_string_rows(hid_t dataset, std::uint64_t count, const Where& where) {
    if (count == 0) return {};
    if (row_count(dataset, where) < count) {
        fail_at(where, "has " + std::to_string(row_count(dataset, where)) + " rows, expected " +
                           std::to_string(count));
    }
    auto [file_space, mem_space] = select_rows(dataset, 0, count, where);
    return read_strings(dataset, false, file_space.get(), mem_space.get(), count, where, "strings");
}

}  // namespace prism::io::detail
