#!/usr/bin/env python3
"""Generate simcuda's cuGetProcAddress table and "not supported" stubs.

Inputs are facts only: the committed list of names NVIDIA's driver exports
(driver_exports.txt) and the CUDA headers, which declare one
    typedef CUresult (CUDAAPI *PFN_<base>_v<VERSION>[_ptds|_ptsz])(...);
per entry point and ABI version (cudaTypedefs.h, cudaProfilerTypedefs.h).

Outputs:
  --table OUT.c   sim_proc_table[]: (base name, ABI version, per-thread?) ->
                  exported symbol, sorted for binary search by proc.c.
  --stubs OUT.c   a weak function per export returning CUDA_ERROR_NOT_SUPPORTED,
                  so every export exists and strong definitions elsewhere win.
                  (Distinct functions, not aliases of one: see write_stubs.)
  --check-c OUT.c sim_expect_table[] for the unit test, compiled against the real
                  cuda.h in __CUDA_API_VERSION_INTERNAL mode with one
                  _Static_assert per row that the chosen symbol's declared type
                  is exactly the PFN typedef of that ABI version.
  --check-stub LIB  exit non-zero if driver_exports.txt differs from LIB's exports.

Mapping rules (fail loudly rather than guess):
  * legacy typedef versions of a base, ascending, map to base, base_v2, base_v3...
  * a _ptds/_ptsz typedef at version V maps to the legacy symbol current at V plus
    the suffix (e.g. cuMemcpyHtoD_v7000_ptds -> cuMemcpyHtoD_v2_ptds);
  * every mapped symbol must be exported;
  * where cuda.h (or cudaProfiler.h) has '#define base target' or
    '#define base __CUDA_API_PTDS(target)', target must be the newest legacy symbol
    (and target_ptds the newest per-thread one);
  * anything else needs an entry in OVERRIDES below.
"""

import argparse
import os
import re
import subprocess
import sys

# Typedef headers describing the driver's own entry points.  The graphics-interop
# ones (cudaGLTypedefs.h, cudaEGLTypedefs.h, cudaVDPAUTypedefs.h) are left out on
# purpose: NVIDIA's stub driver, whose export list simcuda copies, exports none of
# those entry points, so lookups for them (cudart asks for cuGLMapBufferObject)
# must answer CU_GET_PROC_ADDRESS_SYMBOL_NOT_FOUND like a driver without them.
TYPEDEF_HEADERS = ["cudaTypedefs.h", "cudaProfilerTypedefs.h"]
# Headers whose '#define cuX cuX_v2' lines say which variant is current.
API_HEADERS = ["cuda.h", "cudaProfiler.h"]

# Base names whose mapping cannot be derived from the rules above.  Each entry says
# why; 'extra' rows are (version, symbol, PFN typedef whose ABI the symbol has) and
# 'define' is the cuda.h #define target that is expected instead of the newest
# legacy variant.
OVERRIDES = {
    # cudaTypedefs.h only knows the two 5-argument ABIs (v10000 -> cuGraphInstantiate,
    # v11000 -> cuGraphInstantiate_v2).  Since CUDA 12.0, cuda.h declares
    # cuGraphInstantiate as '#define cuGraphInstantiate cuGraphInstantiateWithFlags',
    # i.e. a CUDA >= 12 caller asking for "cuGraphInstantiate" expects the
    # 3-argument WithFlags ABI; handing it cuGraphInstantiate_v2 would be an ABI
    # mismatch.  So requests at 12000 and later resolve to cuGraphInstantiateWithFlags
    # and older ones keep the 5-argument variants that cudart asks for by version.
    "cuGraphInstantiate": {
        "extra": [(12000, "cuGraphInstantiateWithFlags", "PFN_cuGraphInstantiateWithFlags_v11040")],
        "define": "cuGraphInstantiateWithFlags",
    },
    # cuda.h keeps both ABIs under their own names: cuStreamGetCtx(hStream, pctx) and
    # cuStreamGetCtx_v2(hStream, pCtx, pGreenCtx), and only wraps each in
    # __CUDA_API_PTSZ; there is no '#define cuStreamGetCtx cuStreamGetCtx_v2'.  The
    # typedefs still say PFN_cuStreamGetCtx_v12050 is the 3-argument ABI, so lookups
    # at 12050 and later get cuStreamGetCtx_v2; only the define cross-check differs.
    "cuStreamGetCtx": {"define": "cuStreamGetCtx"},
}

