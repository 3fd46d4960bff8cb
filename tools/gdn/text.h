// The tool's text output: number formats and tables printed row by row with fixed columns.
#pragma once

#include <cstdint>
#include <iosfwd>
#include <string>
#include <vector>

namespace gdn::tool {

std::string shape_string(const std::vector<int64_t>& shape);  // "[2, 33, 4, 32]"
std::string fixed(double x, int decimals);                     // "12.35"
std::string scientific(double x);                              // "1.2e-03"
std::string si(double x);                                      // "3.41M", "912k", "17.0"

// A table whose rows are printed as they come, so a long run shows its progress.
class Table {
 public:
  struct Column {
    std::string title;
    int width;  // a negative width aligns left
  };
  Table(std::ostream& out, std::vector<Column> columns);
  void header() const;
  void row(const std::vector<std::string>& cells) const;

 private:
  std::ostream& out_;
  std::vector<Column> columns_;
};

}  // namespace gdn::tool
