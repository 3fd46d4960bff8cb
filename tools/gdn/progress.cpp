#include "progress.h"

#include <unistd.h>

#include <cstdio>

namespace gdn::tool {
namespace {

constexpr int kBarWidth = 24;

}  // namespace

ProgressBar::ProgressBar(int total) : total_(total), terminal_(::isatty(STDERR_FILENO) == 1) {}

ProgressBar::~ProgressBar() { clear(); }

void ProgressBar::start(const std::string& label) {
  const int done = started_++;
  if (!terminal_) return;
  const int filled = total_ > 0 ? done * kBarWidth / total_ : 0;
  std::string bar(size_t(filled), '#');
  bar.resize(kBarWidth, '-');
  std::fprintf(stderr, "\r\033[K[%s] %d/%d  %s", bar.c_str(), done, total_, label.c_str());
  std::fflush(stderr);
  drawn_ = true;
}

void ProgressBar::clear() {
  if (!drawn_) return;
  std::fprintf(stderr, "\r\033[K");
  std::fflush(stderr);
  drawn_ = false;
}

}  // namespace gdn::tool
