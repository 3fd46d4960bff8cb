// gdn check: case strings, or the harness's built-in list, on one backend against the f64
// oracle; the relative L2 error of every output against SPEC.md's tolerance.
#include <fstream>
#include <iostream>
#include <random>
#include <stdexcept>

#include <nlohmann/json.hpp>

#include "commands.h"
#include "core/names.h"
#include "harness/harness.h"
#include "text.h"

namespace gdn::tool {
namespace {

using harness::Case;

// "-" for an output the case does not have.
std::string error_cell(double err, bool present) { return present ? scientific(err) : "-"; }

// `count` cases drawn from `seed` over the backend's spaces (cuda: recurrent and chunked in
// turn); each case's data seed is its draw, so its case string repeats it alone.
std::vector<Case> random_cases(gdn_backend backend, int count, uint64_t seed) {
  std::vector<harness::RandomCaseSpace> spaces{harness::random_case_space(backend, GDN_PATH_RECURRENT)};
  if (backend == GDN_BACKEND_CUDA) spaces.push_back(harness::random_case_space(backend, GDN_PATH_CHUNKED));
  std::vector<Case> cases;
  for (int i = 0; i < count; ++i) {
    Case c = harness::random_case(seed + uint64_t(i), spaces[size_t(i) % spaces.size()]);
    c.name = "random-" + std::to_string(i);
    c.seed = seed + uint64_t(i);
    cases.push_back(c);
  }
  return cases;
}

}  // namespace

int check_command(const CheckCommand& cmd) {
  std::vector<Case> cases;
  for (const std::string& text : cmd.cases) cases.push_back(harness::parse_case(text));
  if (cmd.random > 0) {
    if (!cases.empty()) throw std::runtime_error("--random: give case strings or --random, not both");
    const uint64_t seed = cmd.seed != 0 ? cmd.seed : std::random_device{}() | uint64_t(std::random_device{}()) << 32;
    if (!cmd.list)
      std::cout << "gdn check: " << cmd.random << " random case(s) from seed " << seed
                << " (--random " << cmd.random << " --seed " << seed << " draws them again)\n";
    cases = random_cases(cmd.backend, cmd.random, seed);
  }
  if (cases.empty()) cases = harness::builtin_cases();
  if (cmd.list) {
    for (const Case& c : cases) std::cout << harness::to_string(c) << "\n";
    return 0;
  }
  if (!gdn_backend_available(cmd.backend))
    throw std::runtime_error(std::string("backend ") + backend_name(cmd.backend) + ": not available here");

  std::cout << "gdn check: " << cases.size() << " case(s) on the " << backend_name(cmd.backend)
            << " backend against the f64 oracle (relative L2 error, tolerance in brackets)\n";
  const Table table(std::cout, {{"result", -6},
                                {"o", 7}, {"(tol)", 9},
                                {"state", 7}, {"(tol)", 9},
                                {"snapshots", 9},
                                {"ms", 8},
                                {"case", -1}});
  table.header();

  nlohmann::json results = nlohmann::json::array();
  int passed = 0, skipped = 0;  // skipped: configurations the backend does not support
  harness::RunOptions options;
  options.backend = cmd.backend;
  for (const Case& c : cases) {
    const harness::RunResult r = harness::run_case(c, options);
    const harness::Tolerance tol = harness::tolerance(c, cmd.backend, c.path);
    const bool ran = r.status == GDN_STATUS_SUCCESS;
    const bool pass = ran && r.errors.pass(tol);
    const bool skip = r.status == GDN_STATUS_UNSUPPORTED;
    passed += pass;
    skipped += skip;
    const bool has_state = c.final_state, has_snapshots = c.snapshots || c.snapshot_pool;
    table.row({pass ? "PASS" : skip ? "SKIP" : "FAIL",
               ran ? scientific(r.errors.o) : "-", "(" + scientific(tol.o) + ")",
               ran ? error_cell(r.errors.final_state, has_state) : "-", "(" + scientific(tol.state) + ")",
               ran ? error_cell(r.errors.snapshots, has_snapshots) : "-",
               fixed(r.ms, 2),
               harness::to_string(c)});
    const std::string problem = !ran ? gdn_status_string(r.status) + std::string(": ") + r.message
                                     : r.errors.detail;
    if (!pass && !problem.empty()) std::cout << "        " << problem << "\n";

    results.push_back({{"name", c.name},
                       {"case", harness::to_string(c)},
                       {"status", gdn_status_string(r.status)},
                       {"message", r.message},
                       {"rel_err_o", ran ? nlohmann::json(r.errors.o) : nlohmann::json()},
                       {"rel_err_state", ran && has_state ? nlohmann::json(r.errors.final_state) : nlohmann::json()},
                       {"rel_err_snapshots",
                        ran && has_snapshots ? nlohmann::json(r.errors.snapshots) : nlohmann::json()},
                       {"tol_o", tol.o},
                       {"tol_state", tol.state},
                       {"detail", r.errors.detail},
                       {"ms", r.ms},
                       {"pass", pass},
                       {"skipped", skip}});
  }
  const int failed = int(cases.size()) - passed - skipped;
  std::cout << passed << " passed, " << failed << " failed, " << skipped << " skipped\n";

  if (!cmd.json.empty()) {
    std::ofstream out(cmd.json);
    out << nlohmann::json{{"backend", backend_name(cmd.backend)},
                          {"version", gdn_version_string()},
                          {"passed", passed},
                          {"failed", failed},
                          {"skipped", skipped},
                          {"cases", results}}
               .dump(2)
        << "\n";
    if (!out) throw std::runtime_error(cmd.json + ": cannot write the results");
  }
  return failed == 0 ? 0 : 1;
}

}  // namespace gdn::tool
