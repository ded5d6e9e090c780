#pragma once

// Physical quantities written as "<number> <unit>" strings in experiment files ("80 GB",
// "400 Gb/s", "989 TFLOP/s", "30 min"), converted to SI (seconds, bytes, bytes/s, FLOP/s).

#include <string>
#include <string_view>

namespace prism::io {

/// The dimension a key expects.
enum class Quantity {
    time,           ///< seconds: ns, us, ms, s, min, h, day, days
    bytes,          ///< bytes: B, KB, MB, GB, TB, PB (decimal), KiB, MiB, GiB, TiB, PiB (binary)
    bandwidth,      ///< bytes/s: B/s, KB/s ... TB/s, KiB/s ... TiB/s; bits: b/s, Kb/s ... Tb/s,
                    ///< bit/s, Kbit/s ... Tbit/s (divided by 8)
    flop_rate,      ///< FLOP/s: FLOP/s, GFLOP/s, TFLOP/s, PFLOP/s
    dimensionless,  ///< a plain number, no unit
};

/// "a time", "a bandwidth", ... for messages.
std::string quantity_phrase(Quantity quantity);

/// An example literal of the quantity for messages: "30 min", "80 GB", "400 Gb/s", "989 TFLOP/s".
std::string quantity_example(Quantity quantity);

/// The SI unit name: "s", "B", "B/s", "FLOP/s", "1".
std::string si_unit(Quantity quantity);

/// Parses `text` ("<number> <unit>", spaces optional around the unit) as a `quantity` in SI.
/// A bare number ("30") is taken in the SI unit only when `allow_bare_number` is true; a
/// dimensionless quantity takes only bare numbers. Throws ConfigError without location, e.g.
/// `expected a bandwidth (e.g. "400 Gb/s"), got "80 GB"` or `unknown unit 'GBps' in "80 GBps"`.
double parse_quantity(std::string_view text, Quantity quantity, bool allow_bare_number = false);

}  // namespace prism::io
