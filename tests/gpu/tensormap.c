/* Where a CUtensorMap keeps its global address: the GPU kit's check for the descriptors that
 * CUTLASS and cuBLAS pass by value on Hopper (128 bytes built by cuTensorMapEncodeTiled). The
 * engine can only attribute such a launch if it can find the buffer in the descriptor, or learns
 * it from the encode call.
 *
 * Encodes one 2-D float tensor in a device buffer at three global addresses (the buffer's start,
 * 64 KiB and 1 MiB into it; the rest of the description the same) and inspects the 128 bytes:
 *   - the byte offsets at which the plain address appears as a little-endian u64;
 *   - otherwise, a bit field holding it shifted right by 0 to 8 bits (any bit offset), found the
 *     same for all three addresses;
 *   - which bytes differ between the three descriptors (only the address should).
 * Prints one line "tensormap: <finding> ..." and, with --json PATH, the same as JSON. On a driver
 * without the call (the simulator, older drivers) it says so and exits 0: a finding too. */
#include "kit.h"

#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define NADDR 3

/* Bits [bit, bit + width) of the 128-byte descriptor, as an integer (width <= 64). */
static uint64_t bits(const unsigned char *d, unsigned bit, unsigned width) {
    uint64_t v = 0;
    for (unsigned i = 0; i < width; i++) {
        unsigned b = bit + i;
        if (b >= 1024) break;
        v |= (uint64_t)((d[b / 8] >> (b % 8)) & 1u) << i;
    }
    return v;
}

struct field {
    int bit, shift, width; /* -1: none found */
};

/* The first (bit offset, shift) at which every descriptor holds its address >> shift in
 * (49 - shift) bits: the 49-bit virtual address space of current GPUs. */
static struct field find_field(unsigned char desc[NADDR][128], const uint64_t *addr) {
    struct field f = {-1, -1, -1};
    for (int shift = 0; shift <= 8; shift++) {
        int width = 49 - shift;
        for (int bit = 0; bit + width <= 1024; bit++) {
            bool all = true;
            for (int k = 0; k < NADDR && all; k++)
                all = bits(desc[k], (unsigned)bit, (unsigned)width) ==
                      ((addr[k] >> shift) & ((1ull << width) - 1));
            if (all) return (struct field){bit, shift, width};
        }
    }
    return f;
}

static void usage(FILE *f) {
    fprintf(f, "usage: tensormap [--json PATH]\nEncodes a CUtensorMap for three known addresses "
               "and reports where the descriptor holds the address.\n");
}

int main(int argc, char **argv) {
    static const struct option longs[] = {{"json", required_argument, NULL, 'j'},
                                          {"help", no_argument, NULL, 'h'},
                                          {NULL, 0, NULL, 0}};
    const char *json = NULL;
    int c;
    while ((c = getopt_long(argc, argv, "h", longs, NULL)) != -1) {
        if (c == 'j') {
            json = optarg;
        } else if (c == 'h') {
            usage(stdout);
            return 0;
        } else {
            usage(stderr);
            return 2;
        }
    }
    if (optind != argc) {
        usage(stderr);
        return 2;
    }
    CUdevice dev;
    kit_primary(&dev);
    /* A 1024 x 1024 float tensor, 4 MiB; boxes of 64 x 64. */
    const uint64_t rows = 1024, cols = 1024, bytes = rows * cols * 4 + 2 * KIT_MIB;
    CUdeviceptr buf;
    KIT_CK(cuMemAlloc(&buf, bytes));
    uint64_t addr[NADDR] = {buf, buf + 65536, buf + KIT_MIB};
    cuuint64_t dims[2] = {cols, rows}, strides[1] = {cols * 4};
    cuuint32_t box[2] = {64, 64}, estr[2] = {1, 1};
    unsigned char desc[NADDR][128];
    CUresult rc = CUDA_SUCCESS;
    for (int k = 0; k < NADDR && rc == CUDA_SUCCESS; k++) {
        CUtensorMap map;
        memset(&map, 0, sizeof map);
        rc = cuTensorMapEncodeTiled(&map, CU_TENSOR_MAP_DATA_TYPE_FLOAT32, 2, (void *)addr[k], dims,
                                    strides, box, estr, CU_TENSOR_MAP_INTERLEAVE_NONE,
                                    CU_TENSOR_MAP_SWIZZLE_NONE, CU_TENSOR_MAP_L2_PROMOTION_NONE,
                                    CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE);
        memcpy(desc[k], &map, 128);
    }
    char finding[64], plain[128] = "", changed[256] = "", hex[260] = "";
    struct field f = {-1, -1, -1};
    if (rc != CUDA_SUCCESS) {
        snprintf(finding, sizeof finding, "not encoded (%s)", kit_rc_name(rc));
    } else {
        for (int o = 0; o + 8 <= 128; o++) {
            bool all = true;
            for (int k = 0; k < NADDR && all; k++) {
                uint64_t v;
                memcpy(&v, desc[k] + o, 8);
                all = v == addr[k];
            }
            if (all)
                snprintf(plain + strlen(plain), sizeof plain - strlen(plain), "%s%d",
                         plain[0] ? "," : "", o);
        }
        for (int o = 0; o < 128; o++) {
            bool differs = false;
            for (int k = 1; k < NADDR; k++)
                differs |= desc[k][o] != desc[0][o];
            if (differs && strlen(changed) < sizeof changed - 6)
                snprintf(changed + strlen(changed), sizeof changed - strlen(changed), "%s%d",
                         changed[0] ? "," : "", o);
        }
        if (plain[0] == '\0') f = find_field(desc, addr);
        snprintf(finding, sizeof finding, "%s",
                 plain[0]     ? "plain address"
                 : f.bit >= 0 ? "encoded address"
                              : "address not found");
        for (int o = 0; o < 128; o++)
            snprintf(hex + 2 * o, 3, "%02x", desc[0][o]);
    }
    printf("tensormap: %s; plain u64 at byte offsets [%s]; bit field: offset %d, shift %d, width "
           "%d; bytes differing between the three addresses [%s]; address %#llx\n",
           finding, plain, f.bit, f.shift, f.width, changed, (unsigned long long)addr[0]);
    if (rc == CUDA_SUCCESS) printf("tensormap: descriptor %s\n", hex);
    if (json != NULL) {
        FILE *o = fopen(json, "w");
        if (o == NULL) {
            perror(json);
            return 1;
        }
        char field[96] = "null";
        if (f.bit >= 0)
            snprintf(field, sizeof field, "{\"bit\": %d, \"shift\": %d, \"width\": %d}", f.bit,
                     f.shift, f.width);
        fprintf(o,
                "{\"encode\": \"%s\", \"finding\": \"%s\", \"plain_offsets\": [%s], "
                "\"field\": %s, \"changed_bytes\": [%s], \"address\": %llu, "
                "\"descriptor_hex\": %s%s%s}\n",
                kit_rc_name(rc), finding, plain, field, changed, (unsigned long long)addr[0],
                rc == CUDA_SUCCESS ? "\"" : "", rc == CUDA_SUCCESS ? hex : "null",
                rc == CUDA_SUCCESS ? "\"" : "");
        fclose(o);
    }
    cuMemFree(buf);
    return 0;
}
