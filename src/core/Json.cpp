#include "Json.h"

#include <cerrno>
#include <cmath>
#include <cstdlib>
#include <cstring>

namespace mlopt::json {

Value Value::makeBool(bool B) {
  Value V;
  V.K = Kind::Bool;
  V.B = B;
  return V;
}
Value Value::makeInt(int64_t I) {
  Value V;
  V.K = Kind::Int;
  V.I = I;
  return V;
}
Value Value::makeDouble(double D) {
  Value V;
  V.K = Kind::Double;
  V.D = D;
  return V;
}
Value Value::makeString(std::string S) {
  Value V;
  V.K = Kind::String;
  V.S = std::move(S);
  return V;
}
Value Value::makeArray(std::vector<Value> A) {
  Value V;
  V.K = Kind::Array;
  V.A = std::move(A);
  return V;
}
Value Value::makeObject(std::vector<std::pair<std::string, Value>> O) {
  Value V;
  V.K = Kind::Object;
  V.O = std::move(O);
  return V;
}

const Value *Value::get(std::string_view Key) const {
  if (K != Kind::Object)
    return nullptr;
  for (const auto &[Name, Member] : O)
    if (Name == Key)
      return &Member;
  return nullptr;
}

// ---- UTF-8 ---------------------------------------------------------------

/// Length of the well-formed sequence starting at P (Unicode Table 3-7), or
/// 0 if ill-formed; *Subpart receives the length of the maximal ill-formed
/// subpart (at least 1) in that case.
static size_t utf8SequenceLength(const unsigned char *P, size_t Avail, size_t *Subpart) {
  unsigned char C = P[0];
  *Subpart = 1;
  if (C < 0x80)
    return 1;
  size_t Need;
  unsigned char Lo = 0x80, Hi = 0xBF;
  if (C >= 0xC2 && C <= 0xDF) {
    Need = 2;
  } else if (C >= 0xE0 && C <= 0xEF) {
    Need = 3;
    if (C == 0xE0)
      Lo = 0xA0;
    else if (C == 0xED)
      Hi = 0x9F;
  } else if (C >= 0xF0 && C <= 0xF4) {
    Need = 4;
    if (C == 0xF0)
      Lo = 0x90;
    else if (C == 0xF4)
      Hi = 0x8F;
  } else {
    return 0;
  }
  for (size_t I = 1; I < Need; ++I) {
    if (I >= Avail)
      return 0;
    unsigned char T = P[I];
    unsigned char L = I == 1 ? Lo : 0x80, H = I == 1 ? Hi : 0xBF;
    if (T < L || T > H)
      return 0;
    *Subpart = I + 1;
  }
  return Need;
}

bool isUTF8(std::string_view S) {
  const auto *P = reinterpret_cast<const unsigned char *>(S.data());
  size_t N = S.size(), I = 0;
  while (I < N) {
    if (P[I] < 0x80) {
      ++I;
      continue;
    }
    size_t Sub;
    size_t L = utf8SequenceLength(P + I, N - I, &Sub);
    if (!L)
      return false;
    I += L;
  }
  return true;
}

std::string fixUTF8(std::string_view S) {
  std::string Out;
  Out.reserve(S.size() + 8);
  const auto *P = reinterpret_cast<const unsigned char *>(S.data());
  size_t N = S.size(), I = 0;
  while (I < N) {
    size_t Sub;
    size_t L = utf8SequenceLength(P + I, N - I, &Sub);
    if (L) {
      Out.append(S.data() + I, L);
      I += L;
    } else {
      Out += "\xEF\xBF\xBD";
      I += Sub;
    }
  }
  return Out;
}

std::string escapeNonUTF8(std::string_view S) {
  if (isUTF8(S))
    return std::string(S);
  static const char Hex[] = "0123456789abcdef";
  std::string Out;
  Out.reserve(S.size() + 16);
  const auto *P = reinterpret_cast<const unsigned char *>(S.data());
  size_t N = S.size(), I = 0;
  while (I < N) {
    size_t Sub;
    size_t L = utf8SequenceLength(P + I, N - I, &Sub);
    if (L) {
      Out.append(S.data() + I, L);
      I += L;
    } else {
      Out += "\\x";
      Out += Hex[P[I] >> 4];
      Out += Hex[P[I] & 15];
      ++I;
    }
  }
  return Out;
}

void appendQuoted(std::string &Out, std::string_view In) {
  std::string Fixed;
  if (!isUTF8(In)) {
    Fixed = fixUTF8(In);
    In = Fixed;
  }
  static const char Hex[] = "0123456789abcdef";
  Out += '"';
  for (unsigned char C : In) {
    if (C == '"' || C == '\\') {
      Out += '\\';
      Out += char(C);
    } else if (C >= 0x20) {
      Out += char(C);
    } else if (C == '\t') {
      Out += "\\t";
    } else if (C == '\n') {
      Out += "\\n";
    } else if (C == '\r') {
      Out += "\\r";
    } else {
      Out += "\\u00";
      Out += Hex[C >> 4];
      Out += Hex[C & 15];
    }
  }
  Out += '"';
}

// ---- Parser --------------------------------------------------------------

namespace {
class Parser {
public:
  Parser(const char *Data, size_t Size) : Begin(Data), P(Data), End(Data + Size) {}