TYPEDEF_RE = re.compile(r"^\s*typedef\s+CUresult\s*\(\s*CUDAAPI\s*\*\s*PFN_(\w+)\s*\)")
PFN_NAME_RE = re.compile(r"^(?P<base>\w+?)_v(?P<ver>\d+)(?P<suf>_ptds|_ptsz)?$")
DEFINE_RE = re.compile(
    r"^\s*#\s*define\s+(?P<name>cu\w+)\s+"
    r"(?:(?P<wrap>__CUDA_API_PT(?:DS|SZ))\(\s*(?P<wtarget>cu\w+)\s*\)|(?P<target>cu\w+))\s*$"
)
# Preprocessor conditions met around typedefs, and whether the driver has those
# entry points.  The legacy ABIs sit under __CUDA_API_VERSION_INTERNAL and are
# exported; Windows-only ones are not.  Any other condition around a typedef is an
# error so that a new header layout is looked at, not silently mis-parsed.
KNOWN_CONDITIONS = [
    (re.compile(r"^#\s*ifndef\s+CUDA\w*TYPEDEFS_H\b"), True),
    (re.compile(r"^#\s*if\s+defined\s*\(\s*__CUDA_API_VERSION_INTERNAL\s*\)\s*$"), True),
    (re.compile(r"^#\s*if(def\s+|\s+defined\s*\(?\s*)_WIN32\b"), False),
    (re.compile(r"^#\s*ifdef\s+__cplusplus\b"), False),
]


class GenError(Exception):
    pass


class Row:
    """One (base, version, per-thread) -> symbol mapping."""

    def __init__(self, base, version, per_thread, symbol, pfn, override=False):
        self.base = base
        self.version = version
        self.per_thread = per_thread
        self.symbol = symbol
        self.pfn = pfn  # typedef whose ABI the symbol must have
        self.override = override  # True for rows from OVERRIDES

    def key(self):
        return (self.base, self.per_thread, self.version)


def read_exports(path):
    names = []
    with open(path, encoding="ascii") as f:
        for line in f:
            line = line.strip()
            if line and not line.startswith("#"):
                names.append(line)
    if names != sorted(set(names)):
        raise GenError(f"{path}: names must be unique and sorted")
    return names


def condition_state(line):
    """True/False for a known #if line, None for an unknown one."""
    for pattern, state in KNOWN_CONDITIONS:
        if pattern.match(line):
            return state
    return None


def parse_typedef_header(path):
    """Yield PFN names with the enclosing-conditions verdict, failing on surprises."""
    stack = []  # True (compiled for the driver), False (not), None (unknown)
    with open(path, encoding="utf-8", errors="replace") as f:
        for lineno, raw in enumerate(f, 1):
            line = raw.strip()
            if re.match(r"#\s*if", line):
                stack.append(condition_state(line))
            elif re.match(r"#\s*el", line):
                # '#else' of a known condition flips it; '#elif' is never understood.
                top = stack[-1] if stack else None
                known = top is not None and re.match(r"#\s*else\b", line)
                stack[-1] = (not top) if known else None
            elif re.match(r"#\s*endif", line):
                stack.pop()
            elif "PFN_" in line:
                m = TYPEDEF_RE.match(line)
                if not m:
                    raise GenError(f"{path}:{lineno}: unrecognised PFN line: {line}")
                if None in stack:
                    raise GenError(f"{path}:{lineno}: typedef under an unknown #if")
                if all(stack):
                    yield m.group(1)


