#include "explorer/sweep_engine.hpp"

#include <sys/resource.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <exception>
#include <string>
#include <utility>
#include <vector>

#include "explorer/mpi_context.hpp"
#include "src/common/error.hpp"

namespace prism::explorer {

namespace {

using Clock = std::chrono::steady_clock;

double seconds_since(Clock::time_point t0) {
    return std::chrono::duration<double>(Clock::now() - t0).count();
}

/// Stop conditions shared by both loops.
struct StopWatch {
    const EngineOptions& options;
    Clock::time_point start = Clock::now();

    int signal() const { return options.stop_signal ? options.stop_signal->load() : 0; }
    bool time_up() const {
        return options.time_limit_s > 0 && seconds_since(start) >= options.time_limit_s;
    }
};

/// Releases chunks to the consumer in index order and checkpoints on a timer.
class OrderedSink {
  public:
    OrderedSink(const EngineOptions& options, ResultConsumer& consumer)
        : options_(options), consumer_(consumer), buffer_(options.begin) {}

    void add(ChunkResult&& chunk) {
        const auto begin = chunk.begin;
        const auto end = chunk.end;
        buffer_.add(begin, end, std::move(chunk));
        while (auto ready = buffer_.pop()) consumer_.consume(std::move(ready->second));
        if (seconds_since(last_flush_) >= options_.flush_interval_s) checkpoint();
        if (options_.progress) options_.progress(buffer_.next_index() - options_.begin);
    }

    void checkpoint() {
        consumer_.checkpoint(buffer_.next_index());
        last_flush_ = Clock::now();
    }

    std::uint64_t next_index() const { return buffer_.next_index(); }

