// libFuzzer harness: the training-log parser on untrusted bytes, in bulk
// (readLogBuffer, strict and lenient) and incrementally in random chunkings
// (as LogStream and the interactive host feed it). Checks, beyond "no crash,
// no leak, no UB": only LogFormatError escapes; the chunked parse sees the
// same records and the same error (offset and reason) as the bulk parse; a
// strict read that succeeds has as many rows as the records parsed, and a
// strict read fails where the parser does (or on an empty input).
#include "TrainingLogParser.h"
#include "TrainingLogReader.h"

#include <cstdint>
#include <cstdlib>
#include <string>
#include <vector>

using namespace mlopt;

namespace {

struct Recorder final : LogRecordSink {
  std::vector<std::string> Events;
  size_t PayloadBytes = 0, ScoreBytes = 0;
  void onHeader(const LogHeader &H) override {
    PayloadBytes = H.PayloadBytes;
    ScoreBytes = H.Score ? H.Score->byteSize() : 0;
    Events.push_back("header");
  }
  void onContext(size_t I) override { Events.push_back("context " + std::to_string(I)); }
  void onObservation(size_t Ctx, int64_t Id, const char *Payload, const char *Score) override {
    std::string E = "obs " + std::to_string(Ctx) + " " + std::to_string(Id) + " ";
    E.append(Payload, PayloadBytes);
    if (Score)
      E.append(Score, ScoreBytes);
    Events.push_back(std::move(E));
  }
};

struct Outcome {
  std::vector<std::string> Events;
  bool Failed = false;
  uint64_t Offset = 0;
  std::string Reason;
};

/// Feeds Data in chunks whose sizes come from Sizes (cycled); 0 = all at once.
Outcome parseInChunks(const uint8_t *Data, size_t Size, const std::vector<size_t> &Sizes) {
  Outcome O;
  TrainingLogParser Parser;
  Recorder Sink;
  std::string Pending;
  size_t At = 0, K = 0;
  try {
    while (At < Size) {
      size_t N = Sizes.empty() ? Size : std::min(Size - At, Sizes[K++ % Sizes.size()]);
      Pending.append(reinterpret_cast<const char *>(Data) + At, N);
      At += N;
      size_t Used = Parser.parse(Pending.data(), Pending.size(), Sink);
      Pending.erase(0, Used);
    }
    if (!Pending.empty())
      Parser.finish(Pending.data(), Pending.size());
  } catch (const LogFormatError &E) {
    O.Failed = true;
    O.Offset = E.offset();
    O.Reason = E.reason();
  }
  O.Events = std::move(Sink.Events);
  return O;
}

} // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *Data, size_t Size) {
  Outcome Bulk = parseInChunks(Data, Size, {});
  // Chunk sizes from a hash of the input: different splits per input, the
  // same split every time the input is run (reproducible findings).
  uint64_t H = 1469598103934665603ull;
  for (size_t I = 0; I < Size; ++I)
    H = (H ^ Data[I]) * 1099511628211ull;
  std::vector<size_t> Sizes;
  for (int I = 0; I < 8; ++I, H = H * 6364136223846793005ull + 1442695040888963407ull)
    Sizes.push_back(1 + (H >> 33) % 97);
  Outcome Chunked = parseInChunks(Data, Size, Sizes);
  if (Bulk.Failed != Chunked.Failed || Bulk.Offset != Chunked.Offset ||
      Bulk.Reason != Chunked.Reason || Bulk.Events != Chunked.Events)
    std::abort();

  for (bool Lenient : {false, true}) {
    try {
      ColumnarLog Log = readLogBuffer(reinterpret_cast<const char *>(Data), Size, Lenient);
      size_t Observations = 0;
      for (const std::string &E : Bulk.Events)
        Observations += E.rfind("obs ", 0) == 0;
      if (!Lenient && (Bulk.Failed || Log.Rows != Observations))
        std::abort();
    } catch (const LogFormatError &E) {
      // The reader also refuses an empty input, which the parser accepts.
      if (!Lenient && !(Bulk.Failed && E.offset() == Bulk.Offset) && Size != 0)
        std::abort();
    }
  }
  return 0;
}
