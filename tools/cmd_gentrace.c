/* hostoff gen-trace PRESET [options] -o FILE: the trace of a synthetic training job.
 *
 * The job: parameters and optimizer state allocated once; then, for each step, a step marker and
 * for each micro-batch the input batch copied in, the forward pass and the backward pass; then
 * Adam over every parameter group, the gradients freed, and a synchronisation (the loss read
 * back). The preset builds the model (gen_presets.h), the tape derives the rest (gen.h).
 *
 * The generator runs twice: a counting pass computes the peak and the totals the first line
 * carries, then the writing pass writes the same events. */
#include "cli.h"
#include "outfile.h"
#include "gen.h"
#include "gen_presets.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const struct gen_preset *const presets[] = {&gen_preset_gpt, &gen_preset_deepseek};
#define NPRESETS (sizeof presets / sizeof presets[0])

struct job {
    const struct gen_preset *preset;
    void *model;
    int dtype;
    const char *dtype_name;
    uint64_t steps, accum, host_ns;
};

static void usage(FILE *f, const struct gen_preset *only) {
    fprintf(f, "usage: hostoff gen-trace PRESET [options] -o FILE   (FILE - : standard output)\n\n"
               "options of every preset:\n"
               "  --dtype bf16|fp16|fp32   activations, weights and gradients (default bf16;\n"
               "                           bf16/fp16 keep fp32 master weights)\n"
               "  --steps N                training steps (default 3)\n"
               "  --accum N                micro-batches per step (default 1)\n"
               "  --host-ns N              host time per launch or copy, ns (default 5000)\n");
    for (size_t i = 0; i < NPRESETS; i++) {
        const struct gen_preset *p = presets[i];
        if (only != NULL && p != only) continue;
        fprintf(f, "\n%s: %s\n", p->name, p->summary);
        for (size_t k = 0; k < p->nopts; k++)
            fprintf(f, "  --%-16s %s (default %llu)\n", p->opts[k].name, p->opts[k].help,
                    (unsigned long long)p->opts[k].def);
    }
}

static uint64_t *field(const struct job *j, size_t k) {
    return (uint64_t *)(void *)((char *)j->model + j->preset->opts[k].offset);
}

/* One whole job, into g (counting or writing). */
static void run(struct gen *g, const struct job *j, struct cli_progress *prog) {
    const struct gen_preset *p = j->preset;
    p->setup(g, j->model);
    for (uint64_t s = 0; s < j->steps && !g->failed; s++) {
        gen_step(g);
        for (uint64_t a = 0; a < j->accum; a++) {
            gen_copy_h2d(g, g->tokens, g->token_bytes);
            p->forward(g, j->model);
            gen_backward(g);
        }
        gen_optimizer(g);
        gen_sync(g);
        if (prog != NULL) cli_progress(prog, s + 1, j->steps);
    }
}

/* A preset option's value, by name (every preset has micro-batch and seq). */
static uint64_t opt_value(const struct job *j, const char *name) {
    for (size_t k = 0; k < j->preset->nopts; k++)
        if (strcmp(j->preset->opts[k].name, name) == 0) return *field(j, k);
    return 0;
}

static void header(FILE *f, const struct job *j, const struct gen *count) {
    fprintf(f,
            "{\"hostoff_trace\":1,\"device\":{\"name\":\"NVIDIA H200 (modelled)\","
            "\"mem_bytes\":151397597184},\"generator\":{\"preset\":\"%s\",\"dtype\":\"%s\"",
            j->preset->name, j->dtype_name);
    for (size_t k = 0; k < j->preset->nopts; k++)
        fprintf(f, ",\"%s\":%llu", j->preset->opts[k].name, (unsigned long long)*field(j, k));
    fprintf(f,
            ",\"steps\":%llu,\"accum\":%llu,\"host_ns\":%llu,\"params\":%llu,\"peak_bytes\":%llu,"
            "\"events\":%llu,\"launches\":%llu,\"step_device_ns\":%.0f,"
            "\"flops_per_s\":%.0f,\"hbm_bytes_per_s\":%.0f}}\n",
            (unsigned long long)j->steps, (unsigned long long)j->accum,
            (unsigned long long)j->host_ns, (unsigned long long)j->preset->param_count(j->model),
            (unsigned long long)count->peak, (unsigned long long)count->events,
            (unsigned long long)count->launches, count->device_ns / (double)j->steps,
            count->flops_rate, count->bytes_rate);
}

