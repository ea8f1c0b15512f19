// The outputs of a multi-rank case whose gate says rank_outputs: per_rank
// (issue 20): rank K wrote out/rank-K/NAME.npy. How they meet a
// single-process reference:
//   - an output with a partition axis (outputs.NAME.partition.axis): the
//     ranks' tensors concatenated along that axis in rank order (rank 0
//     first), as a sequence sharded across context-parallel ranks is put
//     back together, then compared as one output (compare_output). Each
//     rank's shard must be its own: when the gate cuts the axis into one
//     part per rank (partition.parts renders to the rank count), rank K's
//     length along it is part K's of the reference's (positions p with
//     floor(p R / L) == K, as the slices are cut), else no shard is empty,
//     so that one rank cannot write what another should have computed;
//   - an output without one is replicated (every rank holds all of it, e.g.
//     a final state all ranks gathered): each rank's copy is compared with
//     the whole reference output, and the first rank that fails names it.
#pragma once

#include <filesystem>
#include <stdexcept>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "output_compare.h"
#include "gate_spec.h"

namespace densefeed {

// A rank's file that cannot be gathered: which rank (index into the files)
// and, in what(), the file and what was wrong.
struct RankFileError : std::runtime_error {
  RankFileError(std::size_t r, const std::string& what) : std::runtime_error(what), rank(r) {}
  std::size_t rank;
};

// Concatenates rank_dirs[K]/NAME.npy (K = 0..) along `axis` into
// out_file (a .npy of the same dtype, C order). The files must be .npy,
// C order, of `dtype`, equal in every dimension but `axis`; with
// `shard_lengths` (one per file) each file's length along `axis` must be
// its entry, without them none may be 0. Throws RankFileError naming the rank's file and what was wrong.
void concatenate_npy(const std::vector<std::filesystem::path>& files, std::size_t axis, const std::string& dtype,
                     const std::filesystem::path& out_file, const std::vector<std::size_t>& shard_lengths = {});

// One OutputResult per output of `outputs` (their order), for a candidate
// of `ranks` ranks with per-rank folders under cand_out: a rank folder that
// is missing (or a link) makes every output red (missing_output, naming the
// rank); `gathered` is where concatenated outputs are written (emptied
// first).
std::vector<OutputResult> compare_rank_outputs(const std::vector<OutputSpec>& outputs, const nlohmann::ordered_json& case_values,
                                               const std::filesystem::path& ref_out, const std::filesystem::path& cand_out,
                                               int ranks, const std::filesystem::path& gathered);

}  // namespace densefeed
