// Shapes behind one interface, and the polygon they are measured as.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "geom/small_vector.hpp"
#include "geom/vec.hpp"

namespace geom {

class Polygon {
 public:
  Polygon() = default;
  explicit Polygon(const std::vector<Vec2d> &points) { pts_.append(points.begin(), points.end()); }

  void add(Vec2d p) { pts_.push_back(p); }
  std::size_t size() const { return pts_.size(); }
  const Vec2d &operator[](std::size_t i) const { return pts_[i]; }

  double area() const;
  double perimeter() const;
  Vec2d centroid() const;
  bool contains(Vec2d p) const;
  Polygon convex_hull() const;
  Polygon dedup() const;  // without repeated points

 private:
  SmallVec<Vec2d, 8> pts_;
};

class Shape {
 public:
  virtual ~Shape();
  virtual std::string name() const = 0;
  virtual double area() const = 0;
  virtual double perimeter() const = 0;
  virtual Polygon outline(int segments) const = 0;
};

std::unique_ptr<Shape> make_circle(Vec2d center, double radius);
std::unique_ptr<Shape> make_rect(Vec2d corner, double width, double height);
std::unique_ptr<Shape> make_polygon(const std::vector<Vec2d> &points);

// Parses "circle X Y R", "rect X Y W H" or "poly X1 Y1 X2 Y2 ..." (nullptr if malformed).
std::unique_ptr<Shape> parse_shape(const std::string &line);

using Shapes = std::vector<std::unique_ptr<Shape>>;

// A text report of the shapes: one line each, then statistics and a histogram of their areas.
std::string report(const Shapes &shapes);
unsigned report_checksum(const std::string &text);

}  // namespace geom
