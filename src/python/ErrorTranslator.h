//===- ErrorTranslator.h - mlopt's C++ errors as Python exceptions -*- C++ -*-===//
//
// Contract: registerErrorTranslator() installs, for the calling extension
// module, the one translation of every mlopt C++ error into its class in
// mlopt.errors (all derive from MloptError): LogFormatError keeps its
// reason and byte offset, FileError becomes OutputExistsError for an output
// that exists, else an OSError with errno and path (FileNotFoundError, ...). Both extension modules
// (_core and _engine) register it, so an error means the same whichever
// module raised it.
//
//===----------------------------------------------------------------------===//
#ifndef MLOPT_PYTHON_ERRORTRANSLATOR_H
#define MLOPT_PYTHON_ERRORTRANSLATOR_H

#include "ByteSink.h"
#include "Errors.h"
#include "Json.h"
#include "LiteRtModel.h"
#include "PolicyModel.h"
#include "TensorSpec.h"
#include "TrainingLogParser.h"
#include "TrainingLogWriter.h"

#include <nanobind/nanobind.h>

#include <cerrno>

namespace mlopt {

/// The exception type mlopt.errors.<Name>.
inline nanobind::object errorClass(const char *Name) {
  return nanobind::module_::import_("mlopt.errors").attr(Name);
}

inline void raisePythonError(nanobind::object Instance) {
  PyErr_SetObject(reinterpret_cast<PyObject *>(Py_TYPE(Instance.ptr())), Instance.ptr());
}

inline void translateError(const std::exception_ptr &P, void *) {
  try {
    std::rethrow_exception(P);
  } catch (const LogFormatError &E) {
    raisePythonError(errorClass("LogFormatError")(E.reason(), E.offset()));
  } catch (const LogUsageError &E) {
    raisePythonError(errorClass("LogUsageError")(E.what()));
  } catch (const PolicyError &E) {
    raisePythonError(errorClass("PolicyError")(E.what()));
  } catch (const LiteRtError &E) {
    raisePythonError(errorClass("PolicyError")(E.what()));
  } catch (const SpecError &E) {
    raisePythonError(errorClass("SpecError")(E.what()));
  } catch (const json::JsonError &E) {
    raisePythonError(errorClass("SpecError")(std::string("byte ") + std::to_string(E.offset()) +
                                             ": " + E.what()));
  } catch (const ModuleError &E) {
    raisePythonError(errorClass("ModuleError")(E.what()));
  } catch (const IR2VecVocabError &E) {
    raisePythonError(errorClass("IR2VecVocabError")(E.what()));
  } catch (const CompileError &E) {
    raisePythonError(errorClass("CompileError")(E.what()));
  } catch (const FileError &E) {
    if (E.code().value() == EEXIST) // an output mlopt would not replace
      raisePythonError(errorClass("OutputExistsError")(E.path()));
    else
      raisePythonError(
          nanobind::handle(PyExc_OSError)(E.code().value(), E.code().message(), E.path()));
  }
}

inline void registerErrorTranslator() { nanobind::register_exception_translator(translateError); }

} // namespace mlopt

#endif
