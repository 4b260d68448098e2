/* The host link presets and the cost file of the hostoff command's replays (sim_costs.h). */
#include "sim_costs.h"

#include "cli.h"
#include "cost_file.h"

#include <limits.h>
#include <stdlib.h>
#include <string.h>

/* The one table of link presets (docs/simcuda.md "Costs" cites each figure). */
static const struct cli_link presets[] = {
    /* PCIe Gen5 x16: 55 GB/s each way alone (nvbandwidth memcpy_ce reports on H100/H200);
     * both at once 35 host-to-device + 53 device-to-host (nvbandwidth bidirectional reports):
     * the simulator's built-in link. */
    {"pcie5", 55, 55, 35, 53},
    /* GH200 NVLink-C2C: 345 host-to-device, 300 device-to-host alone (nvbandwidth issue #23,
     * copy engines); both at once 170 + 150, an estimate (no published per-direction figure:
     * nvbandwidth issue #41 reports the bidirectional case at about half the peak), as
     * tests/simcuda/costs-gh200-c2c.txt. */
    {"c2c", 345, 300, 170, 150},
};

bool cli_link_parse(const char *text, struct cli_link *out) {
    for (size_t i = 0; i < sizeof presets / sizeof presets[0]; i++) {
        if (strcmp(text, presets[i].name) == 0) {
            *out = presets[i];
            return true;
        }
    }
    uint64_t gbps = 0;
    if (!cli_parse_uint(text, false, &gbps) || gbps == 0 || gbps >= 1000000) return false;
    /* A rate each way; both at once, PCIe Gen5's shares of its one-way rate (35 and 53 of 55). */
    const struct cli_link *p = &presets[0];
    double g = (double)gbps;
    *out = (struct cli_link){text, g, g, g * p->h2d_duplex / p->h2d, g * p->d2h_duplex / p->d2h};
    return true;
}

static void link_row(void *ctx, const struct ho_cost_row *r) {
    struct cli_costs *c = ctx;
    if (!r->link) return;
    if (strcmp(r->name, "h2d") == 0) {
        c->has_h2d = true;
        c->h2d = r->gbps;
    } else if (strcmp(r->name, "d2h") == 0) {
        c->has_d2h = true;
        c->d2h = r->gbps;
    } else if (strcmp(r->name, "h2d_duplex") == 0) {
        c->has_h2d_duplex = true;
        c->h2d_duplex = r->gbps;
    } else if (strcmp(r->name, "d2h_duplex") == 0) {
        c->has_d2h_duplex = true;
        c->d2h_duplex = r->gbps;
    }
}

bool cli_costs_read(const char *who, const char *path, struct cli_costs *c) {
    memset(c, 0, sizeof *c);
    char err[1600];
    if (path == NULL || *path == '\0') {
        cli_error("%s: --costs needs a file", who);
        return false;
    }
    if (!ho_cost_file_read(path, link_row, c, err, sizeof err)) {
        cli_error("%s: --costs %s", who, err);
        return false;
    }
    if (realpath(path, c->path) == NULL) snprintf(c->path, sizeof c->path, "%s", path);
    return true;
}

bool cli_costs_use(const char *who, const char *path) {
    struct cli_costs c;
    if (!cli_costs_read(who, path, &c)) return false;
    if (setenv("SIMCUDA_COSTS", c.path, 1) != 0) {
        cli_error("%s: --costs %s: cannot set SIMCUDA_COSTS", who, path);
        return false;
    }
    return true;
}

void cli_link_with_costs(const char *link_text, const struct cli_costs *c, struct cli_link *link) {
    if (link_text != NULL && cli_link_parse(link_text, link)) return;
    *link = presets[0];
    if (c == NULL) return;
    if (c->has_h2d) link->h2d = c->h2d;
    if (c->has_d2h) link->d2h = c->d2h;
    if (c->has_h2d_duplex) link->h2d_duplex = c->h2d_duplex;
    if (c->has_d2h_duplex) link->d2h_duplex = c->d2h_duplex;
}
