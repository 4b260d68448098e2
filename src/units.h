/* The one grammar for sizes and percentages: every HOSTOFF_* variable and every option of the
 * hostoff command reads them here (docs/units.md).
 *
 *   size     := NUMBER [UNIT]          "4096", "512M", "1.5G", "1GiB", "64KB", "2t"
 *   NUMBER   := DIGITS ["." DIGITS]     no sign, no blanks, no exponent, no hex
 *   UNIT     := ("K"|"M"|"G"|"T") ["B" | "iB"]  (the letter in either case)  |  "B"
 *   percent  := NUMBER "%"              0 < N <= 100, at most 6 decimals
 *
 * K, M, G and T are powers of 1024 whichever way they are written (K = KB = KiB = 1024 bytes,
 * G = GB = GiB = 2^30): hostoff has always read sizes so, and one meaning is safer than two that
 * differ by 7%. A size with decimals is rounded down to a whole byte ("1.5K" is 1536, "0.3K" is
 * 307); a plain number of bytes must be whole ("1.5" and "1.5B" are refused). Values are exact:
 * digits are read as integers, never through floating point, and anything above 2^64 - 1 bytes
 * is refused rather than wrapped.
 *
 * A refusal comes with `why`: a short phrase saying what was wrong ("a sign is not allowed",
 * "unknown unit \"X\""), for the caller's one line naming the variable or option. */
#ifndef HOSTOFF_UNITS_H
#define HOSTOFF_UNITS_H

#include <stdbool.h>
#include <stdint.h>

/* Percentages are kept exactly, in millionths of a percent (100% = 100000000). */
#define HO_PERCENT_ONE 1000000u
#define HO_PERCENT_ALL (100u * HO_PERCENT_ONE)

/* A size; 0 is a size. why may be NULL. */
bool ho_units_size(const char *text, uint64_t *bytes, const char **why);
/* A percentage "N%": 0 < N <= 100. why may be NULL. */
bool ho_units_percent(const char *text, uint32_t *millionths, const char **why);
/* A whole number without unit or decimals ("4", "1000"): counts, rates, seeds. */
bool ho_units_count(const char *text, uint64_t *out, const char **why);
/* floor(total * millionths / HO_PERCENT_ALL), exactly (no floating point). */
uint64_t ho_units_share(uint64_t total, uint32_t millionths);

#endif
