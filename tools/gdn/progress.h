// A one-line progress bar on stderr for long runs, drawn only when stderr is a terminal (logs
// and pipes stay clean):   [########------------]  7/19  decode-B64-kv
#pragma once

#include <string>

namespace gdn::tool {

class ProgressBar {
 public:
  explicit ProgressBar(int total);
  ~ProgressBar();  // clears the line
  ProgressBar(const ProgressBar&) = delete;
  ProgressBar& operator=(const ProgressBar&) = delete;

  // Shows that item `label` is running, after the ones started before it finished.
  void start(const std::string& label);
  // Clears the bar so that a line can be printed; the next start() draws it again.
  void clear();

 private:
  int total_;
  int started_ = 0;
  bool drawn_ = false;
  bool terminal_;
};

}  // namespace gdn::tool
