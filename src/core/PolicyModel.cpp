#include "PolicyModel.h"
#include "CompiledPolicy.h"
#include "Json.h"
#include "LiteRtModel.h"

#include <sys/stat.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <fstream>
#include <sstream>

namespace mlopt {

std::optional<int64_t> PolicyModel::decisionIndex() const {
  switch (DecisionSpec.type()) {
  case TensorType::Int64: {
    int64_t V;
    std::memcpy(&V, DecisionData, sizeof V);
    return V;
  }
  case TensorType::Int32: {
    int32_t V;
    std::memcpy(&V, DecisionData, sizeof V);
    return V;
  }
  case TensorType::Float: {
    float V;
    std::memcpy(&V, DecisionData, sizeof V);
    // Integral and within int64's range (2^63 is exactly representable).
    if (std::isfinite(V) && V == std::trunc(V) && V >= -9223372036854775808.0f &&
        V < 9223372036854775808.0f)
      return int64_t(V);
    return std::nullopt;
  }
  default:
    return std::nullopt;
  }
}

std::string PolicyModel::rawDecision() const {
  std::ostringstream OS;
  if (DecisionSpec.type() == TensorType::Int64) {
    int64_t V;
    std::memcpy(&V, DecisionData, sizeof V);
    OS << V;
  } else if (DecisionSpec.type() == TensorType::Int32) {
    int32_t V;
    std::memcpy(&V, DecisionData, sizeof V);
    OS << V;
  } else {
    float V;
    std::memcpy(&V, DecisionData, sizeof V);
    OS << V;
  }
  return OS.str();
}

namespace {

bool isDirectory(const std::string &P) {
  struct stat St;
  return stat(P.c_str(), &St) == 0 && S_ISDIR(St.st_mode);
}

bool endsWith(const std::string &S, const std::string &Suffix) {
  return S.size() >= Suffix.size() &&
         S.compare(S.size() - Suffix.size(), Suffix.size(), Suffix) == 0;
}

std::string shapeText(const std::vector<int64_t> &Shape) {
  std::string Out = "[";
  for (size_t I = 0; I < Shape.size(); ++I)
    Out += (I ? "," : "") + std::to_string(Shape[I]);
  return Out + "]";
}

std::string specText(const TensorSpec &S) { return S.typeAndShape(); }

/// Does model tensor `T` stand for `Name` at `Port` (with optional prefix)?
bool matches(const ModelTensor &T, const std::string &Prefix, const std::string &Name, int Port) {
  const std::string Full = Prefix + Name;
  const std::string WithPort = Full + ":" + std::to_string(Port);
  if (T.TensorName == WithPort)
    return true;
  if (Port != 0)
    return false;
  return T.TensorName == Full || T.SignatureName == Full || T.SignatureName == Name;
}

/// One output of output_spec.json.
struct OutputEntry {
  std::string LoggingName;
  TensorSpec Spec;
};

std::vector<OutputEntry> parseOutputSpec(const json::Value &V, const std::string &File,
                                         const std::string &DecisionName);

std::vector<OutputEntry> readOutputSpec(const std::string &File, const std::string &DecisionName) {
  std::ifstream In(File, std::ios::binary);
  if (!In)
    throw PolicyError(File + ": cannot open (a model directory needs output_spec.json)");
  std::stringstream SS;
  SS << In.rdbuf();
  std::string Text = SS.str();
  json::Value V;
  try {
    V = json::parse(Text);
  } catch (const json::JsonError &E) {
    throw PolicyError(File + ": byte " + std::to_string(E.offset()) + ": " + E.what());
  }
  return parseOutputSpec(V, File, DecisionName);
}

std::vector<OutputEntry> parseOutputSpec(const json::Value &V, const std::string &File,
                                         const std::string &DecisionName) {
  if (!V.isArray() || V.asArray().empty())
    throw PolicyError(File + ": expected a non-empty JSON array of {logging_name, tensor_spec}");
  std::vector<OutputEntry> Out;
  for (size_t I = 0; I < V.asArray().size(); ++I) {
    const json::Value &E = V.asArray()[I];
    const json::Value *LN = E.isObject() ? E.get("logging_name") : nullptr;
    const json::Value *TS = E.isObject() ? E.get("tensor_spec") : nullptr;
    if (!LN || !LN->isString() || !TS)
      throw PolicyError(File + ": entry " + std::to_string(I) +
                        " needs \"logging_name\" (string) and \"tensor_spec\"");
    try {
      Out.push_back({LN->asString(), TensorSpec::fromJSON(*TS)});
    } catch (const std::exception &Err) {
      throw PolicyError(File + ": entry " + std::to_string(I) + ": " + Err.what());
    }
    TensorType T = Out.back().Spec.type();
    if (T != TensorType::Int64 && T != TensorType::Int32 && T != TensorType::Float)
      throw PolicyError(File + ": output '" + LN->asString() +
                        "': only int64_t, int32_t and float outputs are supported");
  }
  if (Out.front().LoggingName != DecisionName)
    throw PolicyError(File + ": the first output must be the decision '" + DecisionName +
                      "', not '" + Out.front().LoggingName + "'");
  if (Out.front().Spec.elementCount() != 1)
    throw PolicyError(File + ": the decision output must have one element");
  return Out;
}

bool isTrainingOnlyInput(const ModelTensor &T, const std::string &Prefix, TensorType &Type) {
  static const std::pair<const char *, TensorType> Known[] = {{"discount", TensorType::Float},
                                                              {"reward", TensorType::Float},
                                                              {"step_type", TensorType::Int32}};
  for (const auto &[Name, Ty] : Known)
    if (matches(T, Prefix, Name, 0)) {
      Type = Ty;
      return true;
    }
  return false;
}

bool isOptional(const PolicyLoadOptions &Opts, const std::string &Name) {
  return std::find(Opts.OptionalFeatures.begin(), Opts.OptionalFeatures.end(), Name) !=
         Opts.OptionalFeatures.end();
}

/// A PolicyModel over a model backend (LiteRtModel or CompiledPolicy: the
/// same inputs/outputs/inputData/outputData/run interface).
template <class Backend> class BoundPolicyModel final : public PolicyModel {
public:
  BoundPolicyModel(const std::string &PathIn, const std::vector<TensorSpec> &FeaturesIn,
                   const PolicyLoadOptions &Opts);

  void evaluate() override {
    try {
      Model->run();
    } catch (const LiteRtError &E) {
      throw PolicyError(E.what());
    }
  }
  const char *kind() const override;

private:
  void bindInputs(const std::string &File, const PolicyLoadOptions &Opts) {
    const auto &In = Model->inputs();
    std::vector<bool> Used(In.size(), false);
    for (const TensorSpec &F : Features) {
      size_t Found = In.size();
      for (size_t J = 0; J < In.size() && Found == In.size(); ++J)
        if (!Used[J] && matches(In[J], Opts.FeedPrefix, F.name(), F.port()))
          Found = J;
      std::string Expected = Opts.FeedPrefix + F.name() + ":" + std::to_string(F.port());
      if (Found == In.size() && isOptional(Opts, F.name())) {
        Scratch.emplace_back(std::max<size_t>(F.byteSize(), 1), 0);
        FeatureBuffers.push_back(Scratch.back().data());
        continue;
      }
      if (Found == In.size())
        throw PolicyError(File + ": model has no input for feature '" + F.name() +
                          "' (expected tensor '" + Expected + "', " + specText(F) + ")");
      const ModelTensor &T = In[Found];
      if (!T.KnownType || T.Type != F.type())
        throw PolicyError(File + ": input '" + T.TensorName + "' has type " + T.describe() +
                          ", expected " + specText(F));
      if (T.ByteSize != F.byteSize())
        throw PolicyError(File + ": input '" + T.TensorName + "' has shape " + shapeText(T.Shape) +
                          ", expected " + specText(F));
      Used[Found] = true;
      Scratch.emplace_back();
      FeatureBuffers.push_back(Model->inputData(Found));
    }
    for (size_t J = 0; J < In.size(); ++J) {
      if (Used[J])
        continue;
      TensorType Ty;
      if (isTrainingOnlyInput(In[J], Opts.FeedPrefix, Ty) && In[J].KnownType && In[J].Type == Ty)
        continue; // zero-filled at load, never written
      throw PolicyError(File + ": model input '" + In[J].TensorName + "' (" + In[J].describe() +
                        ") is not one of the compiler's features");
    }
  }

  void bindOutputs(const std::string &File, const PolicyLoadOptions &Opts,
                   const std::vector<OutputEntry> &Spec) {
    const auto &Out = Model->outputs();
    auto Find = [&](const std::string &Name, int Port) -> size_t {
      for (size_t J = 0; J < Out.size(); ++J)
        if (matches(Out[J], "", Name, Port))
          return J;
      return Out.size();
    };
    if (Spec.empty()) { // bare .tflite
      size_t J = Find(Opts.DecisionName, 0);
      if (J == Out.size() && Out.size() == 1)
        J = 0;
      if (J == Out.size())
        throw PolicyError(File + ": no output named '" + Opts.DecisionName + "' among " +
                          std::to_string(Out.size()) +
                          " outputs (use a model directory with output_spec.json)");
      const ModelTensor &T = Out[J];
      if (!T.KnownType || (T.Type != TensorType::Int64 && T.Type != TensorType::Int32 &&
                           T.Type != TensorType::Float))
        throw PolicyError(File + ": decision output '" + T.TensorName + "' has type " +
                          T.describe() + ", expected int64_t, int32_t or float");
      if (T.ByteSize != tensorTypeSize(T.Type))
        throw PolicyError(File + ": decision output '" + T.TensorName + "' has shape " +
                          shapeText(T.Shape) + ", expected one element");
      DecisionSpec = TensorSpec(Opts.DecisionName, T.Type, {1});
      DecisionData = Model->outputData(J);
      return;
    }
    for (size_t I = 0; I < Spec.size(); ++I) {
      const TensorSpec &S = Spec[I].Spec;
      size_t J = Find(S.name(), S.port());
      if (J == Out.size())
        throw PolicyError(File + ": model has no output '" + S.name() + ":" +
                          std::to_string(S.port()) + "' listed in output_spec.json");
      const ModelTensor &T = Out[J];
      if (!T.KnownType || T.Type != S.type())
        throw PolicyError(File + ": output '" + T.TensorName + "' has type " + T.describe() +
                          ", output_spec.json says " + specText(S));
      if (T.ByteSize != S.byteSize())
        throw PolicyError(File + ": output '" + T.TensorName + "' has shape " + shapeText(T.Shape) +
                          ", output_spec.json says " + specText(S));
      if (I == 0) {
        DecisionSpec = TensorSpec(Opts.DecisionName, S.type(), {1});
        DecisionData = Model->outputData(J);
      } else {
        Extras.push_back(TensorSpec(Spec[I].LoggingName, S));
        ExtraData.push_back(Model->outputData(J));
      }
    }
  }

  std::unique_ptr<Backend> Model;
};

template <>
BoundPolicyModel<LiteRtModel>::BoundPolicyModel(const std::string &PathIn,
                                                const std::vector<TensorSpec> &FeaturesIn,
                                                const PolicyLoadOptions &Opts) {
  Path = PathIn;
  Features = FeaturesIn;
  std::string ModelFile = Path;
  std::vector<OutputEntry> Outputs;
  if (isDirectory(Path)) {
    ModelFile = Path + "/model.tflite";
    Outputs = readOutputSpec(Path + "/output_spec.json", Opts.DecisionName);
  }
  try {
    Model = LiteRtModel::load(ModelFile, Opts.LiteRtLibrary);
  } catch (const LiteRtError &E) {
    throw PolicyError(E.what());
  }
  bindInputs(ModelFile, Opts);
  bindOutputs(ModelFile, Opts, Outputs);
}

template <>
BoundPolicyModel<CompiledPolicy>::BoundPolicyModel(const std::string &PathIn,
                                                   const std::vector<TensorSpec> &FeaturesIn,
                                                   const PolicyLoadOptions &Opts) {
  Path = PathIn;
  Features = FeaturesIn;
  Model = CompiledPolicy::load(Path);
  std::vector<OutputEntry> Outputs;
  if (Model->outputSpec().isArray())
    Outputs =
        parseOutputSpec(Model->outputSpec(), Path + " (embedded output_spec)", Opts.DecisionName);
  bindInputs(Path, Opts);
  bindOutputs(Path, Opts, Outputs);
}

template <> const char *BoundPolicyModel<LiteRtModel>::kind() const { return "tflite"; }
template <> const char *BoundPolicyModel<CompiledPolicy>::kind() const { return "compiled"; }

} // namespace

std::unique_ptr<PolicyModel> loadPolicyModel(const std::string &Path,
                                             const std::vector<TensorSpec> &Features,
                                             const PolicyLoadOptions &Options) {
  struct stat St;
  if (stat(Path.c_str(), &St) != 0)
    throw PolicyError(Path + ": no such model file or directory");
  if (!isDirectory(Path) && endsWith(Path, ".so"))
    return std::make_unique<BoundPolicyModel<CompiledPolicy>>(Path, Features, Options);
  return std::make_unique<BoundPolicyModel<LiteRtModel>>(Path, Features, Options);
}

} // namespace mlopt
