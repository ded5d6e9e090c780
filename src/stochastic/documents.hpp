#pragma once

// Variable-length documents packed into fixed-length sequences (issue 36 item 5, second half;
// docs/document_lengths.md): the law of a sequence's attention cost when the fused attention is
// masked per document (cuDNN / FlashAttention varlen), which both evaluators give the attention
// ops (stochastic/detail/step_model.cpp, montecarlo.cpp).
//
// Documents of iid integer lengths L = max(1, ceil(X)), X lognormal (median, sigma), are
// concatenated in one stream and cut every `seq` tokens (concat-and-chunk). A sequence's
// attention FLOPs are proportional to S = sum over its pieces of l_i^2 instead of seq^2 (causal:
// l_i (l_i + 1) / 2 per head and head dim; the model's causal FLOPs are s^2 / 2, so the factor is
// S / seq^2 to O(1 / l)). The stream is a renewal process seen through a window of seq tokens:
// the first piece is the residual of the document the window starts in (P(R = r) = P(L >= r) /
// E[L], the stationary forward recurrence time), then whole documents, the last one cut at the
// window's end. Its moments follow from the recursion over the window's remaining length j,
// started at a document boundary:
//   A_j = sum_{l <= j} P(L = l) (l^2 + A_{j-l}) + P(L > j) j^2,
//   B_j = sum_{l <= j} P(L = l) (l^4 + 2 l^2 A_{j-l} + B_{j-l}) + P(L > j) j^4,
// and E[S] = sum_r P(R = r) (r^2 + A_{seq-r}) + P(R > seq) seq^2 (likewise E[S^2]), exact on
// integer tokens up to seq = 4,096 and on cells of seq / 4,096 tokens above (each cell's
// lengths at their exact conditional moments).

#include <cstdint>
#include <memory>
#include <vector>

namespace prism::stochastic {

/// The document-length law and the sequence length it is packed into.
struct DocumentPacking {
    double median_tokens = 0;  ///< median of X (tokens)
    double sigma = 0;          ///< log-space sd of X (0: every document ceil(median) tokens)
    int seq = 0;               ///< tokens per packed sequence
    bool active() const { return median_tokens > 0 && seq > 0; }
    bool operator==(const DocumentPacking&) const = default;
};

/// E[S] and E[S^2] of one packed sequence (tokens^2 and tokens^4).
struct SquareMoments {
    double mean = 0, second = 0;
    double var() const { return second > mean * mean ? second - mean * mean : 0.0; }
};

/// S of each whole sequence of `seq` tokens when documents of lengths `docs` (tokens, > 0) are
/// concatenated in order and cut every `seq` tokens; a last partial sequence is dropped.
std::vector<double> packed_squares(const std::vector<std::int64_t>& docs, int seq);

/// E[L] of the integer document length.
double mean_document_length(const DocumentPacking& d);

/// The analytic moments of S in a stationary window (the recursion above). Memoized per
/// thread. Throws ModelError for an inactive law.
SquareMoments packed_square_moments(const DocumentPacking& d);

/// `count` exact draws of S: documents drawn on the Philox stream of (seed, the law's hash),
/// packed in one stream, the first 16 sequences dropped as burn-in (the window's start then
/// follows the stationary law to well below the draws' noise).
std::vector<double> draw_packed_squares(const DocumentPacking& d, int count, std::uint64_t seed);

/// Draws behind packed_square_table.
inline constexpr int kDocumentDraws = 65536;

/// kDocumentDraws exact draws of S (seed 0), memoized per thread: Monte Carlo resamples a
/// sequence's S from them.
std::shared_ptr<const std::vector<double>> packed_square_table(const DocumentPacking& d);

/// A law on atoms x[k] with masses w[k] (summing to 1).
struct AtomLaw {
    std::vector<double> x, w;
};

/// The law of sum_{i < n} S_i - n mean(draws), S_i iid from the empirical law of `draws` (the
/// analytic evaluator's replica term: docs/document_lengths.md): the draws on `atoms` equally
/// spaced atoms (each split linearly between its two neighbours: the mean kept), convolved by
/// repeated squaring, each product put back on `atoms` atoms the same way (the mean kept, a
/// variance of at most (spacing)^2 / 4 added per product). Memoized per thread.
std::shared_ptr<const AtomLaw> centered_sum_law(
    const std::shared_ptr<const std::vector<double>>& draws, int n, int atoms = 256);

}  // namespace prism::stochastic
