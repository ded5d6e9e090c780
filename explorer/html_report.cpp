#include "explorer/html_report.hpp"

#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <system_error>

#include "src/common/error.hpp"

#ifndef PRISM_SCRIPTS_DIR
#define PRISM_SCRIPTS_DIR ""
#endif

namespace prism::explorer {

namespace fs = std::filesystem;

std::vector<std::string> results_script_candidates() {
    std::vector<std::string> out;
    if (const char* env = std::getenv("PRISM_RESULTS_SCRIPT"); env && *env) out.emplace_back(env);
    std::error_code ec;
    const fs::path exe = fs::read_symlink("/proc/self/exe", ec);
    if (!ec) {
        const fs::path dir = exe.parent_path();
        out.push_back((dir / ".." / "share" / "prism" / "prism_results.py").lexically_normal());
        out.push_back((dir / ".." / ".." / "scripts" / "prism_results.py").lexically_normal());
    }
    if (std::strlen(PRISM_SCRIPTS_DIR) > 0) {
        out.push_back((fs::path(PRISM_SCRIPTS_DIR) / "prism_results.py").lexically_normal());
    }
    return out;
}

int write_html_report(const std::string& results, const std::string& output) {
    std::string script;
    const std::vector<std::string> candidates = results_script_candidates();
    for (const auto& c : candidates) {
        std::error_code ec;
        if (fs::is_regular_file(c, ec)) {
            script = c;
            break;
        }
    }
    if (script.empty()) {
        std::string tried;
        for (const auto& c : candidates) tried += (tried.empty() ? "" : ", ") + c;
        throw IoError("report --html: prism_results.py not found (tried " + tried +
                      "); set PRISM_RESULTS_SCRIPT to its path");
    }
    const char* env_python = std::getenv("PRISM_PYTHON");
    const std::string python = env_python && *env_python ? env_python : "/usr/bin/python3";
    std::vector<std::string> args = {python, script, "html", results, "-o", output};
    std::vector<char*> argv;
    for (auto& a : args) argv.push_back(a.data());
    argv.push_back(nullptr);

    const pid_t pid = fork();
    if (pid < 0) throw IoError(std::string("report --html: fork: ") + std::strerror(errno));
    if (pid == 0) {
        execv(python.c_str(), argv.data());
        const std::string message =
            "prism: error: report --html: cannot run " + python + ": " + std::strerror(errno) +
            " (install Debian's python3-h5py, python3-plotly or set PRISM_PYTHON)\n";
        const ssize_t ignored = write(STDERR_FILENO, message.data(), message.size());
        (void)ignored;
        _exit(127);
    }
    int status = 0;
    while (waitpid(pid, &status, 0) < 0) {
        if (errno != EINTR) {
            throw IoError(std::string("report --html: waitpid: ") + std::strerror(errno));
        }
    }
    if (WIFEXITED(status)) return WEXITSTATUS(status) == 0 ? 0 : 1;  // the script said why
    throw IoError("report --html: " + python + " was killed by signal " +
                  std::to_string(WTERMSIG(status)));
}

}  // namespace prism::explorer
