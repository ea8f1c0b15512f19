// Chrome Trace Event Format files, as PyTorch's profiler (Kineto), Perfetto
// and Chrome write them (spec: "Trace Event Format", Google, 2016): the array
// form `[ev, ev, ...` (closing bracket optional) and the object form
// `{"traceEvents": [...], "displayTimeUnit": ..., "distributedInfo": {...}}`,
// plain or gzip-compressed (detected by content, not by name).
//
// The reader is a streaming scanner of our own, not a JSON library: real traces
// are large (GBs), lack the closing bracket, carry trailing commas and raw
// control characters in strings, which a strict parser refuses. Memory holds
// one read buffer (4 MiB, grown only for a single larger event) plus what the
// timeline keeps per slice.
//
// Phases: X (complete), B/E (begin/end, paired per thread in time order),
// b/e and S/F (async, paired by category and id), i/I/R/n/T (instants,
// counted), C (counters, counted), M (process_name, process_labels,
// thread_name), s/t/f (flows, counted). ts and dur are microseconds, numbers
// or numeric strings, converted exactly to ns (trace_time.h); displayTimeUnit
// is recorded and never scales them.
//
// Lanes: an event is GPU activity when its category is kernel, gpu_memcpy or
// gpu_memset (Kineto), or it has args.stream and a category that is not a
// host one (cuda_runtime, cuda_driver, cpu_op, python_function, ...); its lane
// is (pid, tid) with device = args.device (else pid) and stream = args.stream
// (else the number in tid). Categories containing "annotation" go to
// annotation lanes; everything else to the CPU lane (pid, tid).
#pragma once

#include <filesystem>
#include <optional>

#include "trace_timeline.h"

namespace densefeed {

// Reads one file into `builder` as a new file entry. rank: the rank to use
// when the file has no distributedInfo.rank (none: 0). Throws InputError
// naming the file, the event index and the byte offset (of the uncompressed
// text) for what cannot be repaired: not JSON at the top, a malformed or
// truncated event, a ts/dur that is not a number. Throws InputError when the
// file cannot be opened.
void read_chrome_trace(const std::filesystem::path& path, TimelineBuilder& builder, std::optional<std::int64_t> rank);

}  // namespace densefeed
