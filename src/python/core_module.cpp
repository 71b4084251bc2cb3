// mlopt._core: Python bindings of the LLVM-free core (tensor specs, training
// log writer, whole-log reader, incremental parser). The Python package wraps
// these in a friendlier API (python/mlopt/log.py); raw buffers cross the
// boundary as bytes or numpy arrays that own malloc'ed memory.

#include "ByteSink.h"
#include "PolicyModelPool.h"
#include "PyNames.h"
#include "TensorSpec.h"
#include "TfliteVerifier.h"
#include "TrainingLogParser.h"
#include "TrainingLogReader.h"
#include "TrainingLogWriter.h"

#include "ErrorTranslator.h"

#include <nanobind/nanobind.h>
#include <nanobind/ndarray.h>
#include <nanobind/stl/optional.h>
#include <nanobind/stl/shared_ptr.h>
#include <nanobind/stl/string.h>
#include <nanobind/stl/unique_ptr.h>
#include <nanobind/stl/vector.h>

#include <cstring>
#include <memory>

namespace nb = nanobind;
using namespace nb::literals;
using namespace mlopt;

namespace {

TensorType typeFromObject(nb::handle T) {
  if (PyUnicode_Check(T.ptr())) {
    std::string Name = nb::cast<std::string>(T);
    if (auto Type = tensorTypeFromName(Name))
      return *Type;
  }
  // Anything numpy understands as a dtype (np.int64, "float32", ...).
  nb::object Dtype;
  try {
    Dtype = nb::module_::import_("numpy").attr("dtype")(T);
  } catch (nb::python_error &) {
    throw SpecError(("unknown tensor type " + nb::cast<std::string>(nb::repr(T)) +
                     " (expected float, double, int8_t, uint8_t, int16_t, uint16_t, "
                     "int32_t, uint32_t, int64_t, uint64_t or a numpy dtype)")
                        .c_str());
  }
  std::string Char = nb::cast<std::string>(Dtype.attr("char"));
  for (int I = int(TensorType::Float); I <= int(TensorType::UInt64); ++I)
    if (Char.size() == 1 && tensorTypeNumpyChar(TensorType(I)) == Char[0])
      return TensorType(I);
  // numpy's 'l'/'L' are 64-bit on LP64 platforms.
  if (Char == "l")
    return TensorType::Int64;
  if (Char == "L")
    return TensorType::UInt64;
  throw SpecError(
      ("numpy dtype " + nb::cast<std::string>(nb::str(Dtype)) + " has no MLGO tensor type")
          .c_str());
}

nb::object numpyDtype(TensorType T) {
  char C[2] = {tensorTypeNumpyChar(T), 0};
  return nb::module_::import_("numpy").attr("dtype")(C);
}

nb::dlpack::dtype dlpackType(TensorType T) {
  switch (T) {
  case TensorType::Float:
    return nb::dtype<float>();
  case TensorType::Double:
    return nb::dtype<double>();
  case TensorType::Int8:
    return nb::dtype<int8_t>();
  case TensorType::UInt8:
    return nb::dtype<uint8_t>();
  case TensorType::Int16:
    return nb::dtype<int16_t>();
  case TensorType::UInt16:
    return nb::dtype<uint16_t>();
  case TensorType::Int32:
    return nb::dtype<int32_t>();
  case TensorType::UInt32:
    return nb::dtype<uint32_t>();
  case TensorType::Int64:
    return nb::dtype<int64_t>();
  case TensorType::UInt64:
    return nb::dtype<uint64_t>();
  default:
    throw std::logic_error("invalid tensor type");
  }
}

/// A numpy array of Rows x Shape that owns Data (freed with free()).
nb::object ownedArray(char *Data, size_t Rows, const std::vector<int64_t> &Shape,
                      nb::dlpack::dtype Type) {
  nb::capsule Owner(Data, [](void *P) noexcept { free(P); });
  std::vector<size_t> Dims{Rows};
  for (int64_t D : Shape)
    Dims.push_back(size_t(D));
  nb::ndarray<nb::numpy> A(Data, Dims.size(), Dims.data(), Owner, nullptr, Type);
  return nb::cast(A, nb::rv_policy::reference);
}

nb::object specOrNone(const std::optional<TensorSpec> &S) { return S ? nb::cast(*S) : nb::none(); }

nb::dict logToDict(ColumnarLog &Log) {
  nb::dict D;
  D["has_header"] = Log.HasHeader;
  nb::list Features, Columns, Contexts;
  if (Log.HasHeader) {
    const LogHeader &H = Log.Header;
    for (size_t I = 0; I < H.Features.size(); ++I) {
      Features.append(H.Features[I]);
      Columns.append(ownedArray(ColumnarLog::release(Log.Features[I]), Log.Rows,
                                H.Features[I].shape(), dlpackType(H.Features[I].type())));
    }
    D["score"] = specOrNone(H.Score);
    D["advice"] = specOrNone(H.Advice);
    D["score_column"] = H.Score ? ownedArray(ColumnarLog::release(Log.ScoreColumn), Log.Rows,
                                             H.Score->shape(), dlpackType(H.Score->type()))
                                : nb::none();
    D["context_index"] =
        ownedArray(ColumnarLog::release(Log.ContextColumn), Log.Rows, {}, nb::dtype<int32_t>());
    D["observation_id"] =
        ownedArray(ColumnarLog::release(Log.IdColumn), Log.Rows, {}, nb::dtype<int64_t>());
  } else {
    D["score"] = D["advice"] = D["score_column"] = nb::none();
    D["context_index"] = ownedArray(static_cast<char *>(malloc(1)), 0, {}, nb::dtype<int32_t>());
    D["observation_id"] = ownedArray(static_cast<char *>(malloc(1)), 0, {}, nb::dtype<int64_t>());
  }
  for (const std::string &C : Log.Contexts)
    Contexts.append(decodeName(C));
  D["features"] = Features;
  D["columns"] = Columns;
  D["contexts"] = Contexts;
  D["rows"] = Log.Rows;
  D["input_bytes"] = Log.InputBytes;
  D["truncated_bytes"] = Log.TruncatedBytes;
  D["truncation_reason"] = Log.TruncationReason;
  return D;
}

/// Contiguous bytes of a buffer-protocol object.
struct BufferView {
  Py_buffer View{};
  explicit BufferView(nb::handle H) {
    if (PyObject_GetBuffer(H.ptr(), &View, PyBUF_C_CONTIGUOUS) != 0)
      throw nb::python_error();
  }
  ~BufferView() { PyBuffer_Release(&View); }
  const char *data() const { return static_cast<const char *>(View.buf); }
  size_t size() const { return size_t(View.len); }
};

/// Collects parser events for Python (streaming use).
class EventSink final : public LogRecordSink {
public:
  explicit EventSink(nb::list &Events) : Events(Events) {}
  void onHeader(const LogHeader &H) override {
    setSizes(H);
    Events.append(nb::make_tuple("header"));
  }
  void setSizes(const LogHeader &H) {
    PayloadBytes = H.PayloadBytes;
    ScoreBytes = H.Score ? H.Score->byteSize() : 0;
  }
  void onContext(size_t Index) override { Events.append(nb::make_tuple("context", Index)); }
  void onObservation(size_t Ctx, int64_t Id, const char *Payload, const char *Score) override {
    nb::object S = nb::none();
    if (Score)
      S = nb::bytes(Score, ScoreBytes);
    Events.append(nb::make_tuple("observation", Ctx, Id, nb::bytes(Payload, PayloadBytes), S));
  }
  size_t PayloadBytes = 0, ScoreBytes = 0;

private:
  nb::list &Events;
};

/// Push parser: feed() bytes as they arrive, get whole records back.
class StreamParser {
public:
  nb::list feed(nb::handle Data) {
    BufferView B(Data);
    Pending.append(B.data(), B.size());
    nb::list Events;
    EventSink Sink(Events);
    if (Parser.hasHeader())
      Sink.setSizes(Parser.header());
    size_t Used = Parser.parse(Pending.data(), Pending.size(), Sink);
    Pending.erase(0, Used);
    return Events;
  }
  void finish() {
    if (!Pending.empty())
      Parser.finish(Pending.data(), Pending.size());
  }
  size_t pendingBytes() const { return Pending.size(); }
  TrainingLogParser Parser;

private:
  std::string Pending;
};

std::vector<TensorSpec> specList(nb::handle Seq) {
  std::vector<TensorSpec> Specs;
  for (nb::handle H : Seq) {
    if (!nb::isinstance<TensorSpec>(H))
      throw nb::type_error("features must be TensorSpec objects");
    Specs.push_back(nb::cast<TensorSpec>(H));
  }
  return Specs;
}

/// One feature's bytes for a batch of rows: uint8 [rows, bytes per row].
using RowBytes = nb::ndarray<const uint8_t, nb::ndim<2>, nb::c_contig, nb::device::cpu>;

} // namespace