static int parse(int argc, char **argv, struct job *j, const char **out) {
    j->dtype = 2;
    j->dtype_name = "bf16";
    j->steps = 3;
    j->accum = 1;
    j->host_ns = 5000;
    for (size_t k = 0; k < j->preset->nopts; k++)
        *field(j, k) = j->preset->opts[k].def;
    for (int i = 2; i < argc; i++) {
        const char *a = argv[i];
        if (strcmp(a, "--help") == 0 || strcmp(a, "-h") == 0) {
            usage(stdout, j->preset);
            exit(0);
        }
        if (i + 1 >= argc) {
            cli_error("gen-trace: %s needs a value", a);
            return 2;
        }
        const char *v = argv[++i];
        uint64_t n = 0;
        if (strcmp(a, "-o") == 0 || strcmp(a, "--output") == 0) {
            *out = v;
            continue;
        }
        if (strcmp(a, "--dtype") == 0) {
            if (strcmp(v, "bf16") == 0 || strcmp(v, "fp16") == 0)
                j->dtype = 2;
            else if (strcmp(v, "fp32") == 0)
                j->dtype = 4;
            else {
                cli_error("gen-trace: --dtype %s: expected bf16, fp16 or fp32", v);
                return 2;
            }
            j->dtype_name = v;
            continue;
        }
        const char *why = "expected --option NUMBER";
        if (strncmp(a, "--", 2) != 0 || !cli_parse_uint_why(v, true, &n, &why)) {
            cli_error("gen-trace: %s %s: %s", a, v, why);
            return 2;
        }
        if (strcmp(a, "--steps") == 0)
            j->steps = n;
        else if (strcmp(a, "--accum") == 0)
            j->accum = n;
        else if (strcmp(a, "--host-ns") == 0)
            j->host_ns = n;
        else {
            size_t k = 0;
            while (k < j->preset->nopts && strcmp(a + 2, j->preset->opts[k].name) != 0)
                k++;
            if (k == j->preset->nopts) {
                cli_error("gen-trace: %s has no option %s (hostoff gen-trace %s --help)",
                          j->preset->name, a, j->preset->name);
                return 2;
            }
            *field(j, k) = n;
        }
    }
    if (*out == NULL) {
        cli_error("gen-trace: no output: -o FILE");
        return 2;
    }
    if (j->steps == 0 || j->accum == 0) {
        cli_error("gen-trace: --steps and --accum must be at least 1");
        return 2;
    }
    char err[256];
    if (!j->preset->check(j->model, err, sizeof err)) {
        cli_error("gen-trace: %s: %s", j->preset->name, err);
        return 2;
    }
    return 0;
}

int cmd_gentrace(int argc, char **argv) {
    if (argc < 2 || strcmp(argv[1], "--help") == 0 || strcmp(argv[1], "-h") == 0) {
        usage(argc < 2 ? stderr : stdout, NULL);
        return argc < 2 ? 2 : 0;
    }
    struct job j = {0};
    for (size_t i = 0; i < NPRESETS; i++)
        if (strcmp(argv[1], presets[i]->name) == 0) j.preset = presets[i];
    if (j.preset == NULL) {
        cli_error("gen-trace: unknown preset '%s' (gpt or deepseek)", argv[1]);
        return 2;
    }
    j.model = calloc(1, j.preset->model_size);
    if (j.model == NULL) return 1;
    const char *out = NULL;
    int rc = parse(argc, argv, &j, &out);
    if (rc != 0) {
        free(j.model);
        return rc;
    }
    /* The input batch: token ids and labels, int32, for one micro-batch. */
    uint64_t batch = opt_value(&j, "micro-batch") * opt_value(&j, "seq") * 4 * 2;

    struct gen count;
    gen_init(&count, NULL, j.dtype, j.host_ns);
    gen_inputs(&count, batch);
    run(&count, &j, NULL);
    if (count.failed) {
        cli_error("gen-trace: out of memory");
        gen_done(&count);
        free(j.model);
        return 1;
    }

    bool to_stdout = strcmp(out, "-") == 0;
    struct ho_outfile file;
    FILE *f = to_stdout ? stdout : cli_create(&file, out, "gen-trace");
    if (f == NULL) {
        gen_done(&count);
        free(j.model);
        return 1;
    }
    static char buf[1 << 20];
    setvbuf(f, buf, _IOFBF, sizeof buf);
    header(f, &j, &count);
    struct gen g;
    gen_init(&g, f, j.dtype, j.host_ns);
    gen_inputs(&g, batch);
    struct cli_progress prog;
    cli_progress_start(&prog, "gen-trace");
    run(&g, &j, &prog);
    cli_progress_end(&prog);
    bool ok = !g.failed && !ferror(f);
    if (to_stdout) {
        if (fflush(f) != 0) ok = false;
        if (!ok) cli_error("gen-trace: writing %s failed", out);
    } else {
        /* Only the temporary is removed on failure: never what was at the path. */
        ok = cli_finish(&file, f, ok, "gen-trace");
    }
    if (ok && !to_stdout) {
        char peak[32];
        cli_format_bytes(count.peak, peak, sizeof peak);
        printf("%s: %.2f billion parameters, peak %s, %llu steps, %llu events, %.3f ms of "
               "kernels per step -> %s\n",
               j.preset->name, (double)j.preset->param_count(j.model) / 1e9, peak,
               (unsigned long long)j.steps, (unsigned long long)count.events,
               count.device_ns / (double)j.steps / 1e6, out);
    }
    gen_done(&count);
    gen_done(&g);
    free(j.model);
    return ok ? 0 : 1;
}
