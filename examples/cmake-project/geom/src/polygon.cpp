#include <algorithm>
#include <vector>

#include "geom/shape.hpp"

namespace geom {

double Polygon::area() const {
  double twice = 0;
  for (std::size_t i = 0, n = pts_.size(); i < n; ++i) twice += pts_[i].cross(pts_[(i + 1) % n]);
  return twice < 0 ? -twice / 2 : twice / 2;
}

double Polygon::perimeter() const {
  double sum = 0;
  for (std::size_t i = 0, n = pts_.size(); i < n; ++i) sum += distance(pts_[i], pts_[(i + 1) % n]);
  return sum;
}

Vec2d Polygon::centroid() const {
  Vec2d c;
  double twice = 0;
  for (std::size_t i = 0, n = pts_.size(); i < n; ++i) {
    double w = pts_[i].cross(pts_[(i + 1) % n]);
    c = c + (pts_[i] + pts_[(i + 1) % n]) * w;
    twice += w;
  }
  return twice == 0 ? Vec2d{} : c * (1 / (3 * twice));
}

bool Polygon::contains(Vec2d p) const {
  bool inside = false;
  for (std::size_t i = 0, n = pts_.size(), j = n - 1; i < n; j = i++) {
    const Vec2d &a = pts_[i], &b = pts_[j];
    if ((a.y > p.y) != (b.y > p.y) && p.x < (b.x - a.x) * (p.y - a.y) / (b.y - a.y) + a.x) inside = !inside;
  }
  return inside;
}

Polygon Polygon::dedup() const {
  Polygon out = *this;
  out.pts_.sort([](const Vec2d &a, const Vec2d &b) { return a < b; });
  Vec2d last{};
  bool first = true;
  out.pts_.erase_if([&](const Vec2d &p) {
    bool same = !first && p == last;
    first = false;
    last = p;
    return same;
  });
  return out;
}

// Andrew's monotone chain.
Polygon Polygon::convex_hull() const {
  std::vector<Vec2d> pts(pts_.begin(), pts_.end());
  std::sort(pts.begin(), pts.end());
  pts.erase(std::unique(pts.begin(), pts.end()), pts.end());
  if (pts.size() < 3) return Polygon(pts);
  std::vector<Vec2d> hull(2 * pts.size());
  std::size_t k = 0;
  for (const Vec2d &p : pts) {
    while (k >= 2 && orient(hull[k - 2], hull[k - 1], p) <= 0) --k;
    hull[k++] = p;
  }
  for (std::size_t i = pts.size() - 1, t = k + 1; i > 0; --i) {
    while (k >= t && orient(hull[k - 2], hull[k - 1], pts[i - 1]) <= 0) --k;
    hull[k++] = pts[i - 1];
  }
  hull.resize(k - 1);
  return Polygon(hull);
}

}  // namespace geom
