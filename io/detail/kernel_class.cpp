#include "io/detail/kernel_class.hpp"

#include <array>
#include <cctype>
#include <string>

namespace prism::io::detail {

namespace {

std::string lower(std::string_view s) {
    std::string out(s);
    for (char& c : out) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
    return out;
}

bool has(const std::string& s, std::string_view part) { return s.find(part) != std::string::npos; }

template <std::size_t N>
bool has_any(const std::string& s, const std::array<std::string_view, N>& parts) {
    for (std::string_view p : parts) {
        if (has(s, p)) return true;
    }
    return false;
}

// PyTorch's collective names ("all_reduce", "_allgather_base", "alltoall_base", ...) and
// NCCL's kernel names ("AllReduce", "SendRecv", ...) once lower-cased and stripped of '_'.
std::optional<KernelClass> collective_class(const std::string& name, bool* known) {
    std::string s;
    for (char c : name) {
        if (c != '_') s.push_back(c);
    }
    *known = true;
    if (has(s, "allreduce")) return KernelClass::allreduce;
    if (has(s, "allgather")) return KernelClass::allgather;
    if (has(s, "reducescatter")) return KernelClass::reducescatter;
    if (has(s, "alltoall")) return KernelClass::alltoall;
    if (has_any(s, std::array<std::string_view, 4>{"sendrecv", "send", "recv", "p2p"})) {
        return KernelClass::p2p;
    }
    if (has_any(s, std::array<std::string_view, 5>{"broadcast", "reduce", "barrier", "gather",
                                                   "scatter"})) {
        return std::nullopt;
    }
    *known = false;
    return std::nullopt;
}

}  // namespace

std::optional<KernelClass> classify_kernel(std::string_view name, std::string_view collective) {
    const std::string n = lower(name);
    bool known = false;
    if (!collective.empty()) {
        const std::optional<KernelClass> c = collective_class(lower(collective), &known);
        if (known) return c;
    }
    if (has(n, "nccl")) {
        const std::optional<KernelClass> c = collective_class(n, &known);
        if (known) return c;
        return std::nullopt;
    }
    if (has_any(n, std::array<std::string_view, 6>{"adam", "adagrad", "lamb", "multi_tensor_apply",
                                                   "optimizer", "sgd_"})) {
        return KernelClass::optimizer;
    }
    if (has_any(n, std::array<std::string_view, 4>{"flash", "fmha", "attention", "attn"})) {
        return KernelClass::attention;
    }
    if (!has(n, "fbgemm") && has_any(n, std::array<std::string_view, 9>{
                                            "gemm", "cutlass", "xmma", "cublas", "scudnn",
                                            "splitkreduce", "convolution", "wgrad", "dgrad"})) {
        return KernelClass::gemm;
    }
    return KernelClass::elementwise;
}

KernelClass classify_memory_op(std::string_view name) {
    return has(lower(name), "htod") ? KernelClass::dataloader : KernelClass::elementwise;
}

}  // namespace prism::io::detail
