#include "explorer/messages.hpp"

#include <sstream>

#include <boost/archive/binary_iarchive.hpp>
#include <boost/archive/binary_oarchive.hpp>

#include "src/common/error.hpp"

namespace prism::explorer {

namespace {

constexpr unsigned kArchiveFlags = boost::archive::no_header;

template <class T>
std::string to_bytes(const T& m) {
    std::ostringstream out(std::ios::binary);
    {
        boost::archive::binary_oarchive ar(out, kArchiveFlags);
        ar << m;
    }
    return std::move(out).str();
}

template <class T>
void from_bytes(const std::string& bytes, T& m) {
    try {
        std::istringstream in(bytes, std::ios::binary);
        boost::archive::binary_iarchive ar(in, kArchiveFlags);
        ar >> m;
    } catch (const std::exception& e) {
        throw MpiError(std::string("malformed message from a peer: ") + e.what());
    }
}

}  // namespace

std::string serialize_message(const WorkOrder& m) { return to_bytes(m); }
std::string serialize_message(const ChunkResult& m) { return to_bytes(m); }
void deserialize_message(const std::string& bytes, WorkOrder& m) { from_bytes(bytes, m); }
void deserialize_message(const std::string& bytes, ChunkResult& m) { from_bytes(bytes, m); }

}  // namespace prism::explorer
