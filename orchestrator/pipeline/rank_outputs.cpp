#include "rank_outputs.h"

#include <fstream>
#include <regex>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "npy_writer.h"
#include "tensor_file.h"

namespace densefeed {
namespace {

// The dtype descriptor ('<f8') of a .npy file's header and where its data
// starts (NumPy format versions 1.0 to 3.0: numpy/lib/format.py).
std::pair<std::string, std::size_t> npy_descr_and_offset(const std::filesystem::path& path) {
  std::ifstream in(path, std::ios::binary);
  char magic[8] = {};
  in.read(magic, 8);
  if (!in || std::string(magic, 6) != "\x93NUMPY") throw std::runtime_error(fmt::format("{}: not a .npy file", path.string()));
  std::size_t len = 0, head = 0;
  if (magic[6] == 1) {
    unsigned char b[2];
    in.read(reinterpret_cast<char*>(b), 2);
    len = b[0] | (b[1] << 8), head = 10;
  } else {
    unsigned char b[4];
    in.read(reinterpret_cast<char*>(b), 4);
    len = b[0] | (b[1] << 8) | (b[2] << 16) | (static_cast<std::size_t>(b[3]) << 24), head = 12;
  }
  std::string header(len, '\0');
  in.read(header.data(), static_cast<std::streamsize>(len));
  std::smatch m;
  if (!std::regex_search(header, m, std::regex(R"('descr'\s*:\s*'([^']+)')"))) {
    throw std::runtime_error(fmt::format("{}: a .npy header without a simple descr", path.string()));
  }
  return {m[1].str(), head + len};
}

}  // namespace

void concatenate_npy(const std::vector<std::filesystem::path>& files, std::size_t axis, const std::string& dtype,
                     const std::filesystem::path& out_file, const std::vector<std::size_t>& shard_lengths) {
  std::vector<TensorFile> parts;
  for (std::size_t k = 0; k < files.size(); ++k) {
    try {
      parts.push_back(TensorFile::open_npy(files[k], dtype));
    } catch (const std::exception& e) {
      throw RankFileError(k, e.what());
    }
    const TensorFile& t = parts.back();
    if (t.fortran_order()) throw RankFileError(k, fmt::format("{}: Fortran order; rank outputs are gathered in C order", files[k].string()));
    if (t.dtype() != dtype) throw RankFileError(k, fmt::format("{}: dtype {} but the gate declares {}", files[k].string(), t.dtype(), dtype));
    if (axis >= t.shape().size()) {
      throw RankFileError(k, fmt::format("{}: shape ({}) has no axis {} to gather the ranks along", files[k].string(),
                                           fmt::join(t.shape(), ", "), axis));
    }
    auto a = t.shape(), b = parts[0].shape();
    a[axis] = b[axis] = 0;
    if (a != b) {
      throw RankFileError(k, fmt::format("{}: shape ({}) does not match rank 0's ({}) outside axis {}", files[k].string(),
                                           fmt::join(t.shape(), ", "), fmt::join(parts[0].shape(), ", "), axis));
    }
    if (shard_lengths.empty() && t.shape()[axis] == 0) {
      throw RankFileError(k, fmt::format("{}: empty along axis {}: each rank writes a shard of its own", files[k].string(), axis));
    }
    if (k < shard_lengths.size() && t.shape()[axis] != shard_lengths[k]) {
      throw RankFileError(k, fmt::format("{}: {} along axis {} where rank {}'s part of the reference is {} long: each rank "
                                         "writes its own shard, not another's", files[k].string(), t.shape()[axis], axis, k,
                                         shard_lengths[k]));
    }
  }
  auto shape = parts[0].shape();
  shape[axis] = 0;
  for (const auto& t : parts) shape[axis] += t.shape()[axis];
  std::size_t outer = 1;
  for (std::size_t d = 0; d < axis; ++d) outer *= shape[d];
  std::vector<std::string> data;
  std::vector<std::size_t> block;  // bytes of one outer index's slab, per rank
  std::string descr;
  for (std::size_t k = 0; k < files.size(); ++k) {
    std::pair<std::string, std::size_t> at;
    try {
      at = npy_descr_and_offset(files[k]);
    } catch (const std::exception& e) {
      throw RankFileError(k, e.what());
    }
    const auto& [d, offset] = at;
    if (k == 0) descr = d;
    if (d != descr) {
      throw RankFileError(k, fmt::format("{}: stored as '{}' where rank 0's is '{}'; the ranks' files must agree", files[k].string(), d, descr));
    }
    std::ifstream in(files[k], std::ios::binary);
    in.seekg(static_cast<std::streamoff>(offset));
    std::string bytes(parts[k].size() * parts[k].element_bytes(), '\0');
    in.read(bytes.data(), static_cast<std::streamsize>(bytes.size()));
    if (!in) throw RankFileError(k, fmt::format("{}: truncated data", files[k].string()));
    block.push_back(outer ? bytes.size() / outer : 0);
    data.push_back(std::move(bytes));
  }
  const std::string header = npy_header(descr, shape);
  std::ofstream out(out_file, std::ios::binary | std::ios::trunc);
  out << header;
  for (std::size_t o = 0; o < outer; ++o) {
    for (std::size_t k = 0; k < data.size(); ++k) out.write(data[k].data() + o * block[k], static_cast<std::streamsize>(block[k]));
  }
  if (!out) throw std::runtime_error(fmt::format("{}: cannot write the gathered output", out_file.string()));
}

std::vector<OutputResult> compare_rank_outputs(const std::vector<OutputSpec>& outputs, const nlohmann::ordered_json& case_values,
                                               const std::filesystem::path& ref_out, const std::filesystem::path& cand_out,
                                               int ranks, const std::filesystem::path& gathered) {
  std::vector<OutputResult> results;
  const auto red = [&](const OutputSpec& out, FailureKind kind, int rank, const std::string& what) {
    OutputResult o;
    o.output = out.name;
    o.comparison.verdict = Verdict::red;
    o.comparison.reason = fmt::format("candidate output (rank {} of {}): {}", rank, ranks, what);
    o.failure = Failure{kind, FailureWho::candidate, {}, {}, out.name, "", what, rank};
    return o;
  };
  std::vector<std::filesystem::path> dirs;
  for (int k = 0; k < ranks; ++k) {
    const auto dir = cand_out / fmt::format("rank-{}", k);
    std::error_code ec;
    const auto type = std::filesystem::symlink_status(dir, ec).type();
    if (type != std::filesystem::file_type::directory) {
      const std::string what = fmt::format("{}: {}; with rank_outputs: per_rank every rank writes its outputs into out/rank-K",
                                           dir.string(), type == std::filesystem::file_type::not_found ? "missing" : "not a folder");
      for (const auto& out : outputs) results.push_back(red(out, FailureKind::missing_output, k, what));
      return results;
    }
    dirs.push_back(dir);
  }
  std::error_code ec;
  std::filesystem::remove_all(gathered, ec);
  std::filesystem::create_directories(gathered, ec);
  for (const auto& out : outputs) {
    if (out.partition_axis) {
      std::vector<std::filesystem::path> files;
      bool missing = false;
      for (int k = 0; k < ranks && !missing; ++k) {
        files.push_back(dirs[static_cast<std::size_t>(k)] / (out.name + ".npy"));
        const auto type = std::filesystem::symlink_status(files.back(), ec).type();
        if (type != std::filesystem::file_type::regular) {
          results.push_back(red(out, type == std::filesystem::file_type::not_found ? FailureKind::missing_output : FailureKind::malformed_output, k,
                                fmt::format("{}: {}", files.back().string(),
                                            type == std::filesystem::file_type::not_found ? "missing: the rank exited 0 without writing it"
                                                                                           : "not a regular file the rank wrote")));
          missing = true;
        }
      }
      if (missing) continue;
      // Each rank's length along the axis: its part of the reference's when
      // the gate cuts the axis into one part per rank, else anything but 0.
      std::vector<std::size_t> lengths;
      std::size_t parts = 0;
      try {
        parts = partition_parts(out, case_values);
      } catch (const std::exception&) {
        parts = 0;  // compare_output reports a parts value that renders to no number
      }
      try {
        const auto ref = TensorFile::open_npy(ref_out / (out.name + ".npy"), out.reference_dtype);
        const auto axis = *out.partition_axis;
        if (axis < ref.shape().size() && parts == static_cast<std::size_t>(ranks)) {
          const std::size_t len = ref.shape()[axis], r = static_cast<std::size_t>(ranks);
          for (std::size_t k = 0; k < r; ++k) lengths.push_back((((k + 1) * len + r - 1) / r) - ((k * len + r - 1) / r));
        }
      } catch (const std::exception&) {
        // An unreadable reference is compare_output's to report.
      }
      try {
        concatenate_npy(files, *out.partition_axis, out.dtype, gathered / (out.name + ".npy"), lengths);
      } catch (const RankFileError& e) {
        results.push_back(red(out, FailureKind::malformed_output, static_cast<int>(e.rank), e.what()));
        continue;
      } catch (const std::exception& e) {
        results.push_back(red(out, FailureKind::malformed_output, 0, e.what()));
        continue;
      }
      results.push_back(compare_output(out, case_values, ref_out, gathered));
      continue;
    }
    // Replicated: every rank's copy against the whole reference.
    OutputResult first;
    for (int k = 0; k < ranks; ++k) {
      OutputResult o = compare_output(out, case_values, ref_out, dirs[static_cast<std::size_t>(k)]);
      if (k == 0) first = o;
      if (o.comparison.verdict != Verdict::green) {
        if (o.failure.who == FailureWho::candidate) o.failure.rank = k;
        o.comparison.reason = fmt::format("rank {} of {}: {}", k, ranks, o.comparison.reason);
        first = std::move(o);
        break;
      }
    }
    results.push_back(std::move(first));
  }
  return results;
}

}  // namespace densefeed
