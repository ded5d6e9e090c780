#pragma once

// Thin MPI transport: RAII init/finalize, checked calls, and polling receives that sleep between
// probes, because MPICH busy-polls inside blocking calls and a waiting master would otherwise take
// a core from the workers.

#include <chrono>
#include <optional>
#include <string>

#include <mpi.h>

#include "src/common/error.hpp"

/// Throws prism::MpiError with the MPI error string when `call` fails.
#define PRISM_MPI_CHECK(call)                                         \
    do {                                                              \
        const int prism_mpi_rc_ = (call);                             \
        if (prism_mpi_rc_ != MPI_SUCCESS)                             \
            ::prism::explorer::throw_mpi_error(#call, prism_mpi_rc_); \
    } while (false)

namespace prism::explorer {

[[noreturn]] void throw_mpi_error(const char* call, int code);

/// MPI_Init in the constructor, MPI_Finalize in the destructor (noexcept).
class MpiEnvironment {
  public:
    MpiEnvironment(int* argc, char*** argv);
    ~MpiEnvironment() noexcept;
    MpiEnvironment(const MpiEnvironment&) = delete;
    MpiEnvironment& operator=(const MpiEnvironment&) = delete;

    int rank() const noexcept { return rank_; }
    int size() const noexcept { return size_; }

    /// Ends every rank now (after the master has closed its file).
    [[noreturn]] void abort(int code) const noexcept;

  private:
    int rank_ = 0;
    int size_ = 1;
};

struct Envelope {
    int source = 0;
    int tag = 0;
    std::string bytes;
};

void send_bytes(int dest, int tag, const std::string& bytes);

/// A message if one is waiting (any source), without blocking.
std::optional<Envelope> try_receive(int source = MPI_ANY_SOURCE);

/// try_receive for loops that check something else between probes (a stop flag, a deadline):
/// after an empty probe it sleeps, 20 us doubling up to 2 ms, so that a master waiting on its
/// workers does not spin a core (MPICH's blocking receive would); a message resets the sleep.
class BackoffReceiver {
  public:
    std::optional<Envelope> next(int source = MPI_ANY_SOURCE);

  private:
    std::chrono::microseconds sleep_{20};
};

/// Waits for a message, probing with growing sleeps (up to `max_sleep`) in between.
Envelope receive_polling(int source = MPI_ANY_SOURCE,
                         std::chrono::microseconds max_sleep = std::chrono::microseconds(2000));

/// Broadcast of a string from rank 0.
void broadcast_string(std::string& text);

}  // namespace prism::explorer
