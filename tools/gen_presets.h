/* The model presets of hostoff gen-trace. A preset is a table of whole-number options (its shape)
 * and two functions: setup allocates the parameter groups once, forward runs one micro-batch's
 * forward pass on the tape (gen.h), from which the backward pass follows. */
#ifndef HOSTOFF_TOOLS_GEN_PRESETS_H
#define HOSTOFF_TOOLS_GEN_PRESETS_H

#include "gen.h"

#include <stddef.h>
#include <stdint.h>

struct gen_optdef {
    const char *name; /* --name */
    size_t offset;    /* of a uint64_t in the preset's model struct */
    uint64_t def;
    const char *help;
};

struct gen_preset {
    const char *name, *summary;
    const struct gen_optdef *opts;
    size_t nopts;
    size_t model_size; /* the model struct: its options, then what setup fills in */
    /* A shape that cannot be built: false and a message. */
    bool (*check)(const void *model, char *err, size_t cap);
    uint64_t (*param_count)(const void *model);
    void (*setup)(struct gen *g, void *model);
    void (*forward)(struct gen *g, const void *model);
};

extern const struct gen_preset gen_preset_gpt;
extern const struct gen_preset gen_preset_deepseek;

#endif
