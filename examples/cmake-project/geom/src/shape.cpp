#include <cmath>
#include <sstream>

#include "geom/shape.hpp"

namespace geom {

Shape::~Shape() = default;

namespace {

constexpr double kPi = 3.14159265358979323846;

class Circle final : public Shape {
 public:
  Circle(Vec2d c, double r) : c_(c), r_(r) {}
  std::string name() const override { return "circle"; }
  double area() const override { return kPi * r_ * r_; }
  double perimeter() const override { return 2 * kPi * r_; }
  Polygon outline(int segments) const override {
    Polygon p;
    for (int i = 0; i < segments; ++i) {
      double t = 2 * kPi * i / segments;
      p.add(c_ + Vec2d{std::cos(t), std::sin(t)} * r_);
    }
    return p;
  }

 private:
  Vec2d c_;
  double r_;
};

class Rect final : public Shape {
 public:
  Rect(Vec2d corner, double w, double h) : o_(corner), w_(w), h_(h) {}
  std::string name() const override { return "rect"; }
  double area() const override { return w_ * h_; }
  double perimeter() const override { return 2 * (w_ + h_); }
  Polygon outline(int) const override {
    Polygon p;
    p.add(o_);
    p.add(o_ + Vec2d{w_, 0});
    p.add(o_ + Vec2d{w_, h_});
    p.add(o_ + Vec2d{0, h_});
    return p;
  }

 private:
  Vec2d o_;
  double w_, h_;
};

class PolygonShape final : public Shape {
 public:
  explicit PolygonShape(Polygon p) : p_(std::move(p)) {}
  std::string name() const override { return "polygon"; }
  double area() const override { return p_.area(); }
  double perimeter() const override { return p_.perimeter(); }
  Polygon outline(int) const override { return p_; }

 private:
  Polygon p_;
};

}  // namespace

std::unique_ptr<Shape> make_circle(Vec2d center, double radius) {
  return std::make_unique<Circle>(center, radius);
}

std::unique_ptr<Shape> make_rect(Vec2d corner, double width, double height) {
  return std::make_unique<Rect>(corner, width, height);
}

std::unique_ptr<Shape> make_polygon(const std::vector<Vec2d> &points) {
  return std::make_unique<PolygonShape>(Polygon(points).dedup());
}

std::unique_ptr<Shape> parse_shape(const std::string &line) {
  std::istringstream in(line);
  std::string kind;
  in >> kind;
  std::vector<double> v;
  for (double x; in >> x;) v.push_back(x);
  if (kind == "circle" && v.size() == 3 && v[2] > 0) return make_circle({v[0], v[1]}, v[2]);
  if (kind == "rect" && v.size() == 4) return make_rect({v[0], v[1]}, v[2], v[3]);
  if (kind == "poly" && v.size() >= 6 && v.size() % 2 == 0) {
    std::vector<Vec2d> pts;
    for (std::size_t i = 0; i < v.size(); i += 2) pts.push_back({v[i], v[i + 1]});
    return make_polygon(pts);
  }
  return nullptr;
}

}  // namespace geom
