// Two-dimensional vectors: everything inline (templates), so every object
// that uses one carries its own linkonce_odr copy.
#pragma once

#include <cmath>

namespace geom {

template <class T>
struct Vec2 {
  T x{}, y{};

  Vec2 operator+(const Vec2 &o) const { return {x + o.x, y + o.y}; }
  Vec2 operator-(const Vec2 &o) const { return {x - o.x, y - o.y}; }
  Vec2 operator*(T s) const { return {x * s, y * s}; }
  bool operator==(const Vec2 &o) const { return x == o.x && y == o.y; }
  bool operator<(const Vec2 &o) const { return x < o.x || (x == o.x && y < o.y); }
  T dot(const Vec2 &o) const { return x * o.x + y * o.y; }
  T cross(const Vec2 &o) const { return x * o.y - y * o.x; }
};

using Vec2d = Vec2<double>;

template <class T>
T length(const Vec2<T> &v) {
  return std::sqrt(v.dot(v));
}

template <class T>
T distance(const Vec2<T> &a, const Vec2<T> &b) {
  return length(a - b);
}

// Twice the signed area of the triangle a, b, c (> 0: counter-clockwise).
template <class T>
T orient(const Vec2<T> &a, const Vec2<T> &b, const Vec2<T> &c) {
  return (b - a).cross(c - a);
}

}  // namespace geom
