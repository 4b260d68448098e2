/* SIMCUDA_REPORT: a JSON object written at process exit, atomically (temporary file, rename).
 *
 * Keys (contract): illegal_accesses, remote_accesses, hazards, managed_faults, virtual_ns (the
 * host clock at exit) and peak_device_bytes (the largest device footprint of any device), all
 * integers; more keys may follow. Work still queued at exit is run first (wall clock only), so
 * the counts cover everything the program launched. */
#include "sim.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

static void drain_for_report(void) {
    /* An executor can be blocked forever (a host function waiting on the host): give up after a
     * bounded wait rather than hang the exiting program. */
    struct timespec deadline;
    clock_gettime(CLOCK_REALTIME, &deadline);
    deadline.tv_sec += 10;
    for (int d = 0; d < sim.ndevices; d++) {
        struct sim_device *dev = &sim.devices[d];
        uint64_t target = dev->enqueued_seq;
        while (dev->done_seq < target && dev->thread_started) {
            if (pthread_cond_timedwait(&sim.progress, &sim.lock, &deadline) != 0) return;
        }
    }
}

static void write_report(void) {
    if (sim.cfg.report == NULL || sim.forked_child) return;
    sim_lock();
    drain_for_report();
    uint64_t peak = 0;
    for (int d = 0; d < sim.ndevices; d++)
        if (sim.devices[d].peak_bytes > peak) peak = sim.devices[d].peak_bytes;
    struct sim_stats st = sim.stats;
    uint64_t now = sim_now();
    sim_unlock();

    char tmp[4096];
    snprintf(tmp, sizeof tmp, "%s.tmp.%ld", sim.cfg.report, (long)getpid());
    FILE *f = fopen(tmp, "w");
    if (f == NULL) {
        fprintf(stderr, "simcuda: SIMCUDA_REPORT=%s: cannot write the report\n", sim.cfg.report);
        return;
    }
    fprintf(f,
            "{\"simcuda_report\": 1, \"illegal_accesses\": %llu, \"remote_accesses\": %llu, "
            "\"hazards\": %llu, \"managed_faults\": %llu, \"virtual_ns\": %llu, "
            "\"peak_device_bytes\": %llu, \"launches\": %llu, \"copies\": %llu, "
            "\"memsets\": %llu, \"bytes_h2d\": %llu, \"bytes_d2h\": %llu, \"bytes_d2d\": %llu, "
            "\"bytes_zerocopy\": %llu, \"first_illegal_address\": %llu, \"devices\": %d, "
            "\"data\": \"%s\", \"calls\": {",
            (unsigned long long)st.illegal_accesses, (unsigned long long)st.remote_accesses,
            (unsigned long long)st.hazards, (unsigned long long)st.managed_faults,
            (unsigned long long)now, (unsigned long long)peak, (unsigned long long)st.launches,
            (unsigned long long)st.copies, (unsigned long long)st.memsets,
            (unsigned long long)st.bytes_h2d, (unsigned long long)st.bytes_d2h,
            (unsigned long long)st.bytes_d2d, (unsigned long long)st.bytes_zerocopy,
            (unsigned long long)st.first_illegal_addr, sim.ndevices,
            sim.cfg.data == SIM_DATA_SPARSE ? "sparse" : "full");
    /* Calls by cost row and location ("cuMemCreate.host"), those made at least once. */
    const char *sep = "";
    for (int row = 0; row < SIM_COST_ROWS; row++) {
        for (int w = SIM_AT_DEVICE; w <= SIM_AT_HOST; w++) {
            uint64_t n = sim_cost_calls((enum sim_cost_row)row, (enum sim_where)w);
            if (n == 0) continue;
            fprintf(f, "%s\"%s.%s\": %llu", sep, sim_cost_name((enum sim_cost_row)row),
                    w == SIM_AT_HOST ? "host" : "device", (unsigned long long)n);
            sep = ", ";
        }
    }
    /* The figures every row charged, as in force (built in, or from SIMCUDA_COSTS): what a
     * reader needs to turn bytes and calls into host time (hostoff replay's remap bound). */
    for (int per_mib = 0; per_mib <= 1; per_mib++) {
        fprintf(f, "}, \"%s\": {", per_mib ? "cost_per_mib_ns" : "cost_fixed_ns");
        sep = "";
        for (int row = 0; row < SIM_COST_ROWS; row++) {
            for (int w = SIM_AT_DEVICE; w <= SIM_AT_HOST; w++) {
                double fixed, mib;
                sim_cost_figures((enum sim_cost_row)row, (enum sim_where)w, &fixed, &mib);
                fprintf(f, "%s\"%s.%s\": %.0f", sep, sim_cost_name((enum sim_cost_row)row),
                        w == SIM_AT_HOST ? "host" : "device", per_mib ? mib : fixed);
                sep = ", ";
            }
        }
    }
    fprintf(f, "}}\n");
    if (fclose(f) != 0 || rename(tmp, sim.cfg.report) != 0) {
        fprintf(stderr, "simcuda: SIMCUDA_REPORT=%s: cannot write the report\n", sim.cfg.report);
        remove(tmp);
    }
}

void sim_report_install(void) {
    if (sim.cfg.report != NULL) atexit(write_report);
}

SIM_EXPORT uint64_t simcuda_calls(const char *key) {
    for (int row = 0; row < SIM_COST_ROWS; row++) {
        const char *name = sim_cost_name((enum sim_cost_row)row);
        size_t n = strlen(name);
        if (strncmp(key, name, n) != 0 || key[n] != '.') continue;
        if (strcmp(key + n + 1, "device") == 0) return sim_cost_calls(row, SIM_AT_DEVICE);
        if (strcmp(key + n + 1, "host") == 0) return sim_cost_calls(row, SIM_AT_HOST);
    }
    return 0;
}
