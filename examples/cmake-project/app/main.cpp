// shapes: reads shapes ("circle X Y R", "rect X Y W H", "poly X1 Y1 ...") from
// stdin, or makes a few, and prints a report of them.
#include <iostream>
#include <map>
#include <string>

#include "geom/shape.hpp"
#include "geom/stats.hpp"

int main(int argc, char **argv) {
  geom::Shapes shapes;
  std::map<std::string, int> bad;
  if (argc > 1 && std::string(argv[1]) == "-") {
    for (std::string line; std::getline(std::cin, line);) {
      if (auto s = geom::parse_shape(line))
        shapes.push_back(std::move(s));
      else
        bad[line.substr(0, line.find(' '))]++;
    }
  } else {
    for (int i = 1; i <= 12; ++i) {
      shapes.push_back(geom::make_circle({i * 1.5, -i * 0.5}, 0.25 * i));
      shapes.push_back(geom::make_rect({0, 0}, i, 13 - i));
      shapes.push_back(geom::make_polygon({{0, 0}, {2.0 * i, 0}, {i * 1.0, i * 1.5}, {0, 0}}));
    }
  }
  std::string text = geom::report(shapes);
  std::vector<int> sides;
  for (const auto &s : shapes) sides.push_back(static_cast<int>(s->outline(6).size()));
  std::cout << text << "median sides " << geom::median(sides) << ", checksum " << std::hex
            << geom::report_checksum(text) << std::dec << '\n';
  for (const auto &[kind, n] : bad) std::cerr << "skipped " << n << " malformed '" << kind << "' line(s)\n";
  return bad.empty() ? 0 : 1;
}