  private:
    const EngineOptions& options_;
    ResultConsumer& consumer_;
    ReorderBuffer<ChunkResult> buffer_;
    Clock::time_point last_flush_ = Clock::now();
};

/// Pilot work orders carry this bit in their id (range chunks count from 0).
constexpr std::uint64_t kPilotChunk = std::uint64_t{1} << 63;

WorkOrder pilot_order(const EngineOptions& options, std::size_t k) {
    WorkOrder order(kPilotChunk | k, 0, 0);
    order.indices = {options.pilot[k]};
    return order;
}

EngineOutcome outcome_of(const ResultConsumer& consumer, std::uint64_t next, std::uint64_t end) {
    if (consumer.abort_requested()) return EngineOutcome::aborted;
    return next >= end ? EngineOutcome::complete : EngineOutcome::interrupted;
}

}  // namespace

double process_cpu_seconds() {
    rusage usage{};
    getrusage(RUSAGE_SELF, &usage);
    return static_cast<double>(usage.ru_utime.tv_sec + usage.ru_stime.tv_sec) +
           1e-6 * static_cast<double>(usage.ru_utime.tv_usec + usage.ru_stime.tv_usec);
}

EngineReport run_serial(const EngineOptions& options, const ChunkFunction& evaluate,
                        ResultConsumer& consumer) {
    StopWatch watch{options};
    const double cpu0 = process_cpu_seconds();
    ChunkScheduler scheduler(options.begin, options.end, 1, options.scheduler);
    OrderedSink sink(options, consumer);
    EngineReport report;
    try {
        for (std::size_t k = 0; k < options.pilot.size(); ++k) {
            if (watch.signal() != 0 || watch.time_up()) break;
            options.pilot_result(evaluate(pilot_order(options, k)));
        }
        while (true) {
            if (watch.signal() != 0 || watch.time_up() || consumer.abort_requested()) break;
            const auto chunk = scheduler.next();
            if (!chunk) break;
            const auto t0 = Clock::now();
            WorkOrder order(chunk->id, chunk->begin, chunk->end);
            if (options.prepare) options.prepare(order);
            ChunkResult result = evaluate(order);
            scheduler.record(*chunk, seconds_since(t0));
            sink.add(std::move(result));
        }
        sink.checkpoint();
    } catch (const Error&) {
        report.consumer_error = std::current_exception();
    }
    report.next_index = sink.next_index();
    report.outcome = outcome_of(consumer, report.next_index, options.end);
    report.wall_s = seconds_since(watch.start);
    report.master_cpu_s = process_cpu_seconds() - cpu0;
    report.stop_signal = watch.signal();
    return report;
}

EngineReport run_master(const EngineOptions& options, int workers, ResultConsumer& consumer) {
    StopWatch watch{options};
    const double cpu0 = process_cpu_seconds();
    ChunkScheduler scheduler(options.begin, options.end, workers, options.scheduler);
    OrderedSink sink(options, consumer);
    std::vector<bool> busy(static_cast<std::size_t>(workers) + 1, false);
    int active = workers;  // workers not yet sent `stop`
    int in_flight = 0;
    bool stopping = false;
    Clock::time_point stop_time{};
    std::string fatal;
    std::exception_ptr consumer_error;
    std::size_t pilot_next = 0;  // the pilot's orders go out first, one index each
    int pilot_in_flight = 0;
    std::vector<int> waiting;  // workers with nothing to do until the pilot is back

    auto assign = [&](int worker) {
        if (!stopping && pilot_next < options.pilot.size()) {
            send_bytes(worker, static_cast<int>(Tag::work),
                       serialize_message(pilot_order(options, pilot_next++)));
            busy[worker] = true;
            ++in_flight;
            ++pilot_in_flight;
            return;
        }
        if (!stopping && pilot_in_flight > 0) {
            waiting.push_back(worker);
            return;
        }
        std::optional<Chunk> chunk;
        if (!stopping) chunk = scheduler.next();
        if (chunk) {
            WorkOrder order(chunk->id, chunk->begin, chunk->end);
            if (options.prepare) options.prepare(order);
            send_bytes(worker, static_cast<int>(Tag::work), serialize_message(order));
            busy[worker] = true;
            ++in_flight;
        } else {
            send_bytes(worker, static_cast<int>(Tag::stop), std::string());
            busy[worker] = false;
            --active;
        }
    };
    // The workers waiting for the pilot get work (or `stop`) now.
    auto release_waiting = [&] {
        for (const int w : std::exchange(waiting, {})) assign(w);
    };
    // Stop handing out work; the workers waiting for the pilot are sent `stop` at once.
    auto stop = [&] {
        if (stopping) return;
        stopping = true;
        stop_time = Clock::now();
        scheduler.stop();
        release_waiting();
    };

    BackoffReceiver receiver;
    while (active > 0) {
        if (!stopping && (watch.signal() != 0 || watch.time_up() || consumer.abort_requested())) {
            stop();
        }
        if (stopping && in_flight > 0 && seconds_since(stop_time) > options.grace_s) break;

        auto message = receiver.next();
        if (!message) continue;
        const auto tag = static_cast<Tag>(message->tag);
        if (tag == Tag::result) {
            ChunkResult result;
            deserialize_message(message->bytes, result);
            busy[message->source] = false;
            --in_flight;
            if ((result.chunk_id & kPilotChunk) != 0) {
                --pilot_in_flight;
                if (!stopping) options.pilot_result(std::move(result));
                assign(message->source);
                if (pilot_in_flight == 0 && pilot_next == options.pilot.size()) {
                    release_waiting();  // the pilot is back: the range for everyone waiting
                }
                continue;
            }
            scheduler.record(Chunk{result.chunk_id, result.begin, result.end}, result.seconds);
            if (!consumer_error) {
                try {
                    sink.add(std::move(result));
                } catch (const Error&) {
                    // The file cannot take results: collect the chunks in flight, drop them.
                    consumer_error = std::current_exception();
                    stop();
                }
            }
            assign(message->source);
        } else if (tag == Tag::ready) {
            if (options.worker_ready) options.worker_ready(message->source, message->bytes);
            assign(message->source);
        } else if (tag == Tag::fatal) {
            fatal = "worker rank " + std::to_string(message->source) + ": " + message->bytes;
            busy[message->source] = false;
            --active;
            stop();
        } else {
            throw MpiError("master: unexpected message tag " + std::to_string(message->tag) +
                           " from rank " + std::to_string(message->source));
        }
    }
    if (!consumer_error) {
        try {
            sink.checkpoint();
        } catch (const Error&) {
            consumer_error = std::current_exception();
        }
    }
    EngineReport report;
    report.consumer_error = consumer_error;
    report.next_index = sink.next_index();
    report.workers_still_busy = active > 0;
    report.outcome = outcome_of(consumer, report.next_index, options.end);
    report.wall_s = seconds_since(watch.start);
    report.master_cpu_s = process_cpu_seconds() - cpu0;
    report.stop_signal = watch.signal();
    if (!fatal.empty()) {
        report.outcome = EngineOutcome::worker_failed;
        report.worker_failure = fatal;
    }
    return report;
}

namespace {

/// "pid P on host H"
std::string this_process() {
    char host[256] = {};
    if (::gethostname(host, sizeof host - 1) != 0) host[0] = '?';
    return "pid " + std::to_string(::getpid()) + " on host " + host;
}

/// The worker's loop; returns when told to stop or after reporting a fatal error.
void work(const ChunkFunction& evaluate) {
    // Fault injection for tests: the worker of this rank fails outside any point (as a worker
    // whose environment breaks would), after its first work order.
    int rank = 0;
    PRISM_MPI_CHECK(MPI_Comm_rank(MPI_COMM_WORLD, &rank));
    const char* fatal_env = std::getenv("PRISM_FAULT_INJECT_FATAL_RANK");
    const bool inject_fatal = fatal_env != nullptr && std::atoi(fatal_env) == rank;
    send_bytes(0, static_cast<int>(Tag::ready), this_process());
    while (true) {
        Envelope message = receive_polling(0);
        const auto tag = static_cast<Tag>(message.tag);
        if (tag == Tag::stop) return;
        if (tag != Tag::work) {
            throw MpiError("worker: unexpected message tag " + std::to_string(message.tag));
        }
        WorkOrder order;
        deserialize_message(message.bytes, order);
        std::string bytes;
        try {
            if (inject_fatal) {
                throw Error("injected worker failure (PRISM_FAULT_INJECT_FATAL_RANK)");
            }
            const auto t0 = Clock::now();
            ChunkResult result = evaluate(order);
            result.seconds = seconds_since(t0);
            bytes = serialize_message(result);
        } catch (const std::exception& e) {
            send_bytes(0, static_cast<int>(Tag::fatal), e.what());
            return;
        }
        send_bytes(0, static_cast<int>(Tag::result), bytes);
    }
}

}  // namespace

int run_worker(const ChunkFunction& evaluate, const std::function<void()>& after_work) {
    work(evaluate);
    if (after_work) after_work();
    // The master sends the exit status once its file is closed.
    while (true) {
        const Envelope message = receive_polling(0);
        if (static_cast<Tag>(message.tag) == Tag::exit) return std::stoi(message.bytes);
        throw MpiError("worker: unexpected message tag " + std::to_string(message.tag) +
                       " while waiting for the exit status");
    }
}

void send_exit_status(int workers, int status) {
    for (int worker = 1; worker <= workers; ++worker) {
        send_bytes(worker, static_cast<int>(Tag::exit), std::to_string(status));
    }
}

}  // namespace prism::explorer