def parse_typedefs(include_dir):
    """Map base -> list of (version, suffix, pfn)."""
    bases = {}
    for header in TYPEDEF_HEADERS:
        path = os.path.join(include_dir, header)
        if not os.path.exists(path):
            raise GenError(f"{path} not found")
        for pfn in parse_typedef_header(path):
            m = PFN_NAME_RE.match(pfn)
            if not m:
                raise GenError(f"{header}: PFN_{pfn} has no _v<version>")
            entry = (int(m.group("ver")), m.group("suf") or "", "PFN_" + pfn)
            bases.setdefault(m.group("base"), []).append(entry)
    return bases


def parse_defines(include_dir):
    """Map macro name -> (wrapper suffix or '', target) from the API headers."""
    defines = {}
    for header in API_HEADERS:
        path = os.path.join(include_dir, header)
        if not os.path.exists(path):
            continue
        with open(path, encoding="utf-8", errors="replace") as f:
            for line in f:
                m = DEFINE_RE.match(line)
                if not m:
                    continue
                wrap = m.group("wrap")
                suffix = "_" + wrap[-4:].lower() if wrap else ""
                value = (suffix, m.group("wtarget") or m.group("target"))
                if defines.setdefault(m.group("name"), value) != value:
                    raise GenError(f"{header}: conflicting #define {m.group('name')}")
    return defines


def map_base(base, entries, exports, override):
    """Turn one base's typedef versions into rows; raise on anything unmappable."""
    legacy = sorted((e for e in entries if not e[1]), key=lambda e: e[0])
    threaded = sorted((e for e in entries if e[1]), key=lambda e: e[0])
    versions = [e[0] for e in legacy]
    if len(set(versions)) != len(versions):
        raise GenError(f"{base}: duplicate legacy typedef versions {versions}")
    if len({e[1] for e in threaded}) > 1:
        raise GenError(f"{base}: mixes _ptds and _ptsz typedefs")
    rows = []
    for i, (ver, _, pfn) in enumerate(legacy):
        symbol = base if i == 0 else f"{base}_v{i + 1}"
        rows.append(Row(base, ver, 0, symbol, pfn))
    legacy_rows = list(rows)
    for ver, suffix, pfn in threaded:
        current = [r for r in legacy_rows if r.version <= ver]
        if not current:
            raise GenError(f"{base}: {pfn} is older than every legacy variant")
        rows.append(Row(base, ver, 1, current[-1].symbol + suffix, pfn))
    check_per_thread_coverage(base, rows)
    for version, symbol, pfn in (override or {}).get("extra", []):
        rows.append(Row(base, version, 0, symbol, pfn, override=True))
    for row in rows:
        if row.symbol not in exports:
            raise GenError(f"{base}: {row.pfn} maps to {row.symbol}, which is not exported")
    return rows


def check_per_thread_coverage(base, rows):
    """A per-thread lookup at V must get the same ABI as a legacy lookup at V.

    That holds when every legacy variant introduced after the first per-thread one
    has a per-thread twin; otherwise the per-thread answer would be stale.
    """
    threaded = [r for r in rows if r.per_thread]
    if not threaded:
        return
    twins = {r.symbol[: -len("_ptds")] for r in threaded}
    for r in rows:
        if not r.per_thread and r.version >= threaded[0].version and r.symbol not in twins:
            raise GenError(f"{base}: legacy {r.symbol} has no per-thread variant")


def check_define(base, rows, define, override):
    """Cross-check cuda.h's '#define base target' against the derived variants.

    Normally target is the newest legacy variant (and target_ptds/_ptsz the newest
    per-thread one); an override may name another expected target, which must then
    still be one of the derived symbols or the override's own.
    """
    suffix, target = define
    legacy = [r for r in rows if not r.per_thread and not r.override]
    expected = (override or {}).get("define", legacy[-1].symbol)
    if target != expected:
        raise GenError(f"{base}: cuda.h maps it to {target}, newest typedef variant is {expected}")
    if suffix:
        threaded = [r.symbol for r in rows if r.per_thread]
        ok = target + suffix in threaded if override else threaded[-1:] == [target + suffix]
        if not ok:
            raise GenError(f"{base}: cuda.h per-thread name {target}{suffix} is not derived")


def check_versioned_defines(defines, exports):
    """'#define cuX_v2 __CUDA_API_PTSZ(cuX_v2)' must name an exported variant."""
    for name, (suffix, target) in defines.items():
        if suffix and target + suffix not in exports:
            raise GenError(f"#define {name}: {target}{suffix} is not exported")