  Value parseDocument() {
    skipSpace();
    Value V = parseValue(0);
    skipSpace();
    if (P != End)
      fail("unexpected text after the JSON value");
    return V;
  }

private:
  const char *Begin, *P, *End;

  [[noreturn]] void fail(const std::string &Reason) const {
    throw JsonError(size_t(P - Begin), Reason);
  }

  void skipSpace() {
    while (P < End && (*P == ' ' || *P == '\t' || *P == '\n' || *P == '\r'))
      ++P;
  }

  void expect(char C) {
    if (P >= End)
      fail(std::string("unexpected end of JSON, expected '") + C + "'");
    if (*P != C)
      fail(std::string("expected '") + C + "'");
    ++P;
  }

  Value parseValue(int Depth) {
    if (Depth > 64)
      fail("JSON nested too deeply");
    if (P >= End)
      fail("unexpected end of JSON, expected a value");
    switch (*P) {
    case '{':
      return parseObject(Depth);
    case '[':
      return parseArray(Depth);
    case '"':
      return Value::makeString(parseString());
    case 't':
      return parseLiteral("true", Value::makeBool(true));
    case 'f':
      return parseLiteral("false", Value::makeBool(false));
    case 'n':
      return parseLiteral("null", Value());
    default:
      if (*P == '-' || (*P >= '0' && *P <= '9'))
        return parseNumber();
      fail("invalid JSON value");
    }
  }

  Value parseLiteral(const char *Word, Value V) {
    size_t L = strlen(Word);
    if (size_t(End - P) < L || memcmp(P, Word, L) != 0)
      fail("invalid JSON literal");
    P += L;
    return V;
  }

  Value parseNumber() {
    const char *Start = P;
    if (*P == '-')
      ++P;
    if (P >= End || !(*P >= '0' && *P <= '9'))
      fail("invalid JSON number");
    if (*P == '0')
      ++P;
    else
      while (P < End && *P >= '0' && *P <= '9')
        ++P;
    bool IsInt = true;
    if (P < End && *P == '.') {
      IsInt = false;
      ++P;
      if (P >= End || !(*P >= '0' && *P <= '9'))
        fail("invalid JSON number");
      while (P < End && *P >= '0' && *P <= '9')
        ++P;
    }
    if (P < End && (*P == 'e' || *P == 'E')) {
      IsInt = false;
      ++P;
      if (P < End && (*P == '+' || *P == '-'))
        ++P;
      if (P >= End || !(*P >= '0' && *P <= '9'))
        fail("invalid JSON number");
      while (P < End && *P >= '0' && *P <= '9')
        ++P;
    }
    std::string Text(Start, P);
    if (IsInt) {
      errno = 0;
      char *E = nullptr;
      long long I = strtoll(Text.c_str(), &E, 10);
      if (errno == 0)
        return Value::makeInt(I);
    }
    return Value::makeDouble(strtod(Text.c_str(), nullptr));
  }

