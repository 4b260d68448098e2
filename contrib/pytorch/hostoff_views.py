"""The two views a preloaded library gets of a recorded PyTorch job (hostoff_record.py).

tensor   one buffer per tensor storage, allocated and freed when PyTorch allocates and frees it:
         what the cudaMallocAsync backend (PYTORCH_CUDA_ALLOC_CONF=backend:cudaMallocAsync) or the
         contrib/pytorch adapter shows. Allocations and frees are stream-ordered ("s": 0, replayed
         as cuMemAllocAsync / cuMemFreeAsync on the default stream).
segment  the segments of PyTorch's default caching allocator (CachingAllocator below): the driver
         sees a cudaMalloc when no cached block fits and never a free (cached blocks stay in their
         segments); a launch uses the segments its tensors live in.

Standard library only: the recording is a list of event tuples (hostoff_record.Recorder.events).
"""

import bisect
import json

H200_MEM_BYTES = 151397597184  # 141 GiB, as hostoff gen-trace writes it

# PyTorch's CUDACachingAllocator (c10/cuda/CUDACachingAllocator.cpp), its documented defaults:
MIN_BLOCK = 512  # every request is rounded up to a multiple of 512 bytes (at least 512)
SMALL_SIZE = 1 << 20  # requests up to 1 MiB come from the small pool...
SMALL_BUFFER = 2 << 20  # ...whose segments are 2 MiB
LARGE_BUFFER = 20 << 20  # larger requests under MIN_LARGE_ALLOC get a 20 MiB segment
MIN_LARGE_ALLOC = 10 << 20
ROUND_LARGE = 2 << 20  # from 10 MiB up, a segment of the request rounded up to 2 MiB
SEGMENT_ALIGN = 2 << 20  # addresses of new segments (cudaMalloc returns 2 MiB aligned ranges)