def build_rows(include_dir, exports):
    typedefs = parse_typedefs(include_dir)
    defines = parse_defines(include_dir)
    export_set = set(exports)
    unknown = set(OVERRIDES) - set(typedefs)
    if unknown:
        raise GenError(f"OVERRIDES name bases without typedefs: {sorted(unknown)}")
    rows = []
    for base in sorted(typedefs):
        override = OVERRIDES.get(base)
        base_rows = map_base(base, typedefs[base], export_set, override)
        if base in defines:
            check_define(base, base_rows, defines[base], override)
        rows.extend(base_rows)
    check_versioned_defines(defines, export_set)
    rows.sort(key=Row.key)
    keys = [r.key() for r in rows]
    if len(set(keys)) != len(keys):
        raise GenError("duplicate (name, per_thread, version) rows")
    return rows


HEADER = (
    "/* Generated by tests/simcuda/gen_driver_tables.py from {src}; do not edit. */\n"
    "/* clang-format off */\n"
)


def c_string(name):
    if not re.fullmatch(r"\w+", name):
        raise GenError(f"refusing to emit odd name {name!r}")
    return f'"{name}"'


def write_table(path, rows, exports):
    symbols = sorted({r.symbol for r in rows})
    referenced = set(symbols)
    out = [HEADER.format(src="the CUDA *Typedefs.h headers and driver_exports.txt")]
    out.append("/* No cuda.h here: the entry points are only taken by address. */\n")
    out.append('#include "proc_table.h"\n\n')
    out += [f"extern void {s}(void);\n" for s in symbols]
    out.append("\nconst struct sim_proc_entry sim_proc_table[] = {\n")
    for r in rows:
        out.append(
            f"    {{{c_string(r.base)}, {r.version}u, {r.per_thread}, "
            f"{c_string(r.symbol)}, {r.symbol}}},\n"
        )
    out.append("};\n\nconst size_t sim_proc_table_len =\n")
    out.append("    sizeof sim_proc_table / sizeof sim_proc_table[0];\n")
    stub_only = [e for e in exports if e not in referenced]
    out.append(f"\n/* {len(stub_only)} exports have no PFN typedef and only exist as stubs:\n")
    out += [f" *   {e}\n" for e in stub_only]
    out.append(" */\n")
    write_file(path, "".join(out))


def write_stubs(path, exports):
    out = [HEADER.format(src="driver_exports.txt")]
    out.append(
        "/* Every export of NVIDIA's driver exists in simcuda.  Each is a weak function,\n"
        " * so a strong definition elsewhere in the library wins at link time, and what\n"
        " * is left returns CUDA_ERROR_NOT_SUPPORTED instead of crashing the caller.\n"
        " * They are distinct functions rather than aliases of one, so that a pointer\n"
        " * handed out by cuGetProcAddress still tells which variant was chosen (and a\n"
        " * backtrace names the API).  The prototypes are deliberately (void): the\n"
        " * arguments are ignored and no cuda.h is needed. */\n\n"
    )
    out.append("#define SIM_STUB __attribute__((weak, visibility(\"default\")))\n\n")
    out.append("enum { SIM_CUDA_ERROR_NOT_SUPPORTED = 801 };\n\n")
    out.append("__attribute__((visibility(\"hidden\"), noinline)) int sim_not_supported(void);\n")
    out.append("int sim_not_supported(void) { return SIM_CUDA_ERROR_NOT_SUPPORTED; }\n\n")
    for e in exports:
        c_string(e)
        out.append(f"SIM_STUB int {e}(void);\n")
        out.append(f"int {e}(void) {{ return sim_not_supported(); }}\n")
    write_file(path, "".join(out))


