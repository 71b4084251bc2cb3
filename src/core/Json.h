//===- Json.h - The JSON subset MLGO logs use -------------------*- C++ -*-===//
//
// Contract: writes JSON text exactly as LLVM's json::OStream does without
// indentation (compact, same string escaping, invalid UTF-8 repaired to U+FFFD
// by maximal subparts as llvm::json::fixUTF8 does), and parses one JSON value
// from a byte range into a small DOM. Parsing never crashes on bad input: it
// throws JsonError with the byte offset (relative to the range) and a reason.
// Objects keep their key order. Nesting is limited to 64 levels.
//
//===----------------------------------------------------------------------===//
#ifndef MLOPT_CORE_JSON_H
#define MLOPT_CORE_JSON_H

#include <cstddef>
#include <cstdint>
#include <memory>
#include <stdexcept>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace mlopt::json {

class JsonError : public std::runtime_error {
public:
  JsonError(size_t Offset, const std::string &Reason)
      : std::runtime_error(Reason), Offset(Offset) {}
  size_t offset() const { return Offset; }

private:
  size_t Offset;
};

/// A parsed JSON value. Numbers keep whether they were written as integers.
class Value {
public:
  enum class Kind { Null, Bool, Int, Double, String, Array, Object };

  Value() = default;
  static Value makeBool(bool B);
  static Value makeInt(int64_t I);
  static Value makeDouble(double D);
  static Value makeString(std::string S);
  static Value makeArray(std::vector<Value> A);
  static Value makeObject(std::vector<std::pair<std::string, Value>> O);

  Kind kind() const { return K; }
  bool isInt() const { return K == Kind::Int; }
  bool isString() const { return K == Kind::String; }
  bool isArray() const { return K == Kind::Array; }
  bool isObject() const { return K == Kind::Object; }

  int64_t asInt() const { return I; }
  bool asBool() const { return B; }
  double asDouble() const { return K == Kind::Int ? double(I) : D; }
  const std::string &asString() const { return S; }
  const std::vector<Value> &asArray() const { return A; }
  const std::vector<std::pair<std::string, Value>> &asObject() const { return O; }
  /// Returns the member named Key of an object, or nullptr.
  const Value *get(std::string_view Key) const;

private:
  Kind K = Kind::Null;
  bool B = false;
  int64_t I = 0;
  double D = 0;
  std::string S;
  std::vector<Value> A;
  std::vector<std::pair<std::string, Value>> O;
};

/// Parses exactly one JSON value spanning [Data, Data+Size) (surrounding
/// whitespace allowed). Throws JsonError on any error.
Value parse(const char *Data, size_t Size);
inline Value parse(std::string_view Text) { return parse(Text.data(), Text.size()); }

/// True if S is well-formed UTF-8 (no overlongs, surrogates or > U+10FFFF).
bool isUTF8(std::string_view S);
/// Replaces each maximal ill-formed subpart of S with U+FFFD.
std::string fixUTF8(std::string_view S);

/// S with every byte that is not part of well-formed UTF-8 written as the
/// four characters \xNN (so that a message quoting input is valid UTF-8
/// and still shows the bytes); S itself when it is valid UTF-8.
std::string escapeNonUTF8(std::string_view S);

/// Appends S as a quoted JSON string with LLVM's escaping rules.
void appendQuoted(std::string &Out, std::string_view S);

} // namespace mlopt::json

#endif