def round_size(nbytes):
    if nbytes < MIN_BLOCK:
        return MIN_BLOCK
    return MIN_BLOCK * ((nbytes + MIN_BLOCK - 1) // MIN_BLOCK)


def segment_size(size):
    if size <= SMALL_SIZE:
        return SMALL_BUFFER
    if size < MIN_LARGE_ALLOC:
        return LARGE_BUFFER
    return ROUND_LARGE * ((size + ROUND_LARGE - 1) // ROUND_LARGE)


class _Block:
    __slots__ = ("seg", "addr", "size", "used", "prev", "next", "small")

    def __init__(self, seg, addr, size, small):
        self.seg, self.addr, self.size, self.small = seg, addr, size, small
        self.used = False
        self.prev = self.next = None


class CachingAllocator:
    """The default caching allocator on one stream, as its source documents it: sizes rounded to
    512 bytes; two pools (small: up to 1 MiB; large); best fit (the smallest free block that is
    large enough, the lowest address among equals); a new segment when none fits (2 MiB for the
    small pool, 20 MiB for requests under 10 MiB, else the request rounded up to 2 MiB); a block
    larger than the request is split when what remains is at least 512 bytes (small pool) or
    more than 1 MiB (large pool); a freed block merges with free neighbours in its segment and
    stays cached. Not modelled: max_split_size_mb, roundup_power2_divisions, expandable segments,
    garbage collection and the release of cached segments when cudaMalloc fails (under hostoff
    cudaMalloc does not fail for want of device memory), several streams."""

    def __init__(self):
        self.free = {True: [], False: []}  # pool (small?) -> sorted [(size, addr, block)]
        self.segments = []  # segment id -> bytes
        self.next_addr = SEGMENT_ALIGN
        self.blocks = {}  # sid -> _Block
        self.reserved = 0

    def _insert(self, b):
        bisect.insort(self.free[b.small], (b.size, b.addr, id(b), b))

    def _remove(self, b):
        lst = self.free[b.small]
        i = bisect.bisect_left(lst, (b.size, b.addr, id(b)))
        assert lst[i][3] is b
        del lst[i]

    def malloc(self, sid, nbytes):
        """Returns the id of a new segment when the driver was asked for one, else None."""
        size = round_size(nbytes)
        small = size <= SMALL_SIZE
        lst = self.free[small]
        i = bisect.bisect_left(lst, (size, 0, 0))
        new_seg = None
        if i < len(lst):
            b = lst[i][3]
            del lst[i]
        else:
            seg_bytes = segment_size(size)
            new_seg = len(self.segments)
            self.segments.append(seg_bytes)
            self.reserved += seg_bytes
            b = _Block(new_seg, self.next_addr, seg_bytes, small)
            self.next_addr += (seg_bytes + SEGMENT_ALIGN - 1) // SEGMENT_ALIGN * SEGMENT_ALIGN
        remaining = b.size - size
        if (small and remaining >= MIN_BLOCK) or (not small and remaining > SMALL_SIZE):
            rest = _Block(b.seg, b.addr + size, remaining, small)
            rest.prev, rest.next = b, b.next
            if b.next is not None:
                b.next.prev = rest
            b.next = rest
            b.size = size
            self._insert(rest)
        b.used = True
        self.blocks[sid] = b
        return new_seg

    def free_block(self, sid):
        b = self.blocks.pop(sid)
        b.used = False
        for nb in (b.prev, b.next):
            if nb is not None and not nb.used:
                self._remove(nb)
                if nb is b.prev:  # merge into the earlier block
                    nb.size += b.size
                    nb.next = b.next
                    if b.next is not None:
                        b.next.prev = nb
                    b = nb
                else:
                    b.size += nb.size
                    b.next = nb.next
                    if nb.next is not None:
                        nb.next.prev = b
        self._insert(b)

    def segment_of(self, sid):
        return self.blocks[sid].seg


def _lines(rec, view):
    """Yields (step index or None, event dict) for every event of the view, in order."""
    steps = set(rec.steps)
    alloc = CachingAllocator() if view == "segment" else None
    for i, ev in enumerate(rec.events):
        mark = i in steps
        kind = ev[0]
        if kind == "alloc":
            _, sid, nbytes, site, t = ev
            if alloc is None:
                yield mark, {"e": "alloc", "t": t, "id": sid, "bytes": nbytes, "s": 0, "site": site}
                continue
            seg = alloc.malloc(sid, nbytes)
            if seg is not None:
                yield mark, {"e": "alloc", "t": t, "id": seg, "bytes": alloc.segments[seg],
                             "site": site}
            elif mark:
                yield mark, None
        elif kind == "free":
            _, sid, t = ev
            if alloc is None:
                yield mark, {"e": "free", "t": t, "id": sid, "s": 0}
            else:
                alloc.free_block(sid)
                if mark:
                    yield mark, None
        elif kind == "launch":
            _, name, ns, uses, t = ev
            ids = [sid for sid, _ in uses]
            if alloc is not None:
                ids = list(dict.fromkeys(alloc.segment_of(sid) for sid in ids))
            yield mark, {"e": "launch", "t": t, "s": 0, "k": name, "ns": ns, "use": ids}
        elif kind == "copy":
            _, direction, nbytes, sids, t = ev
            ids = sids if alloc is None else list(dict.fromkeys(alloc.segment_of(s) for s in sids))
            yield mark, {"e": "copy", "t": t, "s": 0, "dir": direction, "bytes": nbytes,
                         "use": ids}
        elif kind == "sync":
            yield mark, {"e": "sync", "t": ev[1], "s": 0}


def summarise(rec, view):
    """The figures of one view: peak bytes live, and per step launches, allocations, buffers used
    (distinct ids in launches and copies), their size range, device time of the kernels."""
    live, peak = {}, 0
    live_bytes = 0
    steps = []
    cur = None
    for mark, ev in _lines(rec, view):
        if mark or cur is None:
            cur = {"launches": 0, "allocs": 0, "used": set(), "device_ns": 0}
            steps.append(cur)
        if ev is None:
            continue
        e = ev["e"]
        if e == "alloc":
            live[ev["id"]] = ev["bytes"]
            live_bytes += ev["bytes"]
            peak = max(peak, live_bytes)
            cur["allocs"] += 1
        elif e == "free":
            live_bytes -= live.pop(ev["id"])
        elif e in ("launch", "copy"):
            if e == "launch":
                cur["launches"] += 1
                cur["device_ns"] += ev["ns"]
            for i in ev["use"]:
                cur["used"].add((i, live[i]))
    out = {"view": view, "peak_bytes": peak, "steps": len(steps), "per_step": []}
    for s in steps:
        used = [b for _, b in s["used"]]
        out["per_step"].append({
            "launches": s["launches"], "allocs": s["allocs"], "buffers_used": len(used),
            "buffers_4mb": sum(1 for b in used if b >= 4 << 20),
            "min_bytes": min(used) if used else 0, "max_bytes": max(used) if used else 0,
            "device_ns": s["device_ns"]})
    return out


def write_trace(rec, path, view, device_name, device_mem, header_extra):
    """Writes the view as a trace of schema v1; the header's "recorder" object carries the
    figures of summarise() and "step_lines", the line numbers where each step begins (for tools
    that want per-step figures; the trace itself has no step markers)."""
    if view not in ("tensor", "segment"):
        raise ValueError(f"view must be tensor or segment, not {view!r}")
    body = []
    step_lines = []
    for mark, ev in _lines(rec, view):
        if mark:
            step_lines.append(len(body) + 2)  # line 1 is the header
        if ev is not None:
            body.append(json.dumps(ev, separators=(",", ":")))
    summary = summarise(rec, view)
    extra = dict(header_extra)
    extra["recorder"] = dict(extra.get("recorder", {}))
    extra["recorder"].update({"peak_bytes": summary["peak_bytes"], "steps": summary["steps"],
                              "step_lines": step_lines, "per_step": summary["per_step"]})
    header = {"hostoff_trace": 1, "device": {"name": device_name, "mem_bytes": device_mem},
              **extra}
    data = json.dumps(header, separators=(",", ":")) + "\n" + "\n".join(body) + "\n"
    if str(path).endswith(".gz"):
        import gzip

        # no name and a fixed time in the gzip header: the same bytes on every run
        with open(path, "wb") as raw, gzip.GzipFile(filename="", mode="wb", fileobj=raw,
                                                    mtime=0) as f:
            f.write(data.encode("utf-8"))
    else:
        with open(path, "w", encoding="utf-8") as f:
            f.write(data)
    return header