def write_check(path, rows):
    out = [HEADER.format(src="the CUDA *Typedefs.h headers and driver_exports.txt")]
    out.append(
        "/* Expected cuGetProcAddress answers for the unit test.  The internal mode of\n"
        " * cuda.h declares every legacy ABI (cuMemAlloc with unsigned int sizes, ...)\n"
        " * next to the current and _ptds/_ptsz ones; each row below is checked at\n"
        " * compile time: the symbol it names must be declared with exactly the type of\n"
        " * the PFN_<base>_v<version> typedef of that row. */\n"
        "#define __CUDA_API_VERSION_INTERNAL 1\n"
        "#include <cuda.h>\n#include <cudaTypedefs.h>\n#include <cudaProfilerTypedefs.h>\n"
    )
    out.append('\n#include "proc_table.h"\n\n')
    out.append(
        "#define SIM_SAME_ABI(sym, pfn) \\\n"
        "    _Static_assert(__builtin_types_compatible_p(__typeof__(&sym), pfn), \\\n"
        "                   #sym \" is not declared as \" #pfn)\n\n"
    )
    out += [f"SIM_SAME_ABI({r.symbol}, {r.pfn});\n" for r in rows]
    out.append("\nconst struct sim_proc_entry sim_expect_table[] = {\n")
    for r in rows:
        out.append(
            f"    {{{c_string(r.base)}, {r.version}u, {r.per_thread}, {c_string(r.symbol)}, 0}},\n"
        )
    out.append("};\n\nconst size_t sim_expect_table_len =\n")
    out.append("    sizeof sim_expect_table / sizeof sim_expect_table[0];\n")
    write_file(path, "".join(out))


def write_file(path, text):
    # Always rewritten: ninja reruns a custom_target whose outputs stay older than
    # its inputs, so skipping unchanged writes would regenerate on every build.
    with open(path, "w", encoding="ascii") as f:
        f.write(text)


def library_exports(lib):
    try:
        res = subprocess.run(
            ["nm", "-D", "--defined-only", lib], capture_output=True, text=True, check=True
        )
    except (OSError, subprocess.CalledProcessError) as err:
        raise GenError(f"cannot list the exports of {lib}: {err}") from err
    names = {f.split()[2] for f in res.stdout.splitlines() if len(f.split()) == 3}
    return sorted(names)


def check_stub(lib, exports, extra_prefix=None):
    actual = library_exports(lib)
    if extra_prefix:
        # The simulator's own API (simcuda.h) is exported beside the driver's names.
        actual = [n for n in actual if not n.startswith(extra_prefix)]
    missing = sorted(set(actual) - set(exports))
    extra = sorted(set(exports) - set(actual))
    if missing or extra:
        msg = [f"driver_exports.txt differs from the exports of {lib}:"]
        msg += [f"  missing from the list: {n}" for n in missing]
        msg += [f"  listed but not exported: {n}" for n in extra]
        msg.append("regenerate it with: nm -D --defined-only LIB | awk '{print $3}' | LC_ALL=C sort")
        raise GenError("\n".join(msg))


def main(argv):
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--exports", required=True, help="driver_exports.txt")
    ap.add_argument("--cuda-include", help="directory holding cuda.h and cudaTypedefs.h")
    ap.add_argument("--table", help="write the cuGetProcAddress table (C) here")
    ap.add_argument("--stubs", help="write the weak not-supported stubs (C) here")
    ap.add_argument("--check-c", help="write the test's expected-variant table (C) here")
    ap.add_argument("--check-stub", metavar="LIB", help="compare --exports with LIB's exports")
    ap.add_argument("--allow-prefix", help="with --check-stub: ignore LIB's exports with this prefix")
    args = ap.parse_args(argv)
    generating = args.table or args.stubs or args.check_c
    if not generating and not args.check_stub:
        ap.error("nothing to do")
    if generating and not args.cuda_include:
        ap.error("--cuda-include is required to generate")
    try:
        exports = read_exports(args.exports)
        if args.check_stub:
            check_stub(args.check_stub, exports, args.allow_prefix)
        if generating:
            rows = build_rows(args.cuda_include, exports)
            if args.table:
                write_table(args.table, rows, exports)
            if args.stubs:
                write_stubs(args.stubs, exports)
            if args.check_c:
                write_check(args.check_c, rows)
    except GenError as err:
        print(f"gen_driver_tables.py: error: {err}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
