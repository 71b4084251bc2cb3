// Summary statistics: function templates, instantiated where they are used.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <iterator>
#include <string>
#include <vector>

namespace geom {

template <class It>
double mean(It first, It last) {
  double sum = 0;
  std::size_t n = 0;
  for (; first != last; ++first, ++n) sum += *first;
  return n ? sum / n : 0.0;
}

template <class It>
double variance(It first, It last) {
  double m = mean(first, last), sum = 0;
  std::size_t n = 0;
  for (; first != last; ++first, ++n) sum += (*first - m) * (*first - m);
  return n > 1 ? sum / (n - 1) : 0.0;
}

template <class T>
T median(std::vector<T> v) {
  if (v.empty()) return T{};
  auto mid = v.begin() + v.size() / 2;
  std::nth_element(v.begin(), mid, v.end());
  if (v.size() % 2) return *mid;
  T hi = *mid;
  T lo = *std::max_element(v.begin(), mid);
  return (lo + hi) / 2;
}

template <class T>
std::vector<std::size_t> histogram(const std::vector<T> &v, T lo, T hi, std::size_t bins) {
  std::vector<std::size_t> counts(bins);
  if (bins == 0 || !(hi > lo)) return counts;
  for (const T &x : v) {
    double at = (static_cast<double>(x) - lo) / (hi - lo) * bins;
    std::size_t b = at < 0 ? 0 : static_cast<std::size_t>(at);
    counts[std::min(b, bins - 1)]++;
  }
  return counts;
}

struct Summary {
  std::size_t count = 0;
  double min = 0, max = 0, mean = 0, stddev = 0, median = 0;
};

Summary summarize(const std::vector<double> &values);
std::string format_histogram(const std::vector<std::size_t> &counts, std::size_t width);

}  // namespace geom
