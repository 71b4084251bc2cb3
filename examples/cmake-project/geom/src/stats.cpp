#include "geom/stats.hpp"

#include <algorithm>
#include <sstream>

namespace geom {

Summary summarize(const std::vector<double> &values) {
  Summary s;
  s.count = values.size();
  if (values.empty()) return s;
  auto [lo, hi] = std::minmax_element(values.begin(), values.end());
  s.min = *lo;
  s.max = *hi;
  s.mean = mean(values.begin(), values.end());
  s.stddev = std::sqrt(variance(values.begin(), values.end()));
  s.median = median(values);
  return s;
}

std::string format_histogram(const std::vector<std::size_t> &counts, std::size_t width) {
  std::size_t top = counts.empty() ? 0 : *std::max_element(counts.begin(), counts.end());
  std::ostringstream out;
  for (std::size_t i = 0; i < counts.size(); ++i) {
    std::size_t bar = top ? counts[i] * width / top : 0;
    out << (i < 10 ? " " : "") << i << " |" << std::string(bar, '#') << ' ' << counts[i] << '\n';
  }
  return out.str();
}

}  // namespace geom
