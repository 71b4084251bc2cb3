//===- PythonErrors.h - C++ exceptions as mlopt's Python exceptions -*- C++ -*-===//
//
// Contract: helpers for nanobind exception translators of mlopt's extension
// modules. errorClass(Name) is the exception type mlopt._errors.<Name>;
// raisePythonError(ErrorClass(args...)) sets it as the pending Python error.
//
//===----------------------------------------------------------------------===//
#ifndef MLOPT_PYTHON_PYTHONERRORS_H
#define MLOPT_PYTHON_PYTHONERRORS_H

#include <nanobind/nanobind.h>

namespace mlopt {

inline nanobind::object errorClass(const char *Name) {
  return nanobind::module_::import_("mlopt._errors").attr(Name);
}

inline void raisePythonError(nanobind::object Instance) {
  PyErr_SetObject(reinterpret_cast<PyObject *>(Py_TYPE(Instance.ptr())), Instance.ptr());
}

} // namespace mlopt

#endif
