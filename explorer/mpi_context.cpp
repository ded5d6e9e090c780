#include "explorer/mpi_context.hpp"

#include <algorithm>
#include <cstdint>
#include <thread>

namespace prism::explorer {

void throw_mpi_error(const char* call, int code) {
    char text[MPI_MAX_ERROR_STRING] = {};
    int length = 0;
    MPI_Error_string(code, text, &length);
    throw MpiError(std::string("mpi: ") + call + " failed: " + std::string(text, length));
}

MpiEnvironment::MpiEnvironment(int* argc, char*** argv) {
    PRISM_MPI_CHECK(MPI_Init(argc, argv));
    // Errors come back as codes (checked by PRISM_MPI_CHECK) instead of aborting the job.
    PRISM_MPI_CHECK(MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN));
    PRISM_MPI_CHECK(MPI_Comm_rank(MPI_COMM_WORLD, &rank_));
    PRISM_MPI_CHECK(MPI_Comm_size(MPI_COMM_WORLD, &size_));
}

MpiEnvironment::~MpiEnvironment() noexcept {
    int finalized = 0;
    MPI_Finalized(&finalized);
    if (!finalized) MPI_Finalize();
}

void MpiEnvironment::abort(int code) const noexcept {
    MPI_Abort(MPI_COMM_WORLD, code);
    std::_Exit(code);
}

void send_bytes(int dest, int tag, const std::string& bytes) {
    PRISM_MPI_CHECK(MPI_Send(bytes.data(), static_cast<int>(bytes.size()), MPI_BYTE, dest, tag,
                             MPI_COMM_WORLD));
}

std::optional<Envelope> try_receive(int source) {
    int flag = 0;
    MPI_Status status{};
    PRISM_MPI_CHECK(MPI_Iprobe(source, MPI_ANY_TAG, MPI_COMM_WORLD, &flag, &status));
    if (!flag) return std::nullopt;
    int count = 0;
    PRISM_MPI_CHECK(MPI_Get_count(&status, MPI_BYTE, &count));
    Envelope e;
    e.source = status.MPI_SOURCE;
    e.tag = status.MPI_TAG;
    e.bytes.resize(static_cast<std::size_t>(count));
    PRISM_MPI_CHECK(MPI_Recv(e.bytes.data(), count, MPI_BYTE, status.MPI_SOURCE, status.MPI_TAG,
                             MPI_COMM_WORLD, MPI_STATUS_IGNORE));
    return e;
}

std::optional<Envelope> BackoffReceiver::next(int source) {
    auto e = try_receive(source);
    if (e) {
        sleep_ = std::chrono::microseconds(20);
    } else {
        std::this_thread::sleep_for(sleep_);
        sleep_ = std::min(std::chrono::microseconds(2000), sleep_ * 2);
    }
    return e;
}

Envelope receive_polling(int source, std::chrono::microseconds max_sleep) {
    std::chrono::microseconds sleep(20);
    while (true) {
        if (auto e = try_receive(source)) return std::move(*e);
        std::this_thread::sleep_for(sleep);
        sleep = std::min(max_sleep, sleep * 2);
    }
}

void broadcast_string(std::string& text) {
    std::uint64_t size = text.size();
    PRISM_MPI_CHECK(MPI_Bcast(&size, 1, MPI_UINT64_T, 0, MPI_COMM_WORLD));
    text.resize(size);
    if (size > 0) {
        PRISM_MPI_CHECK(
            MPI_Bcast(text.data(), static_cast<int>(size), MPI_CHAR, 0, MPI_COMM_WORLD));
    }
}

}  // namespace prism::explorer
