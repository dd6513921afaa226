// Numbers written for people: counts with thousands separators, byte sizes in binary units, fixed
// decimals and significant digits.
//
// Model summaries, partition tables, timelines, the trainer's header and benchmark reports all print
// the same kinds of numbers; spelling them in one place keeps "124,439,808 parameters" and "48.0 MiB"
// looking the same in every output (and in the tests that read them). Everything here is
// locale-independent: printf's formatting in the "C" locale, which brigade never changes.
#pragma once

#include <cstdint>
#include <string>

namespace brigade {

// 1234567 -> "1,234,567"; -1234 -> "-1,234".
std::string with_commas(int64_t n);

// A byte count in the largest binary unit that keeps the number at or above 1: "512 B", "2.4 KiB",
// "48.0 MiB", ... up to PiB, with `decimals` digits after the point (none for plain bytes).
std::string format_bytes(double bytes, int decimals = 1);

// `v` with `decimals` digits after the point: format_fixed(0.15789, 4) -> "0.1579".
std::string format_fixed(double v, int decimals);

// `v` to `digits` significant digits, as printf's %g (and an ostream's default) writes it:
// format_significant(57, 4) -> "57", (1.0 / 3, 4) -> "0.3333", (1234567, 4) -> "1.235e+06".
std::string format_significant(double v, int digits);

}  // namespace brigade
