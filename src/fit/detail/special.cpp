#include "src/fit/detail/special.hpp"

#include <cmath>
#include <limits>

namespace prism::fit::detail {

double digamma(double x) {
    double result = 0;
    while (x < 10) {
        result -= 1.0 / x;
        x += 1;
    }
    const double f = 1.0 / (x * x);
    // ln x - 1/(2x) - sum B_2k / (2k x^2k), k = 1..6
    const double series =
        f *
        (1.0 / 12 -
         f * (1.0 / 120 - f * (1.0 / 252 - f * (1.0 / 240 - f * (1.0 / 132 - f * 691.0 / 32760)))));
    return result + std::log(x) - 0.5 / x - series;
}

namespace {

// Continued fraction of I_x(a, b) (Numerical Recipes 6.4.5), modified Lentz.
double beta_continued_fraction(double a, double b, double x) {
    constexpr double kTiny = 1e-300;
    constexpr double kEps = 1e-15;
    const double qab = a + b;
    const double qap = a + 1;
    const double qam = a - 1;
    double c = 1;
    double d = 1 - qab * x / qap;
    if (std::fabs(d) < kTiny) d = kTiny;
    d = 1 / d;
    double h = d;
    // Converges in O(sqrt(max(a, b))) terms; the cap covers cv down to ~1e-4.
    for (int m = 1; m <= 200000; ++m) {
        const double m2 = 2.0 * m;
        double aa = m * (b - m) * x / ((qam + m2) * (a + m2));
        d = 1 + aa * d;
        if (std::fabs(d) < kTiny) d = kTiny;
        c = 1 + aa / c;
        if (std::fabs(c) < kTiny) c = kTiny;
        d = 1 / d;
        h *= d * c;
        aa = -(a + m) * (qab + m) * x / ((a + m2) * (qap + m2));
        d = 1 + aa * d;
        if (std::fabs(d) < kTiny) d = kTiny;
        c = 1 + aa / c;
        if (std::fabs(c) < kTiny) c = kTiny;
        d = 1 / d;
        const double del = d * c;
        h *= del;
        if (std::fabs(del - 1) < kEps) break;
    }
    return h;
}

}  // namespace

double incomplete_beta(double a, double b, double x) {
    if (x <= 0) return 0;
    if (x >= 1) return 1;
    const double log_front =
        std::lgamma(a + b) - std::lgamma(a) - std::lgamma(b) + a * std::log(x) + b * std::log1p(-x);
    const double front = std::exp(log_front);
    if (x < (a + 1) / (a + b + 2)) return front * beta_continued_fraction(a, b, x) / a;
    return 1 - front * beta_continued_fraction(b, a, 1 - x) / b;
}

}  // namespace prism::fit::detail
