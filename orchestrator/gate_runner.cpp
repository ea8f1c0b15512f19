#include "gate_runner.h"

#include <atomic>
#include <chrono>
#include <functional>
#include <map>
#include <thread>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "arm_context.h"
#include "command_template.h"
#include "error.h"
#include "process_runner.h"
#include "tensor_file.h"

namespace densefeed {
namespace {

struct Job {
  std::vector<std::string> argv;
  const ArmContext* arm = nullptr;
  nlohmann::ordered_json case_json;
  std::filesystem::path dir;
  bool sandboxed = false;  // a candidate command while the sandbox is on
  std::string gpu;         // the CUDA_VISIBLE_DEVICES it ran with ('' = unchanged)
  ProcessResult result;
};

void fresh_dir(const std::filesystem::path& dir) {
  std::error_code ec;
  std::filesystem::remove_all(dir, ec);
  std::filesystem::create_directories(dir / "out", ec);
  if (ec) throw InfraError(fmt::format("{}: cannot create the run folder: {}", dir.string(), ec.message()));
}

void run_job(Job& job, const GateSpec& gate, std::uint64_t seed, const GateRunOptions& options, const std::string& gpu) {
  ProcessSpec spec;
  spec.argv = job.argv;
  spec.exe_dirs = job.arm->exe_dirs;
  spec.env = job.arm->env;
  spec.env["DENSEFEED_MODE"] = "gate";
  spec.env["DENSEFEED_CASE"] = job.case_json.dump();
  spec.env["DENSEFEED_SEED"] = std::to_string(seed);
  spec.env["DENSEFEED_OUT"] = (job.dir / "out").string();
  if (!gpu.empty()) spec.env["CUDA_VISIBLE_DEVICES"] = gpu;
  job.gpu = gpu;
  spec.cwd = job.dir;
  spec.stdout_path = job.dir / "stdout.log";
  spec.stderr_path = job.dir / "stderr.log";
  spec.timeout = std::chrono::milliseconds(static_cast<long long>(gate.timeout_s * 1000));
  if (job.sandboxed) {
    auto readable = options.sandbox_readable;
    readable.insert(readable.end(), job.arm->readable.begin(), job.arm->readable.end());
    spec.launcher = sandbox_argv(harness_policy(job.dir, resolve_executable(job.argv[0], job.arm->exe_dirs),
                                                options.private_dir.empty() ? options.work_dir : options.private_dir,
                                                readable));
  }
  job.result = run_process(spec);
}

// Runs `jobs` on `n` threads (one per GPU when there are GPUs); each job is
// independent.
void run_all(std::vector<Job*>& jobs, int n, const GateSpec& gate, std::uint64_t seed, const GateRunOptions& options) {
  std::atomic<std::size_t> next{0};
  std::vector<std::thread> threads;
  std::exception_ptr failure;
  std::mutex failure_mutex;
  const int threads_wanted = options.gpus.empty() ? std::max(1, n) : static_cast<int>(options.gpus.size());
  for (int t = 0; t < threads_wanted; ++t) {
    const std::string gpu = options.gpus.empty() ? "" : options.gpus[static_cast<std::size_t>(t)];
    threads.emplace_back([&, gpu] {
      for (std::size_t i = next++; i < jobs.size(); i = next++) {
        try {
          run_job(*jobs[i], gate, seed, options, gpu);
        } catch (...) {
          std::lock_guard lock(failure_mutex);
          failure = std::current_exception();
        }
      }
    });
  }
  for (auto& t : threads) t.join();
  if (failure) std::rethrow_exception(failure);
}

// "the candidate was killed by signal 11 (SIGSEGV); last stderr line: ...".
// The reason stays one line (the ledger lists it per case); the last lines
// themselves go with the case (log_tail) into the report.
std::string process_failure(const char* who, const Job& job, const LogTail& tail) {
  std::string reason = fmt::format("{} {}", who, job.result.describe());
  if (!tail.text.empty()) {
    std::string last = tail.text.substr(tail.text.rfind('\n') == std::string::npos ? 0 : tail.text.rfind('\n') + 1);
    if (last.size() > 200) last = last.substr(0, 200) + "...";
    // Harness output is untrusted: control characters are escaped so that
    // it cannot fake or hide lines where the reason is printed.
    std::string shown;
    for (unsigned char ch : last) shown += ch < 0x20 || ch == 0x7F ? fmt::format("\\x{:02x}", ch) : std::string(1, static_cast<char>(ch));
    last = shown;
    reason += fmt::format("; last {} line: {}", tail.stream, last);
  }
  return reason;
}

// NAME.npy, or tensor NAME of the single .safetensors file in `dir`.
TensorFile open_output(const std::filesystem::path& dir, const OutputSpec& out, const std::string& declared_dtype) {
  // A link could point at the reference's own output.
  const auto refuse_link = [](const std::filesystem::path& p) {
    if (std::filesystem::is_symlink(p)) {
      throw std::runtime_error(fmt::format("{}: a symbolic link; outputs must be files the harness wrote", p.string()));
    }
  };
  const auto npy = dir / (out.name + ".npy");
  refuse_link(npy);
  if (std::filesystem::exists(npy)) return TensorFile::open_npy(npy, declared_dtype);
  std::vector<std::filesystem::path> safetensors;
  std::error_code ec;
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
    try {
      TensorFile t = open_output(dir, out, dtype);
      if (auto problem = check_declared(t, dtype, out, case_values); !problem.empty()) throw std::runtime_error(problem);
      return t;
    } catch (const std::runtime_error& e) {
      o.comparison.verdict = on_failure;
      o.comparison.reason = fmt::format("{} output: {}", who, e.what());
      return std::nullopt;
    }
  };
  const auto r = open_checked(ref_dir, out.reference_dtype, Verdict::error, "reference");
  if (!r) return o;
  const auto x = open_checked(cand_dir, out.dtype, Verdict::red, "candidate");
  if (!x) return o;
  CompareOptions options;
  options.candidate_dtype = out.dtype;
  if (out.partition_axis) {
    std::size_t parts = 0;
    if (!out.partition_parts.empty()) {
      parts = std::stoul(render_command({out.partition_parts}, {case_values, nlohmann::ordered_json::object(), 0, ""})[0]);
    }
    options.partition = Partition{*out.partition_axis, parts};
  }
  o.comparison = compare_tensor_files(*r, *x, out.tolerance, options);
  return o;
}

GateResult run_gate(const GateSpec& gate, const std::vector<Case>& cases,
                    const nlohmann::ordered_json& candidate_params, const GateRunOptions& options) {
  const auto start = std::chrono::steady_clock::now();
  GateResult gate_result;
  gate_result.sandbox = sandbox_status(options.sandbox);
  const auto ref_names = placeholders(gate.reference_command);

  std::map<std::vector<std::string>, std::size_t> reference_index;  // argv (with {out} unrendered) -> job
  std::vector<Job> references;
  std::vector<Job> candidates(cases.size());
  std::vector<std::size_t> case_reference(cases.size());
  references.reserve(cases.size());

  for (std::size_t i = 0; i < cases.size(); ++i) {
    const Case& c = cases[i];
    // The reference sees only the case parameters its command uses: its
    // identity is its command.
    nlohmann::ordered_json ref_case = nlohmann::ordered_json::object();
    for (const auto& [k, v] : c.values.items()) {
      if (ref_names.count("case." + k)) ref_case[k] = v;
    }
    // Rendered as it runs ({project}, {gate_dir}, python3 included), with the
    // output folder left as a placeholder: cases that differ only in what the
    // reference ignores share one reference process.
    TemplateValues key_values{c.values, nlohmann::ordered_json::object(), options.seed, "{out}"};
    auto key = arm_command(gate.reference_command, key_values, options.reference);
    auto [it, inserted] = reference_index.try_emplace(key, references.size());
    if (inserted) {
      Job ref;
      ref.dir = options.work_dir / fmt::format("reference-{:03}", references.size());
      ref.argv = arm_command(gate.reference_command,
                             {c.values, nlohmann::ordered_json::object(), options.seed, (ref.dir / "out").string()},
                             options.reference);
      ref.arm = &options.reference;
      ref.case_json = ref_case;
      references.push_back(std::move(ref));
    }
    case_reference[i] = it->second;

    Job& cand = candidates[i];
    cand.dir = options.work_dir / fmt::format("candidate-{:03}", i);
    cand.argv = arm_command(gate.candidate_command, {c.values, candidate_params, options.seed, (cand.dir / "out").string()},
                            options.candidate);
    cand.case_json = c.values;
    cand.arm = &options.candidate;
    cand.sandboxed = gate_result.sandbox.on();
  }

  std::vector<Job*> jobs;
  for (auto& r : references) jobs.push_back(&r);
  for (auto& c : candidates) jobs.push_back(&c);
  // Empty every output folder first: a stale file from an earlier run can
  // never be compared.
  for (auto* j : jobs) fresh_dir(j->dir);
  run_all(jobs, options.jobs, gate, options.seed, options);

  std::vector<bool> reference_counted(references.size(), false);
  for (std::size_t i = 0; i < cases.size(); ++i) {
    CaseResult cr;
    cr.gate_case = cases[i];
    const Job& ref = references[case_reference[i]];
    const Job& cand = candidates[i];
    if (!reference_counted[case_reference[i]]) {
      cr.reference_wall_s = ref.result.wall_s;
      reference_counted[case_reference[i]] = true;
      gate_result.harness_wall_s += ref.result.wall_s;
    }
    cr.candidate_wall_s = cand.result.wall_s;
    cr.reference_out = ref.dir / "out";
    cr.reference_process = ref.result;
    cr.candidate_process = cand.result;
    cr.candidate_gpu = cand.gpu;
    gate_result.harness_wall_s += cand.result.wall_s;

    const auto fail = [&](Verdict v, const char* who, const Job& job) {
      const LogTail tail = log_tail(job.dir / "stdout.log", job.dir / "stderr.log");
      cr.verdict = v;
      cr.reason = process_failure(who, job, tail);
      cr.log_tail = tail.text;
      cr.log_tail_stream = tail.stream;
    };
    if (!ref.result.ok()) {
      fail(Verdict::error, "the reference", ref);
    } else if (!cand.result.ok()) {
      fail(Verdict::red, "the candidate", cand);
    } else {
      for (const auto& out : gate.outputs) {
        cr.outputs.push_back(compare_output(out, cr.gate_case.values, ref.dir / "out", cand.dir / "out"));
      }
      for (const auto& o : cr.outputs) {
        if (o.comparison.verdict == Verdict::green) continue;
        cr.verdict = worst(cr.verdict, o.comparison.verdict);
        cr.reason += fmt::format("{}{}: {}", cr.reason.empty() ? "" : "; ", o.output, o.comparison.reason);
      }
    }
    gate_result.verdict = worst(gate_result.verdict, cr.verdict);
    gate_result.cases.push_back(std::move(cr));
  }
  std::size_t failing = 0;
  for (const auto& c : gate_result.cases) failing += c.verdict != Verdict::green;
  if (failing > 0) {
    gate_result.reason = fmt::format("{} of {} case(s) not green", failing, gate_result.cases.size());
  }
  gate_result.wall_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  return gate_result;
}

}  // namespace densefeed
