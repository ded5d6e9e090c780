#include "explorer/stop_signals.hpp"

#include <csignal>

namespace prism::explorer {

namespace {

std::atomic<int> g_stop_signal{0};

extern "C" void on_stop_signal(int sig) {
    int none = 0;
    g_stop_signal.compare_exchange_strong(none, sig);
}

}  // namespace

void install_stop_signals() {
    struct sigaction action {};
    action.sa_handler = on_stop_signal;
    sigemptyset(&action.sa_mask);
    sigaction(SIGTERM, &action, nullptr);
    sigaction(SIGINT, &action, nullptr);
}

void restore_stop_signals() {
    std::signal(SIGTERM, SIG_DFL);
    std::signal(SIGINT, SIG_DFL);
    if (const int sig = g_stop_signal.load(); sig != 0) std::raise(sig);
}

void ignore_stop_signals() {
    std::signal(SIGTERM, SIG_IGN);
    std::signal(SIGINT, SIG_IGN);
}

const std::atomic<int>& stop_signal() { return g_stop_signal; }

}  // namespace prism::explorer
