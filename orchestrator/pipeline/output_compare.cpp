#include "output_compare.h"

#include <optional>
#include <stdexcept>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "command_template.h"
#include "tensor_file.h"
#include "wrong_candidates.h"

namespace densefeed {
namespace {

// NAME.npy, or tensor NAME of the single .safetensors file in `dir`.
TensorFile open_output(const std::filesystem::path& dir, const OutputSpec& out, const std::string& declared_dtype,
                       bool candidate) {
  // A link could point at the reference's own output, loop, or name a FIFO:
  // none is followed.
  const auto refuse_link = [candidate](const std::filesystem::path& p) {
    std::error_code ec;
    const auto type = std::filesystem::symlink_status(p, ec).type();
    if (type == std::filesystem::file_type::symlink) {
      throw std::runtime_error(fmt::format("{}: a symbolic link; outputs must be files the harness wrote", p.string()));
    }
    if (type != std::filesystem::file_type::regular && type != std::filesystem::file_type::not_found) {
      throw std::runtime_error(fmt::format("{}: not a regular file{}; outputs must be files the harness wrote", p.string(),
                                           ec ? " (" + ec.message() + ")" : ""));
    }
    // A hard link shares its bytes with another name: the harness wrote
    // nothing of its own (a fresh file has one link).
    // (A reference's file with two names is a candidate's doing: its side says so.)
    if (const auto links = std::filesystem::hard_link_count(p, ec); candidate && !ec && links > 1) {
      throw std::runtime_error(fmt::format("{}: a hard link ({} names share these bytes); outputs must be files the harness wrote",
                                           p.string(), links));
    }
  };
  // The folder itself replaced by a link to another (the reference's).
  std::error_code ec;
  if (std::filesystem::is_symlink(std::filesystem::symlink_status(dir, ec))) {
    throw std::runtime_error(fmt::format("{}: the output folder was replaced by a symbolic link", dir.string()));
  }
  const auto npy = dir / (out.name + ".npy");
  refuse_link(npy);
  if (std::filesystem::exists(std::filesystem::symlink_status(npy, ec))) return TensorFile::open_npy(npy, declared_dtype);
  std::vector<std::filesystem::path> safetensors;
  for (const auto& e : std::filesystem::directory_iterator(dir, ec)) {
    if (e.path().extension() == ".safetensors") safetensors.push_back(e.path());
  }
  if (safetensors.size() == 1) {
    refuse_link(safetensors[0]);
    return TensorFile::open_safetensors(safetensors[0], out.name);
  }
  throw std::runtime_error(fmt::format("{}: missing: the harness exited 0 without writing {}.npy or one .safetensors file{}",
                                       npy.string(), out.name,
                                       safetensors.size() > 1 ? fmt::format(" (found {})", safetensors.size()) : ""));
}

// Checks a tensor's dtype and shape against the gate; returns what is wrong.
std::string check_declared(const TensorFile& t, const std::string& dtype, const OutputSpec& out,
                           const nlohmann::ordered_json& case_values) {
  if (t.dtype() != dtype) {
    return fmt::format("{}: dtype {} but the gate declares {}", t.path().string(), t.dtype(), dtype);
  }
  if (out.shape.empty()) return "";
  const auto rule = render_command(out.shape, {case_values, nlohmann::ordered_json::object(), 0, ""});
  bool ok = rule.size() == t.shape().size();
  for (std::size_t d = 0; ok && d < rule.size(); ++d) ok = rule[d] == "*" || rule[d] == std::to_string(t.shape()[d]);
  if (ok) return "";
  return fmt::format("{}: shape {} but the gate declares [{}]", t.path().string(), shape_text(t.shape()), fmt::join(rule, ", "));
}


}  // namespace

OutputResult compare_output(const OutputSpec& out, const nlohmann::ordered_json& case_values,
                            const std::filesystem::path& ref_dir, const std::filesystem::path& cand_dir) {
  OutputResult o;
  o.output = out.name;
  // The reference's defects are errors, the candidate's are red.
  const auto open_checked = [&](const std::filesystem::path& dir, const std::string& dtype, Verdict on_failure,
                                const char* who) -> std::optional<TensorFile> {
    std::string what;  // dtype | shape when the file opened but is not what the gate declares
    try {
      TensorFile t = open_output(dir, out, dtype, on_failure == Verdict::red);
      if (auto problem = check_declared(t, dtype, out, case_values); !problem.empty()) {
        what = t.dtype() != dtype ? "dtype" : "shape";
        throw std::runtime_error(problem);
      }
      return t;
    } catch (const std::runtime_error& e) {
      o.comparison.verdict = on_failure;
      o.comparison.reason = fmt::format("{} output: {}", who, e.what());
      // Nothing here follows a link (it may loop): a link is something written, wrongly.
      std::error_code ec;
      bool any = std::filesystem::is_symlink(std::filesystem::symlink_status(dir, ec)) ||
                 std::filesystem::exists(std::filesystem::symlink_status(dir / (out.name + ".npy"), ec));
      for (const auto& f : std::filesystem::directory_iterator(dir, ec)) any = any || f.path().extension() == ".safetensors";
      o.failure.kind = any ? FailureKind::malformed_output : FailureKind::missing_output;
      o.failure.who = on_failure == Verdict::error ? FailureWho::reference : FailureWho::candidate;
      o.failure.output = out.name;
      o.failure.metric = what;
      return std::nullopt;
    }
  };
  const auto r = open_checked(ref_dir, out.reference_dtype, Verdict::error, "reference");
  if (!r) return o;
  CompareOptions options;
  options.candidate_dtype = out.dtype;
  if (out.partition_axis) {
    options.partition = Partition{*out.partition_axis, partition_parts(out, case_values)};
  }
  // Judged whatever the candidate wrote: whether the case could fail at all
  // is a property of the gate and this reference, not of the candidate.
  try {
    o.passing_wrong_candidates = wrong_candidates_passing(*r, out.tolerance, options);
  } catch (const std::runtime_error&) {
    // An unreadable reference is the comparison's to report, below.
  }
  const auto x = open_checked(cand_dir, out.dtype, Verdict::red, "candidate");
  if (!x) return o;
  o.comparison = compare_tensor_files(*r, *x, out.tolerance, options);
  if (o.comparison.verdict != Verdict::green) {
    o.failure.output = out.name;
    if (o.comparison.reference_nonfinite > 0) {
      o.failure.kind = FailureKind::malformed_output, o.failure.who = FailureWho::reference, o.failure.metric = "nonfinite";
    } else if (o.comparison.candidate_nonfinite > 0 || o.comparison.checks.empty()) {
      o.failure.kind = FailureKind::malformed_output, o.failure.who = FailureWho::candidate;
      o.failure.metric = o.comparison.candidate_nonfinite > 0 ? "nonfinite" : "shape";
    } else {
      o.failure.kind = FailureKind::tolerance, o.failure.who = FailureWho::candidate;
      o.failure.metric = "slice";  // every metric passed over the whole output; a partition slice did not
      for (const auto& m : o.comparison.checks) {
        if (!m.passed) {
          o.failure.metric = m.metric;
          break;
        }
      }
    }
  }
  return o;
}

}  // namespace densefeed