NB_MODULE(_core, m) {
  m.doc() = "mlopt's LLVM-free core: tensor specs and MLGO training logs";

  registerErrorTranslator();
  m.attr("__version__") = MLOPT_VERSION;

  nb::class_<TensorSpec>(m, "TensorSpec",
                         "Name, port, element type and shape of one tensor, "
                         "as LLVM's TensorSpec.")
      .def(
          "__init__",
          [](TensorSpec *Self, nb::handle Name, nb::handle Type, std::vector<int64_t> Shape,
             int Port) {
            new (Self) TensorSpec(nameBytes(Name), typeFromObject(Type), std::move(Shape), Port);
          },
          "name"_a, "type"_a, "shape"_a = std::vector<int64_t>{1}, "port"_a = 0)
      .def_prop_ro("name", [](const TensorSpec &S) { return decodeName(S.name()); })
      .def_prop_ro("port", &TensorSpec::port)
      .def_prop_ro("type", [](const TensorSpec &S) { return tensorTypeName(S.type()); })
      .def_prop_ro("shape",
                   [](const TensorSpec &S) {
                     nb::list L;
                     for (int64_t D : S.shape())
                       L.append(D);
                     return nb::tuple(L);
                   })
      .def_prop_ro("element_count", &TensorSpec::elementCount)
      .def_prop_ro("element_size", &TensorSpec::elementByteSize)
      .def_prop_ro("byte_size", &TensorSpec::byteSize)
      .def_prop_ro("dtype", [](const TensorSpec &S) { return numpyDtype(S.type()); })
      .def(
          "to_json", [](const TensorSpec &S) { return decodeName(S.toJSON()); },
          "LLVM's compact JSON form: keys name, type, port, shape.")
      .def_static(
          "from_json",
          [](nb::handle J) {
            std::string Text;
            if (PyUnicode_Check(J.ptr()) || nb::isinstance<nb::bytes>(J))
              Text = nameBytes(J);
            else
              Text = nb::cast<std::string>(nb::module_::import_("json").attr("dumps")(J));
            json::Value V;
            try {
              V = json::parse(Text);
            } catch (const json::JsonError &E) {
              throw SpecError("bad tensor spec JSON at byte " + std::to_string(E.offset()) + ": " +
                              E.what());
            }
            return TensorSpec::fromJSON(V);
          },
          "json"_a, "Parses a spec from a JSON string or a dict.")
      .def("renamed",
           [](const TensorSpec &S, nb::handle Name) { return TensorSpec(nameBytes(Name), S); })
      .def("__eq__",
           [](const TensorSpec &A, nb::handle B) {
             return nb::isinstance<TensorSpec>(B) && A == nb::cast<TensorSpec>(B);
           })
      .def("__hash__", [](const TensorSpec &S) { return nb::hash(decodeName(S.toJSON())); })
      .def("__getstate__", [](const TensorSpec &S) { return decodeName(S.toJSON()); })
      .def("__setstate__",
           [](TensorSpec *Self, nb::handle J) {
             new (Self) TensorSpec(TensorSpec::fromJSON(json::parse(nameBytes(J))));
           })
      .def("__repr__", [](const TensorSpec &S) {
        std::string R = "TensorSpec(" + nb::cast<std::string>(nb::repr(decodeName(S.name()))) +
                        ", '" + tensorTypeName(S.type()) + "', [";
        for (size_t I = 0; I < S.shape().size(); ++I)
          R += (I ? ", " : "") + std::to_string(S.shape()[I]);
        R += "]";
        if (S.port())
          R += ", port=" + std::to_string(S.port());
        return R + ")";
      });

  nb::class_<TrainingLogWriter>(m, "TrainingLogWriter")
      .def(
          "__init__",
          [](TrainingLogWriter *Self, nb::handle Target, nb::handle Features,
             std::optional<TensorSpec> Score, std::optional<TensorSpec> Advice, bool Overwrite) {
            std::unique_ptr<ByteSink> Sink;
            if (Target.is_none())
              Sink = std::make_unique<StringSink>();
            else if (PyLong_Check(Target.ptr()))
              Sink = std::make_unique<FdSink>(nb::cast<int>(Target), false,
                                              "fd " + nb::cast<std::string>(nb::str(Target)));
            else
              Sink = FdSink::create(
                  nb::cast<std::string>(nb::module_::import_("os").attr("fsdecode")(Target)),
                  Overwrite);
            new (Self) TrainingLogWriter(std::move(Sink), specList(Features), std::move(Score),
                                         std::move(Advice));
          },
          "target"_a.none(), "features"_a, "score"_a.none() = nb::none(),
          "advice"_a.none() = nb::none(), "overwrite"_a = false)
      .def("switch_context",
           [](TrainingLogWriter &W, nb::handle Name) { W.switchContext(nameBytes(Name)); })
      .def("start_observation", &TrainingLogWriter::startObservation)
      .def("log_tensor_bytes",
           [](TrainingLogWriter &W, size_t Index, nb::handle Data) {
             BufferView B(Data);
             W.logTensorValue(Index, B.data(), B.size());
           })
      .def("end_observation", &TrainingLogWriter::endObservation)
      .def("log_reward_bytes",
           [](TrainingLogWriter &W, nb::handle Data) {
             BufferView B(Data);
             W.logReward(B.data(), B.size());
           })
      .def(
          "log_observations_bytes",
          [](TrainingLogWriter &W, size_t N, nb::list Columns, nb::handle Scores) {
            std::vector<std::unique_ptr<BufferView>> Views;
            std::vector<const char *> Ptrs;
            for (size_t I = 0; I < Columns.size(); ++I) {
              Views.push_back(std::make_unique<BufferView>(Columns[I]));
              size_t Need = N * W.features()[I].byteSize();
              if (Views.back()->size() != Need)
                throw nb::value_error(("column '" + json::escapeNonUTF8(W.features()[I].name()) +
                                       "' holds " + std::to_string(Views.back()->size()) +
                                       " bytes, expected " + std::to_string(Need))
                                          .c_str());
              Ptrs.push_back(Views.back()->data());
            }
            std::unique_ptr<BufferView> ScoreView;
            if (!Scores.is_none()) {
              ScoreView = std::make_unique<BufferView>(Scores);
              if (!W.score() || ScoreView->size() != N * W.score()->byteSize())
                throw nb::value_error("scores do not match the score spec");
            }
            nb::gil_scoped_release Release;
            W.logObservations(N, Ptrs, ScoreView ? ScoreView->data() : nullptr);
          },
          "rows"_a, "columns"_a, "scores"_a.none())
      .def("flush", &TrainingLogWriter::flush)
      .def("close", &TrainingLogWriter::close)
      .def("getvalue",
           [](TrainingLogWriter &W) {
             auto *S = dynamic_cast<StringSink *>(W.sink());
             if (!S)
               throw nb::value_error("getvalue() needs an in-memory writer "
                                     "(target=None)");
             return nb::bytes(S->str().data(), S->str().size());
           })
      .def_prop_ro("features", &TrainingLogWriter::features)
      .def_prop_ro("score", &TrainingLogWriter::score)
      .def_prop_ro("advice", &TrainingLogWriter::advice)
      .def_prop_ro("observation_open", &TrainingLogWriter::observationOpen)
      .def_prop_ro("has_context", &TrainingLogWriter::hasContext)
      .def("observation_count", [](const TrainingLogWriter &W, nb::handle Name) {
        return W.observationCount(nameBytes(Name));
      });

  m.def(
      "read_log_file",
      [](nb::handle Path, bool AllowTruncated) {
        std::string P = nb::cast<std::string>(nb::module_::import_("os").attr("fsdecode")(Path));
        std::optional<ColumnarLog> Log;
        {
          nb::gil_scoped_release Release;
          Log.emplace(readLogFile(P, AllowTruncated));
        }
        return logToDict(*Log);
      },
      "path"_a, "allow_truncated"_a = false);

  m.def(
      "read_log_buffer",
      [](nb::handle Data, bool AllowTruncated) {
        BufferView B(Data);
        std::optional<ColumnarLog> Log;
        {
          nb::gil_scoped_release Release;
          Log.emplace(readLogBuffer(B.data(), B.size(), AllowTruncated));
        }
        return logToDict(*Log);
      },
      "data"_a, "allow_truncated"_a = false);

  nb::class_<StreamParser>(m, "LogParser", "Incremental parser: feed() bytes as they arrive.")
      .def(nb::init<>())
      .def("feed", &StreamParser::feed, "data"_a)
      .def("finish", &StreamParser::finish)
      .def_prop_ro("pending_bytes", &StreamParser::pendingBytes)
      .def_prop_ro("offset", [](const StreamParser &P) { return P.Parser.offset(); })
      .def_prop_ro("has_header", [](const StreamParser &P) { return P.Parser.hasHeader(); })
      .def_prop_ro("features",
                   [](const StreamParser &P) {
                     if (!P.Parser.hasHeader())
                       return std::vector<TensorSpec>();
                     return P.Parser.header().Features;
                   })
      .def_prop_ro("score",
                   [](const StreamParser &P) {
                     return P.Parser.hasHeader() ? P.Parser.header().Score : std::nullopt;
                   })
      .def_prop_ro("advice",
                   [](const StreamParser &P) {
                     return P.Parser.hasHeader() ? P.Parser.header().Advice : std::nullopt;
                   })
      .def_prop_ro("feature_offsets",
                   [](const StreamParser &P) {
                     if (!P.Parser.hasHeader())
                       return std::vector<size_t>();
                     return P.Parser.header().FeatureOffsets;
                   })
      .def_prop_ro("contexts", [](const StreamParser &P) {
        nb::list L;
        for (const std::string &C : P.Parser.contexts())
          L.append(decodeName(C));
        return L;
      });

  m.def(
      "tflite_model_problem",
      [](nb::bytes Data) {
        return tfliteModelProblem(reinterpret_cast<const uint8_t *>(Data.c_str()), Data.size());
      },
      "data"_a,
      "'' when the bytes are a .tflite model LiteRT may be given; else what is wrong and where.");

  nb::class_<PolicyModelPool>(
      m, "PolicyPool",
      "A policy loaded for a problem's features, one instance per concurrent user "
      "(see PolicyModelPool.h); serves batch evaluation and in-process compiles.")
      .def_static(
          "load",
          [](const std::string &Path, const std::vector<TensorSpec> &Features,
             const std::string &FeedPrefix, const std::string &DecisionName,
             const std::string &Library, const std::vector<std::string> &Optional) {
            PolicyLoadOptions Opts;
            Opts.FeedPrefix = FeedPrefix;
            Opts.DecisionName = DecisionName;
            Opts.LiteRtLibrary = Library;
            Opts.OptionalFeatures = Optional;
            nb::gil_scoped_release NoGil;
            return PolicyModelPool::load(Path, Features, Opts);
          },
          "path"_a, "features"_a, "feed_prefix"_a, "decision_name"_a, "litert_library"_a = "",
          "optional_features"_a = std::vector<std::string>())
      .def_prop_ro("path", &PolicyModelPool::path)
      .def_prop_ro("model_inputs", &PolicyModelPool::modelInputs)
      .def_prop_ro("kind", &PolicyModelPool::kind)
      .def_prop_ro("features", &PolicyModelPool::features)
      .def_prop_ro("decision", &PolicyModelPool::decisionSpec)
      .def_prop_ro("extra_outputs", &PolicyModelPool::extraOutputs)
      .def_prop_ro("loaded_instances", &PolicyModelPool::loadedInstances)
      .def(
          "evaluate_batch",
          [](PolicyModelPool &Pool, size_t N, const std::vector<RowBytes> &Columns) {
            const std::vector<TensorSpec> &Features = Pool.features();
            if (Columns.size() != Features.size())
              throw nb::value_error(("expected " + std::to_string(Features.size()) +
                                     " feature columns, got " + std::to_string(Columns.size()))
                                        .c_str());
            for (size_t I = 0; I < Columns.size(); ++I)
              if (Columns[I].shape(0) != N || Columns[I].shape(1) != Features[I].byteSize())
                throw nb::value_error(("feature '" + json::escapeNonUTF8(Features[I].name()) +
                                       "': expected [" + std::to_string(N) + ", " +
                                       std::to_string(Features[I].byteSize()) + "] bytes")
                                          .c_str());
            const TensorSpec &Decision = Pool.decisionSpec();
            size_t DecisionBytes = Decision.byteSize();
            size_t ExtraBytes = 0;
            for (const TensorSpec &S : Pool.extraOutputs())
              ExtraBytes += S.byteSize();
            auto *Decisions = new uint8_t[N * DecisionBytes + 1];
            nb::capsule DOwner(Decisions,
                               [](void *P) noexcept { delete[] static_cast<uint8_t *>(P); });
            auto *Extras = new uint8_t[N * ExtraBytes + 1];
            nb::capsule EOwner(Extras,
                               [](void *P) noexcept { delete[] static_cast<uint8_t *>(P); });
            {
              nb::gil_scoped_release Release;
              std::shared_ptr<PolicyModel> M = Pool.acquire();
              for (size_t R = 0; R < N; ++R) {
                for (size_t I = 0; I < Columns.size(); ++I) {
                  size_t B = Features[I].byteSize();
                  std::memcpy(M->featureBuffer(I), Columns[I].data() + R * B, B);
                }
                M->evaluate();
                std::memcpy(Decisions + R * DecisionBytes, M->decisionData(), DecisionBytes);
                uint8_t *At = Extras + R * ExtraBytes;
                for (size_t E = 0; E < M->extraOutputs().size(); ++E) {
                  size_t B = M->extraOutputs()[E].byteSize();
                  std::memcpy(At, M->extraOutputData(E), B);
                  At += B;
                }
              }
            }
            nb::object Raw = nb::cast(nb::ndarray<nb::numpy, uint8_t, nb::ndim<1>>(
                Decisions, {N * DecisionBytes}, DOwner));
            nb::object Typed =
                Raw.attr("view")(std::string(1, tensorTypeNumpyChar(Decision.type())));
            nb::ndarray<nb::numpy, uint8_t, nb::ndim<2>> EArr(Extras, {N, ExtraBytes}, EOwner);
            return nb::make_tuple(Typed, EArr);
          },
          "rows"_a, "columns"_a,
          "Evaluates `rows` rows; `columns` holds each feature's bytes as a C-contiguous "
          "uint8 array [rows, byte size]. Returns (the decision output [rows] in its own "
          "dtype, the extra outputs' bytes [rows, total bytes]).");
}
