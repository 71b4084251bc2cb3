#include <cstdio>

#include "cutil.h"
#include "geom/shape.hpp"
#include "geom/stats.hpp"

namespace geom {

std::string report(const Shapes &shapes) {
  std::vector<double> areas, perimeters;
  cutil_strbuf b;
  cutil_strbuf_init(&b);
  for (const auto &s : shapes) {
    Polygon hull = s->outline(32).convex_hull();
    Vec2d c = hull.centroid();
    areas.push_back(s->area());
    perimeters.push_back(s->perimeter());
    cutil_strbuf_printf(&b, "%-8s area %10.3f perimeter %9.3f hull %2zu points, centroid (%.2f, %.2f)\n",
                        s->name().c_str(), s->area(), s->perimeter(), hull.size(), c.x, c.y);
  }
  Summary a = summarize(areas), p = summarize(perimeters);
  cutil_strbuf_printf(&b, "areas: n %zu min %.3f median %.3f mean %.3f sd %.3f max %.3f\n", a.count, a.min,
                      a.median, a.mean, a.stddev, a.max);
  cutil_strbuf_printf(&b, "perimeters: median %.3f mean %.3f\n", p.median, p.mean);
  std::string text(b.data ? b.data : "", b.len);
  cutil_strbuf_free(&b);
  return text + format_histogram(histogram(areas, a.min, a.max, 8), 40);
}

unsigned report_checksum(const std::string &text) { return cutil_crc32(text.data(), text.size()); }

}  // namespace geom
