// Harness command templates: argv elements with {case.NAME}, {param.NAME},
// {seed}, {out}, {project} (the top of the tree the arm runs from) and
// {gate_dir} placeholders (DESIGN.md, harness protocol), and build command
// templates with {src} and {build}.
#pragma once

#include <cstdint>
#include <set>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace densefeed {

struct TemplateValues {
  nlohmann::ordered_json case_values;  // object
  nlohmann::ordered_json params;       // object
  std::uint64_t seed = 0;
  std::string out;
  std::string src;    // build commands only: the revision's source folder
  std::string build;  // build commands only: its build folder
  std::string project;   // the top of the tree the arm runs from (arm_context.h)
  std::string gate_dir;  // the gate store's gates folder
};

// The placeholders ("case.T", "param.precision", "seed", "out") used by `argv`.
// Throws std::invalid_argument on an unterminated or unknown placeholder.
std::set<std::string> placeholders(const std::vector<std::string>& argv);

// Substitutes every placeholder. Throws std::invalid_argument naming a
// placeholder that `values` does not define.
std::vector<std::string> render_command(const std::vector<std::string>& argv, const TemplateValues& values);

}  // namespace densefeed
