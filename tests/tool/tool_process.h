// Running the built gdn binary (GDN_TOOL_BINARY, set by CMake) from a test, and reading back
// what it printed.
#pragma once

#include <sys/wait.h>

#include <cstdlib>
#include <fstream>
#include <sstream>
#include <string>

namespace gdn::tool::test {

struct ToolResult {
  int status;       // exit status (-1: did not exit normally)
  std::string out;  // stdout
  std::string err;  // stderr
};

inline std::string slurp(const std::string& file) {
  std::ifstream in(file, std::ios::binary);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

// Runs `gdn ARGS` (a shell command line), its output captured in files under `scratch_dir`.
inline ToolResult run_tool(const std::string& args, const std::string& scratch_dir) {
  const std::string out = scratch_dir + "/stdout.txt", err = scratch_dir + "/stderr.txt";
  const std::string command = std::string(GDN_TOOL_BINARY) + " " + args + " >" + out + " 2>" + err;
  const int raw = std::system(command.c_str());
  return {WIFEXITED(raw) ? WEXITSTATUS(raw) : -1, slurp(out), slurp(err)};
}

}  // namespace gdn::tool::test