  static void appendUTF8(std::string &Out, uint32_t CP) {
    if (CP < 0x80) {
      Out += char(CP);
    } else if (CP < 0x800) {
      Out += char(0xC0 | (CP >> 6));
      Out += char(0x80 | (CP & 0x3F));
    } else if (CP < 0x10000) {
      Out += char(0xE0 | (CP >> 12));
      Out += char(0x80 | ((CP >> 6) & 0x3F));
      Out += char(0x80 | (CP & 0x3F));
    } else {
      Out += char(0xF0 | (CP >> 18));
      Out += char(0x80 | ((CP >> 12) & 0x3F));
      Out += char(0x80 | ((CP >> 6) & 0x3F));
      Out += char(0x80 | (CP & 0x3F));
    }
  }

  uint32_t parseHex4() {
    if (End - P < 4)
      fail("truncated \\u escape");
    uint32_t V = 0;
    for (int I = 0; I < 4; ++I) {
      char C = *P++;
      V <<= 4;
      if (C >= '0' && C <= '9')
        V |= C - '0';
      else if (C >= 'a' && C <= 'f')
        V |= C - 'a' + 10;
      else if (C >= 'A' && C <= 'F')
        V |= C - 'A' + 10;
      else {
        --P;
        fail("invalid \\u escape");
      }
    }
    return V;
  }

  std::string parseString() {
    expect('"');
    std::string Out;
    const char *RunStart = P;
    while (true) {
      if (P >= End)
        fail("unterminated JSON string");
      unsigned char C = *P;
      if (C == '"') {
        Out.append(RunStart, P);
        ++P;
        break;
      }
      if (C < 0x20)
        fail("control character in JSON string");
      if (C != '\\') {
        ++P;
        continue;
      }
      Out.append(RunStart, P);
      ++P;
      if (P >= End)
        fail("unterminated JSON string");
      char E = *P++;
      switch (E) {
      case '"':
        Out += '"';
        break;
      case '\\':
        Out += '\\';
        break;
      case '/':
        Out += '/';
        break;
      case 'b':
        Out += '\b';
        break;
      case 'f':
        Out += '\f';
        break;
      case 'n':
        Out += '\n';
        break;
      case 'r':
        Out += '\r';
        break;
      case 't':
        Out += '\t';
        break;
      case 'u': {
        uint32_t CP = parseHex4();
        if (CP >= 0xD800 && CP <= 0xDBFF && End - P >= 6 && P[0] == '\\' && P[1] == 'u') {
          const char *Save = P;
          P += 2;
          uint32_t Lo = parseHex4();
          if (Lo >= 0xDC00 && Lo <= 0xDFFF)
            CP = 0x10000 + ((CP - 0xD800) << 10) + (Lo - 0xDC00);
          else
            P = Save, CP = 0xFFFD;
        } else if (CP >= 0xD800 && CP <= 0xDFFF) {
          CP = 0xFFFD;
        }
        appendUTF8(Out, CP);
        break;
      }
      default:
        --P;
        fail("invalid escape in JSON string");
      }
      RunStart = P;
    }
    return Out;
  }

  Value parseArray(int Depth) {
    expect('[');
    std::vector<Value> Elements;
    skipSpace();
    if (P < End && *P == ']') {
      ++P;
      return Value::makeArray(std::move(Elements));
    }
    while (true) {
      skipSpace();
      Elements.push_back(parseValue(Depth + 1));
      skipSpace();
      if (P < End && *P == ',') {
        ++P;
        continue;
      }
      expect(']');
      return Value::makeArray(std::move(Elements));
    }
  }

  Value parseObject(int Depth) {
    expect('{');
    std::vector<std::pair<std::string, Value>> Members;
    skipSpace();
    if (P < End && *P == '}') {
      ++P;
      return Value::makeObject(std::move(Members));
    }
    while (true) {
      skipSpace();
      if (P >= End || *P != '"')
        fail("expected a quoted object key");
      std::string Key = parseString();
      skipSpace();
      expect(':');
      skipSpace();
      Value V = parseValue(Depth + 1);
      Members.emplace_back(std::move(Key), std::move(V));
      skipSpace();
      if (P < End && *P == ',') {
        ++P;
        continue;
      }
      expect('}');
      return Value::makeObject(std::move(Members));
    }
  }
};
} // namespace

Value parse(const char *Data, size_t Size) { return Parser(Data, Size).parseDocument(); }

} // namespace mlopt::json
