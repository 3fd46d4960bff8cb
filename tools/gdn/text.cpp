#include "text.h"

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <iomanip>
#include <ostream>
#include <sstream>

namespace gdn::tool {

std::string shape_string(const std::vector<int64_t>& shape) {
  std::string s = "[";
  for (size_t i = 0; i < shape.size(); ++i) s += (i ? ", " : "") + std::to_string(shape[i]);
  return s + "]";
}

std::string fixed(double x, int decimals) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.*f", decimals, x);
  return buf;
}

std::string scientific(double x) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.1e", x);
  return buf;
}

std::string si(double x) {
  const char* suffix[] = {"", "k", "M", "G", "T"};
  int i = 0;
  while (std::abs(x) >= 1000 && i < 4) {
    x /= 1000;
    ++i;
  }
  return fixed(x, std::abs(x) < 10 ? 2 : std::abs(x) < 100 ? 1 : 0) + suffix[i];
}

Table::Table(std::ostream& out, std::vector<Column> columns) : out_(out), columns_(std::move(columns)) {}

void Table::header() const {
  std::vector<std::string> titles;
  for (const Column& c : columns_) titles.push_back(c.title);
  row(titles);
}

void Table::row(const std::vector<std::string>& cells) const {
  std::ostringstream line;
  for (size_t i = 0; i < columns_.size(); ++i) {
    const int width = columns_[i].width;
    const std::string& cell = i < cells.size() ? cells[i] : std::string();
    if (i) line << "  ";
    if (width < 0)
      line << std::left << std::setw(-width) << cell;
    else
      line << std::right << std::setw(width) << cell;
  }
  std::string text = line.str();
  text.erase(text.find_last_not_of(' ') + 1);  // no trailing blanks
  out_ << text << std::endl;
}

}  // namespace gdn::tool
