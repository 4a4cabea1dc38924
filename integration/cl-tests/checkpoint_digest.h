/* checkpoint_digest.h: checkpoint_loop's read-mostly mode (-r 1), a guest
 * that computes on its whole state but writes little of it, as inference
 * does (weights read every step, a small result written).
 *
 * Each launch reads every element of one buffer and folds it into a small
 * result buffer of DIGEST_ITEMS words: work-item i hashes its contiguous
 * slice of the buffer (contiguous, so a CPU device streams it) and mixes
 * the hash with the launch's constant into its word of the result:
 *     s   = FNV-1a over the words of slice i of buffer k
 *     r_i = r_i * MULT + (s ^ c)                          (mod 2^32)
 * The slices' hashes do not change while the buffers are not written, so
 * the CPU computes them once at the end and replays the launches on the
 * result words alone. */
#ifndef CHECKPOINT_DIGEST_H
#define CHECKPOINT_DIGEST_H

#include <stddef.h>
#include <stdint.h>

/* Work-items per launch, and words of the result (4 KiB). */
#define DIGEST_ITEMS 1024
#define FNV32_BASIS 2166136261u
#define FNV32_PRIME 16777619u

static const char *digest_src =
    "__kernel void digest(__global const uint *x, __global uint *result,\n"
    "                     uint n, uint slice, uint c)\n"
    "{\n"
    "    uint i = (uint)get_global_id(0);\n"
    "    uint end = min(n, (i + 1) * slice);\n"
    "    uint s = FNV32_BASIS;\n"
    "    for (uint j = i * slice; j < end; j++)\n"
    "        s = (s ^ x[j]) * FNV32_PRIME;\n"
    "    result[i] = result[i] * MULT + (s ^ c);\n"
    "}\n";

/* Words per work-item's slice of a buffer of n words. */
static inline size_t digest_slice(size_t n) { return (n + DIGEST_ITEMS - 1) / DIGEST_ITEMS; }

/* The hash of work-item i's slice of x (n words), as the kernel takes it. */
static inline uint32_t digest_of_slice(const uint32_t *x, size_t n, size_t i)
{
    size_t slice = digest_slice(n), end = (i + 1) * slice < n ? (i + 1) * slice : n;
    uint32_t s = FNV32_BASIS;
    for (size_t j = i * slice; j < end; j++)
        s = (s ^ x[j]) * FNV32_PRIME;
    return s;
}

#endif
