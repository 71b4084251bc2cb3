#include "TrainingLogParser.h"

#include <algorithm>
#include <cstdio>
#include <cstring>

namespace mlopt {

namespace {
constexpr char ObservationPrefix[] = "{\"observation\":";
constexpr size_t ObservationPrefixLen = sizeof(ObservationPrefix) - 1;
constexpr char OutcomePrefix[] = "{\"outcome\":";
constexpr size_t OutcomePrefixLen = sizeof(OutcomePrefix) - 1;

std::string byteName(unsigned char C) {
  char Buf[8];
  snprintf(Buf, sizeof(Buf), "0x%02x", C);
  return Buf;
}

/// Fast path for `<Prefix><digits>}\n`. Returns the line length (with '\n')
/// and sets Id; 0 if the bytes are incomplete but could still match; -1 if
/// they are not in that exact form (use the general JSON path).
long matchCounterLine(const char *P, size_t Avail, const char *Prefix, size_t PrefixLen,
                      int64_t &Id) {
  if (Avail < PrefixLen)
    return memcmp(P, Prefix, Avail) == 0 ? 0 : -1;
  if (memcmp(P, Prefix, PrefixLen) != 0)
    return -1;
  size_t I = PrefixLen;
  int64_t V = 0;
  while (I < Avail && P[I] >= '0' && P[I] <= '9') {
    if (I - PrefixLen >= 18)
      return -1;
    V = V * 10 + (P[I] - '0');
    ++I;
  }
  if (I + 2 > Avail)
    return I == Avail || P[I] == '}' ? 0 : -1;
  if (I == PrefixLen || P[I] != '}' || P[I + 1] != '\n')
    return -1;
  Id = V;
  return long(I + 2);
}
} // namespace

size_t LogHeader::minRecordBytes() const {
  size_t N = ObservationPrefixLen + 3 + PayloadBytes + 1;
  if (Score)
    N += OutcomePrefixLen + 3 + Score->byteSize() + 1;
  return N;
}

void TrainingLogParser::fail(uint64_t At, const std::string &Reason) const {
  throw LogFormatError(At, Reason);
}

std::string TrainingLogParser::where(int64_t Id) const {
  std::string S = "observation " + std::to_string(Id);
  if (CurrentContext >= 0) {
    S += " of context ";
    json::appendQuoted(S, Contexts[size_t(CurrentContext)]);
  }
  return S;
}

json::Value TrainingLogParser::parseLine(const char *P, size_t Len, uint64_t At) const {
  try {
    return json::parse(P, Len);
  } catch (const json::JsonError &E) {
    fail(At + E.offset(), std::string("bad JSON record: ") + E.what());
  }
}

size_t TrainingLogParser::parse(const char *Data, size_t Size, LogRecordSink &Sink) {
  size_t Pos = 0;
  while (Pos < Size) {
    size_t N = parseRecord(Data + Pos, Size - Pos, Sink);
    if (!N)
      break;
    Pos += N;
    Offset += N;
  }
  return Pos;
}

void TrainingLogParser::finish(const char *Data, size_t Size) {
  diagnoseTail(Data, Size);
  fail(Offset, "incomplete record at end of input");
}

size_t TrainingLogParser::parseHeader(const char *P, size_t Avail, LogRecordSink &Sink) {
  // A log starts with its JSON header object: anything else is not a log
  // at all (a C file, an object file), said at once, without waiting for a
  // newline that may never come.
  if (Avail > 0 && P[0] != '{' && P[0] != ' ' && P[0] != '\t' && P[0] != '\r') {
    unsigned char C = static_cast<unsigned char>(P[0]);
    char Shown[8];
    if (C >= 0x20 && C < 0x7f)
      snprintf(Shown, sizeof Shown, "'%c'", C);
    else
      snprintf(Shown, sizeof Shown, "0x%02x", C);
    fail(0, std::string("not an MLGO training log: bad header: expected a JSON object with a "
                        "'features' list, the input starts with ") +
                Shown);
  }
  const char *NL = static_cast<const char *>(memchr(P, '\n', std::min(Avail, MaxLineBytes)));
  if (!NL) {
    if (Avail >= MaxLineBytes)
      fail(0, "bad header: no newline in the first 64 MiB");
    return 0;
  }
  size_t Len = size_t(NL - P);
  json::Value V;
  try {
    V = json::parse(P, Len);
  } catch (const json::JsonError &E) {
    fail(E.offset(), std::string("bad header JSON: ") + E.what());
  }
  if (!V.isObject())
    fail(0, "bad header: expected a JSON object with a 'features' list");
  const json::Value *Features = V.get("features");
  if (!Features || !Features->isArray())
    fail(0, "bad header: missing 'features' list");
  LogHeader H;
  try {
    for (const json::Value &F : Features->asArray())
      H.Features.push_back(TensorSpec::fromJSON(F));
    if (const json::Value *S = V.get("score"))
      H.Score = TensorSpec::fromJSON(*S);
    if (const json::Value *A = V.get("advice"))
      H.Advice = TensorSpec::fromJSON(*A);
  } catch (const SpecError &E) {
    fail(0, std::string("bad header: ") + E.what());
  }
  for (const TensorSpec &F : H.Features) {
    H.FeatureOffsets.push_back(H.PayloadBytes);
    H.PayloadBytes += F.byteSize();
  }
  H.HeaderBytes = Len + 1;
  Header = std::move(H);
  Sink.onHeader(*Header);
  return Len + 1;
}

size_t TrainingLogParser::parseRecord(const char *P, size_t Avail, LogRecordSink &Sink) {
  if (!Header)
    return parseHeader(P, Avail, Sink);
  if (*P != '{')
    fail(Offset, "expected a JSON record starting with '{', found byte " +
                     byteName(static_cast<unsigned char>(*P)));
  int64_t Id = 0;
  long Line = matchCounterLine(P, Avail, ObservationPrefix, ObservationPrefixLen, Id);
  if (Line > 0)
    return parseObservation(P, Avail, size_t(Line), Id, Sink);
  if (Line == 0)
    return 0;

  const char *NL = static_cast<const char *>(memchr(P, '\n', std::min(Avail, MaxLineBytes)));
  if (!NL) {
    if (Avail >= MaxLineBytes)
      fail(Offset, "record line longer than 64 MiB");
    return 0;
  }
  size_t Len = size_t(NL - P);
  json::Value V = parseLine(P, Len, Offset);
  if (!V.isObject() || V.asObject().size() != 1)
    fail(Offset, "expected a record {\"context\":...}, {\"observation\":...} "
                 "or {\"outcome\":...}, found " +
                     std::string(P, std::min<size_t>(Len, 80)));
  const auto &[Key, Member] = V.asObject().front();
  if (Key == "context") {
    if (!Member.isString())
      fail(Offset, "context name must be a string");
    const std::string &Name = Member.asString();
    auto [It, Inserted] = ContextIndex.emplace(Name, Contexts.size());
    if (Inserted)
      Contexts.push_back(Name);
    CurrentContext = long(It->second);
    Sink.onContext(It->second);
    return Len + 1;
  }
  if (Key == "observation") {
    if (!Member.isInt() || Member.asInt() < 0)
      fail(Offset, "observation number must be a non-negative integer");
    return parseObservation(P, Avail, Len + 1, Member.asInt(), Sink);
  }
  if (Key == "outcome")
    fail(Offset, "outcome record without a preceding observation");
  fail(Offset, "unknown record kind '" + Key + "'");
}

size_t TrainingLogParser::parseObservation(const char *P, size_t Avail, size_t LineLen, int64_t Id,
                                           LogRecordSink &Sink) {
  if (CurrentContext < 0)
    fail(Offset, "observation " + std::to_string(Id) + " comes before any context record");
  const LogHeader &H = *Header;
  size_t End = LineLen + H.PayloadBytes;
  if (Avail <= End)
    return 0;
  if (P[End] != '\n')
    fail(Offset + End, "missing observation terminator: expected 0x0a after "
                       "the " +
                           std::to_string(H.PayloadBytes) + " payload bytes of " + where(Id) +
                           ", found " + byteName(static_cast<unsigned char>(P[End])));
  ++End;
  if (!H.Score) {
    Sink.onObservation(size_t(CurrentContext), Id, P + LineLen, nullptr);
    ++Observations;
    return End;
  }

  // The outcome record must follow.
  const char *Q = P + End;
  size_t QAvail = Avail - End;
  uint64_t QAt = Offset + End;
  int64_t OutId = 0;
  long OLine = matchCounterLine(Q, QAvail, OutcomePrefix, OutcomePrefixLen, OutId);
  if (OLine == 0)
    return 0;
  if (OLine < 0) {
    // Said as soon as the first byte shows it, so the error does not depend
    // on how much of the line has arrived (bulk and streamed reads agree).
    if (*Q != '{')
      fail(QAt, "missing outcome for " + where(Id) + " (the header has score '" + H.Score->name() +
                    "'), found byte " + byteName(static_cast<unsigned char>(*Q)));
    const char *NL = static_cast<const char *>(memchr(Q, '\n', std::min(QAvail, MaxLineBytes)));
    if (!NL) {
      if (QAvail >= MaxLineBytes)
        fail(QAt, "record line longer than 64 MiB");
      return 0;
    }
    size_t Len = size_t(NL - Q);
    json::Value V = parseLine(Q, Len, QAt);
    const json::Value *Out = V.get("outcome");
    if (!Out || V.asObject().size() != 1)
      fail(QAt, "missing outcome for " + where(Id) + " (the header has score '" + H.Score->name() +
                    "'), found " + std::string(Q, std::min<size_t>(Len, 80)));
    if (!Out->isInt())
      fail(QAt, "outcome number must be an integer");
    OutId = Out->asInt();
    OLine = long(Len + 1);
  }
  if (OutId != Id)
    fail(QAt, "outcome " + std::to_string(OutId) + " does not match " + where(Id));
  size_t ScoreAt = End + size_t(OLine);
  size_t ScoreEnd = ScoreAt + H.Score->byteSize();
  if (Avail <= ScoreEnd)
    return 0;
  if (P[ScoreEnd] != '\n')
    fail(Offset + ScoreEnd, "missing outcome terminator: expected 0x0a after score '" +
                                H.Score->name() + "' of " + where(Id) + ", found " +
                                byteName(static_cast<unsigned char>(P[ScoreEnd])));
  Sink.onObservation(size_t(CurrentContext), Id, P + LineLen, P + ScoreAt);
  ++Observations;
  return ScoreEnd + 1;
}

void TrainingLogParser::diagnoseTail(const char *P, size_t Avail) {
  if (!Header)
    fail(0, "bad header: input ends after " + std::to_string(Avail) +
                " bytes without the header's terminating newline");
  const LogHeader &H = *Header;
  int64_t Id = 0;
  long Line = matchCounterLine(P, Avail, ObservationPrefix, ObservationPrefixLen, Id);
  if (Line <= 0) {
    const char *NL = static_cast<const char *>(memchr(P, '\n', Avail));
    if (!NL)
      fail(Offset, "truncated record: input ends inside a JSON record line");
    size_t Len = size_t(NL - P);
    json::Value V = parseLine(P, Len, Offset);
    const json::Value *Obs = V.get("observation");
    if (!Obs || !Obs->isInt())
      fail(Offset, "incomplete record at end of input");
    Id = Obs->asInt();
    Line = long(Len + 1);
  }
  size_t Rest = Avail - size_t(Line);
  uint64_t PayloadAt = Offset + size_t(Line);
  for (size_t F = 0; F < H.Features.size(); ++F) {
    size_t Need = H.FeatureOffsets[F] + H.Features[F].byteSize();
    if (Rest < Need)
      fail(PayloadAt + std::min(Rest, H.FeatureOffsets[F]),
           "truncated tensor '" + H.Features[F].name() + "' in " + where(Id) + ": needs " +
               std::to_string(H.Features[F].byteSize()) + " bytes, input ends after " +
               std::to_string(Rest > H.FeatureOffsets[F] ? Rest - H.FeatureOffsets[F] : 0));
  }
  if (Rest == H.PayloadBytes)
    fail(PayloadAt + Rest, "missing observation terminator: input ends after "
                           "the payload of " +
                               where(Id));
  Rest -= H.PayloadBytes + 1;
  uint64_t OutAt = PayloadAt + H.PayloadBytes + 1;
  if (!H.Score)
    fail(OutAt, "incomplete record at end of input");
  const char *Q = P + (Avail - Rest);
  const char *NL = static_cast<const char *>(memchr(Q, '\n', Rest));
  if (Rest == 0)
    fail(OutAt, "missing outcome for " + where(Id) + ": input ends (the header has score '" +
                    H.Score->name() + "')");
  if (!NL)
    fail(OutAt, "truncated outcome record of " + where(Id));
  size_t ORest = Rest - size_t(NL - Q) - 1;
  if (ORest < H.Score->byteSize())
    fail(OutAt + size_t(NL - Q) + 1, "truncated tensor '" + H.Score->name() + "' (outcome of " +
                                         where(Id) + "): needs " +
                                         std::to_string(H.Score->byteSize()) +
                                         " bytes, input ends after " + std::to_string(ORest));
  fail(OutAt + size_t(NL - Q) + 1 + H.Score->byteSize(),
       "missing outcome terminator: input ends after score '" + H.Score->name() + "' of " +
           where(Id));
}

} // namespace mlopt
