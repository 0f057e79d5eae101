#include "table.h"

#include <algorithm>

namespace rmsnorm_bench {
namespace {

bool RightAligned(const Table& t, size_t column) {
  return column < t.right_aligned.size() && t.right_aligned[column];
}

// Display width, counting each UTF-8 sequence as one column.
size_t Width(const std::string& s) {
  size_t width = 0;
  for (unsigned char ch : s) width += (ch & 0xC0) != 0x80;
  return width;
}

std::string Pad(const std::string& s, size_t width, bool right) {
  const std::string fill(width > Width(s) ? width - Width(s) : 0, ' ');
  return right ? fill + s : s + fill;
}

}  // namespace

void PrintText(std::ostream& out, const Table& table) {
  std::vector<size_t> widths(table.header.size(), 0);
  for (size_t c = 0; c < widths.size(); ++c) widths[c] = Width(table.header[c]);
  for (const auto& row : table.rows)
    for (size_t c = 0; c < row.size() && c < widths.size(); ++c) widths[c] = std::max(widths[c], Width(row[c]));
  auto print_row = [&](const std::vector<std::string>& row) {
    std::string line;
    for (size_t c = 0; c < widths.size(); ++c) {
      if (c > 0) line += "  ";
      line += Pad(c < row.size() ? row[c] : "", widths[c], RightAligned(table, c));
    }
    while (!line.empty() && line.back() == ' ') line.pop_back();
    out << line << '\n';
  };
  print_row(table.header);
  size_t total = 0;
  for (size_t w : widths) total += w;
  out << std::string(total + 2 * (widths.size() - 1), '-') << '\n';
  for (const auto& row : table.rows) print_row(row);
}

void PrintMarkdown(std::ostream& out, const Table& table) {
  auto escape = [](const std::string& s) {
    std::string e;
    for (char ch : s) {
      if (ch == '|') e += '\\';
      e += ch;
    }
    return e;
  };
  out << '|';
  for (const auto& h : table.header) out << ' ' << escape(h) << " |";
  out << "\n|";
  for (size_t c = 0; c < table.header.size(); ++c) out << (RightAligned(table, c) ? "---:|" : "---|");
  out << '\n';
  for (const auto& row : table.rows) {
    out << '|';
    for (size_t c = 0; c < table.header.size(); ++c) out << ' ' << escape(c < row.size() ? row[c] : "") << " |";
    out << '\n';
  }
}

}  // namespace rmsnorm_bench
