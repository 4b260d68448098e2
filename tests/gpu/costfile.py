"""The SIMCUDA_COSTS file the GPU kit writes from vmmfacts' figures (format: tests/gpu/README.md,
"The cost file"), and a reader that checks a file against that format (the kit's tests use it).

Python standard library only; imported by tests/gpu/run and tests/gpu/sim_tests.py.
"""

import math
import re

MiB = 1 << 20

# VMM calls: vmmfacts' key stem -> the driver entry point; per location and size.
VMM_CALLS = (("create", "cuMemCreate"), ("map", "cuMemMap"), ("set_access", "cuMemSetAccess"),
             ("unmap", "cuMemUnmap"), ("release", "cuMemRelease"))
VMM_SIZES = (2, 64, 512)
# Allocation pairs measured at 2 and 64 MiB: key stem -> entry point.
ALLOC_CALLS = (("memalloc", "cuMemAlloc"), ("memfree", "cuMemFree"),
               ("hostalloc", "cuMemHostAlloc"), ("freehost", "cuMemFreeHost"))
ALLOC_SIZES = (2, 64)
# Host cost per call, no size.
FLAT_CALLS = (("us_launch", "cuLaunchKernel"), ("us_event_record", "cuEventRecord"),
              ("us_event_query", "cuEventQuery"), ("us_stream_wait_event", "cuStreamWaitEvent"))
# link.<field>: the first of the keys that was measured.
LINKS = (("h2d", ("copy_gbps_h2d",)), ("d2h", ("copy_gbps_d2h",)),
         ("h2d_duplex", ("copy_gbps_both_h2d",)), ("d2h_duplex", ("copy_gbps_both_d2h",)),
         ("zerocopy", ("read_gbps_host_vmm", "read_gbps_pinned_host")),
         ("hbm", ("copy_gbps_dtod",)))
LINK_FIELDS = {name for name, _ in LINKS}
ROW = re.compile(r"^(call\.[A-Za-z][A-Za-z0-9_]*(?:\.(?:device|host))?|call\.default|link\.\w+)$")
NUMBER = re.compile(r"^[0-9]+(?:\.[0-9]+)?$")


def measured(v):
    return isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v) and v >= 0


def fit(points):
    """(fixed_us, us_per_MiB) of the least-squares line through (MiB, us) points; one point:
    (its time, None). Negative parts (noise at small sizes) are clamped to 0."""
    pts = [(x, y) for x, y in points if measured(y)]
    if not pts:
        return None, None
    if len(pts) == 1:
        return pts[0][1], None
    n = len(pts)
    mx = sum(x for x, _ in pts) / n
    my = sum(y for _, y in pts) / n
    sxx = sum((x - mx) ** 2 for x, _ in pts)
    slope = sum((x - mx) * (y - my) for x, y in pts) / sxx if sxx else 0.0
    slope = max(0.0, slope)
    fixed = max(0.0, my - slope * mx)
    return fixed, slope


# The host-located calls an eviction makes on a pool slot already pinned and mapped at its own
# window (vmmfacts "remap": us_remap_<stem>_<loc>_<size>MiB). Every eviction pays these; a slot's
# first mapping is paid once. So where both were measured, the remap's figures are the row.
REMAP_CALLS = ("map", "set_access", "unmap")


def rows(f):
    """[(name, values, comment)] from vmmfacts' JSON figures f: only what was measured."""
    out = []
    host = {"HOST": "host", "HOST_NUMA": "host"}.get(f.get("host_location"))
    for loc, where in (("DEVICE", "device"), (f.get("host_location"), host)):
        if not where:
            continue
        for stem, entry in VMM_CALLS:
            pts = [(s, f.get(f"us_{stem}_{loc}_{s}MiB")) for s in VMM_SIZES]
            what = f"{loc} handle"
            remap = [(s, f.get(f"us_remap_{stem}_{loc}_{s}MiB")) for s in VMM_SIZES]
            if where == "host" and stem in REMAP_CALLS and any(measured(v) for _, v in remap):
                first = ", ".join(f"{s} MiB {v:.1f} us" for s, v in pts if measured(v))
                what = f"{loc} slot remapped, as an eviction does (first mapping: {first or '-'})"
                pts = remap
            fixed, per = fit(pts)
            if fixed is None:
                continue
            raw = ", ".join(f"{s} MiB {v:.1f} us" for s, v in pts if measured(v))
            out.append((f"call.{entry}.{where}", (fixed * 1e3,) + ((per * 1e3,) if per else ()),
                        f"{what}; medians {raw}"))
    for stem, entry in ALLOC_CALLS:
        pts = [(s, f.get(f"us_{stem}_{s}MiB")) for s in ALLOC_SIZES]
        fixed, per = fit(pts)
        if fixed is None:
            continue
        raw = ", ".join(f"{s} MiB {v:.1f} us" for s, v in pts if measured(v))
        out.append((f"call.{entry}", (fixed * 1e3,) + ((per * 1e3,) if per else ()),
                    f"medians {raw}"))
    for key, entry in FLAT_CALLS:
        if measured(f.get(key)):
            out.append((f"call.{entry}", (f[key] * 1e3,), "host time per call, median"))
    for field, keys in LINKS:
        key = next((k for k in keys if measured(f.get(k))), None)
        if key:
            out.append((f"link.{field}", (f[key],), f"vmmfacts {key}"))
    return out


def render(f, header):
    """The file's text: a '# measured on ...' header, then one row per measured figure."""
    lines = [f"# {h}" for h in header]
    for name, values, comment in rows(f):
        nums = "  ".join(f"{v:.3f}" if name.startswith("link.") else f"{v:.1f}" for v in values)
        lines.append(f"{name:<28} {nums:<24} # {comment}")
    return "\n".join(lines) + "\n"


def parse(text, path="costs"):
    """{row name: [numbers]} of a cost file; raises ValueError naming the line and what was
    expected, as the simulator's reader does."""
    out = {}
    for no, line in enumerate(text.splitlines(), 1):
        body = line.split("#", 1)[0].strip()
        if not body:
            continue
        parts = body.split()
        name, vals = parts[0], parts[1:]
        where = f"{path}:{no}"
        if not ROW.match(name):
            raise ValueError(f"{where}: '{name}': expected call.<entry>[.device|.host] or "
                             "link.<field>")
        if name.startswith("link."):
            if name[5:] not in LINK_FIELDS:
                raise ValueError(f"{where}: '{name}': unknown link field")
            if len(vals) != 1:
                raise ValueError(f"{where}: {name}: expected one number (GB/s)")
        elif not 1 <= len(vals) <= 2:
            raise ValueError(f"{where}: {name}: expected <fixed_ns> [<ns_per_MiB>]")
        for v in vals:
            if not NUMBER.match(v):
                raise ValueError(f"{where}: {name}: '{v}' is not a non-negative decimal number")
        out[name] = [float(v) for v in vals]
    return out
