// The CPU kernels' launcher (see launch.h): KernelCall.prepare and the
// CPU launch of braze.runtime.cpu, in C++ on torch's tensors.
#include "launch.h"

#include <Python.h>

#include <ATen/core/Tensor.h>
#include <ATen/EmptyTensor.h>
#include <c10/util/SmallVector.h>
#include <torch/csrc/Dtype.h>
#include <torch/csrc/autograd/python_variable.h>

#include <algorithm>
#include <memory>
#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

namespace braze::launch {
namespace {

using KernelFunction = int (*)(void* const*, const int64_t*);
using Sizes = c10::SmallVector<int64_t, 8>;

// Thrown while a description is read; becomes a Python ValueError.
struct BadDescription : std::runtime_error {
  using std::runtime_error::runtime_error;
};

// A result taken from the call's arena: a strided view of the arena slot.
struct Carve {
  int slot;
  std::vector<int64_t> shape, strides;
  int64_t offset;
};

// One kernel's launch, as KernelCall holds it.
struct KernelPlan {
  std::vector<int> inputs, dynamic, outputs;  // slots
  std::vector<int64_t> domain;                // -1: a dynamic extent
  // Per domain dim, the (input, dim) whose size it is (a fused GEMM's
  // matrices); empty when dynamic extents come from the `dynamic` slots.
  std::vector<std::pair<int, int>> extentInputs;
  std::vector<std::array<int, 3>> checks;  // (input, dim, domain dim)
  // Per result dim: a static size, or -1 - d for the domain's dim d.
  std::vector<std::vector<int64_t>> resultShapes;
  std::vector<c10::ScalarType> resultTypes;
  std::vector<int> reuse;  // per result: the input whose buffer it may take, or -1
  std::vector<std::optional<Carve>> carve;
  std::vector<bool> blasInput;
  std::optional<std::vector<int64_t>> staticSizes;  // all sizes known at build
  size_t sizeCount;
  bool viewsInPlace;
  // Per input of a static type: the strides a contiguous tensor is read
  // with, its type's, whatever the tensor's own shape.
  std::vector<std::optional<std::vector<int64_t>>> declaredStrides;
};

// A kernel's tensors during one call.
struct Prepared {
  c10::SmallVector<at::Tensor, 8> inputs, outputs;
  Sizes extents;
};

// --- Reading a description (Python objects, once per kernel call site) ---

int64_t asInt(PyObject* value) {
  int64_t result = PyLong_AsLongLong(value);
  if (result == -1 && PyErr_Occurred()) {
    PyErr_Clear();
    throw BadDescription("an integer was expected");
  }
  return result;
}

PyObject* item(PyObject* sequence, Py_ssize_t index) {
  if (!PyTuple_Check(sequence) && !PyList_Check(sequence)) throw BadDescription("a tuple or list was expected");
  if (index >= PySequence_Fast_GET_SIZE(sequence)) throw BadDescription("a description is too short");
  return PySequence_Fast_GET_ITEM(sequence, index);
}

Py_ssize_t length(PyObject* sequence) {
  if (!PyTuple_Check(sequence) && !PyList_Check(sequence)) throw BadDescription("a tuple or list was expected");
  return PySequence_Fast_GET_SIZE(sequence);
}

template <typename T = int64_t>
std::vector<T> ints(PyObject* sequence) {
  std::vector<T> result;
  for (Py_ssize_t i = 0; i < length(sequence); ++i) result.push_back(static_cast<T>(asInt(item(sequence, i))));
  return result;
}

c10::ScalarType scalarType(PyObject* dtype) {
  if (!THPDtype_Check(dtype)) throw BadDescription("a torch.dtype was expected");
  return reinterpret_cast<THPDtype*>(dtype)->scalar_type;
}

// The tuple braze.runtime.cpu builds (`_launch_description`): inputs,
// dynamic, outputs, domain, extent inputs, checks, result shapes, result
// dtypes, reuse, carve, BLAS inputs, static sizes (or None), size count,
// views in place, declared strides (per input, or None).
KernelPlan parseKernel(PyObject* d) {
  KernelPlan plan;
  plan.inputs = ints<int>(item(d, 0));
  plan.dynamic = ints<int>(item(d, 1));
  plan.outputs = ints<int>(item(d, 2));
  plan.domain = ints(item(d, 3));
  for (Py_ssize_t i = 0; i < length(item(d, 4)); ++i) {
    PyObject* pair = item(item(d, 4), i);
    plan.extentInputs.emplace_back(asInt(item(pair, 0)), asInt(item(pair, 1)));
  }
  for (Py_ssize_t i = 0; i < length(item(d, 5)); ++i) {
    PyObject* check = item(item(d, 5), i);
    plan.checks.push_back({static_cast<int>(asInt(item(check, 0))), static_cast<int>(asInt(item(check, 1))),
                           static_cast<int>(asInt(item(check, 2)))});
  }
  for (Py_ssize_t i = 0; i < length(item(d, 6)); ++i) plan.resultShapes.push_back(ints(item(item(d, 6), i)));
  for (Py_ssize_t i = 0; i < length(item(d, 7)); ++i) plan.resultTypes.push_back(scalarType(item(item(d, 7), i)));
  plan.reuse = ints<int>(item(d, 8));
  for (Py_ssize_t i = 0; i < length(item(d, 9)); ++i) {
    PyObject* carve = item(item(d, 9), i);
    if (carve == Py_None) {
      plan.carve.emplace_back();
    } else {
      plan.carve.push_back(Carve{static_cast<int>(asInt(item(carve, 0))), ints(item(carve, 1)),
                                 ints(item(carve, 2)), asInt(item(carve, 3))});
    }
  }
  plan.blasInput.assign(plan.inputs.size(), false);
  for (int number : ints<int>(item(d, 10))) plan.blasInput.at(number) = true;
  if (item(d, 11) != Py_None) plan.staticSizes = ints(item(d, 11));
  plan.sizeCount = static_cast<size_t>(asInt(item(d, 12)));
  plan.viewsInPlace = PyObject_IsTrue(item(d, 13));
  for (Py_ssize_t i = 0; i < length(item(d, 14)); ++i) {
    PyObject* strides = item(item(d, 14), i);
    plan.declaredStrides.push_back(strides == Py_None ? std::nullopt
                                                      : std::optional<std::vector<int64_t>>(ints(strides)));
  }
  size_t results = plan.outputs.size();
  if (plan.resultShapes.size() != results || plan.resultTypes.size() != results || plan.reuse.size() != results ||
      plan.carve.size() != results || plan.declaredStrides.size() != plan.inputs.size())
    throw BadDescription("a kernel's results are described inconsistently");
  return plan;
}

// --- One call ---

// The tensor in slot `slot`, or nullptr when it holds something else.
const at::Tensor* tensorAt(PyObject* env, int slot) {
  PyObject* value = PyList_GET_ITEM(env, slot);
  return THPVariable_Check(value) ? &THPVariable_Unpack(value) : nullptr;
}

// Gathers a kernel's inputs and extents and checks its dynamic dims, with
// no effect; false declines the call.
bool gather(const KernelPlan& plan, PyObject* env, Prepared& prepared) {
  for (int slot : plan.inputs) {
    const at::Tensor* tensor = tensorAt(env, slot);
    if (tensor == nullptr) return false;
    prepared.inputs.push_back(*tensor);
  }
  for (const auto& carve : plan.carve)
    if (carve && tensorAt(env, carve->slot) == nullptr) return false;
  size_t nextDynamic = 0;
  for (size_t d = 0; d < plan.domain.size(); ++d) {
    int64_t extent = plan.domain[d];
    if (extent < 0) {
      if (!plan.extentInputs.empty()) {
        auto [number, dim] = plan.extentInputs[d];
        extent = prepared.inputs[number].size(dim);
      } else {
        if (nextDynamic >= plan.dynamic.size()) return false;
        PyObject* value = PyList_GET_ITEM(env, plan.dynamic[nextDynamic++]);
        if (!PyLong_CheckExact(value)) return false;
        extent = PyLong_AsLongLong(value);
      }
    }
    prepared.extents.push_back(extent);
  }
  for (const auto& [number, dim, domainDim] : plan.checks)
    if (prepared.inputs[number].size(dim) != prepared.extents[domainDim]) return false;
  return true;
}

// Inputs the kernel cannot read in place made contiguous, results
// allocated, carved or reused, and the kernel's sizes appended to `sizes`.
void allocate(const KernelPlan& plan, PyObject* env, Prepared& prepared, std::vector<int64_t>& sizes) {
  bool contiguous = true;
  for (size_t number = 0; number < prepared.inputs.size(); ++number) {
    at::Tensor& tensor = prepared.inputs[number];
    if (tensor.is_contiguous()) continue;
    contiguous = false;
    int64_t rank = tensor.dim();
    if (!plan.viewsInPlace || (rank && tensor.stride(-1) != 1 && tensor.size(-1) != 1) ||
        (plan.blasInput[number] && tensor.size(-2) > 1 && tensor.stride(-2) < tensor.size(-1)))
      tensor = tensor.contiguous();  // kernels (and BLAS) read rows in place
  }
  for (size_t result = 0; result < plan.outputs.size(); ++result) {
    Sizes shape;
    for (int64_t size : plan.resultShapes[result]) shape.push_back(size >= 0 ? size : prepared.extents[-1 - size]);
    if (const auto& carve = plan.carve[result]) {
      prepared.outputs.push_back(tensorAt(env, carve->slot)->as_strided(carve->shape, carve->strides, carve->offset));
      continue;
    }
    int number = plan.reuse[result];
    if (number >= 0 && prepared.inputs[number].is_contiguous() && prepared.inputs[number].sizes() == at::IntArrayRef(shape)) {
      prepared.outputs.push_back(prepared.inputs[number]);
    } else {
      // As Inductor's wrappers allocate: no dispatch, the CPU allocator.
      prepared.outputs.push_back(at::detail::empty_cpu(shape, plan.resultTypes[result]));
    }
  }
  size_t start = sizes.size();
  if (plan.staticSizes && contiguous) {
    sizes.insert(sizes.end(), plan.staticSizes->begin(), plan.staticSizes->end());
  } else {
    sizes.insert(sizes.end(), prepared.extents.begin(), prepared.extents.end());
    // Element strides as the kernels read them: a dim of size 1 is never
    // stepped, so its stride is 0 (torch lets it carry any).
    for (size_t number = 0; number < prepared.inputs.size(); ++number) {
      const at::Tensor& tensor = prepared.inputs[number];
      const auto& declared = plan.declaredStrides[number];
      if (declared && tensor.is_contiguous())
        sizes.insert(sizes.end(), declared->begin(), declared->end());
      else
        for (int64_t d = 0; d < tensor.dim(); ++d) sizes.push_back(tensor.size(d) == 1 ? 0 : tensor.stride(d));
    }
    for (const at::Tensor& tensor : prepared.outputs) sizes.insert(sizes.end(), tensor.sizes().begin(), tensor.sizes().end());
  }
  sizes.resize(start + plan.sizeCount);  // exactly its own entries (a combo's next kernel follows)
}

}  // namespace

class Launch {
 public:
  Launch(KernelFunction function, std::vector<KernelPlan> kernels)
      : function_(function), kernels_(std::move(kernels)) {
    for (const KernelPlan& plan : kernels_) {
      for (const auto* slots : {&plan.inputs, &plan.dynamic, &plan.outputs})
        for (int slot : *slots) slotCount_ = std::max<Py_ssize_t>(slotCount_, slot + 1);
      for (const auto& carve : plan.carve)
        if (carve) slotCount_ = std::max<Py_ssize_t>(slotCount_, carve->slot + 1);
    }
  }

  int run(PyObject* env) {
    if (!PyList_Check(env) || PyList_GET_SIZE(env) < slotCount_) return kDeclined;
    c10::SmallVector<Prepared, 1> prepared(kernels_.size());
    for (size_t k = 0; k < kernels_.size(); ++k)
      if (!gather(kernels_[k], env, prepared[k])) return kDeclined;
    std::vector<int64_t> sizes;
    c10::SmallVector<void*, 16> buffers;
    for (size_t k = 0; k < kernels_.size(); ++k) {
      allocate(kernels_[k], env, prepared[k], sizes);
      for (const at::Tensor& tensor : prepared[k].inputs) buffers.push_back(tensor.data_ptr());
      for (const at::Tensor& tensor : prepared[k].outputs) buffers.push_back(tensor.data_ptr());
    }
    int64_t none = 0;
    int failed;
    Py_BEGIN_ALLOW_THREADS  // the kernels run OpenMP; other Python threads may go on
    failed = function_(buffers.data(), sizes.empty() ? &none : sizes.data());
    Py_END_ALLOW_THREADS
    if (failed) return kFailed;
    for (size_t k = 0; k < kernels_.size(); ++k)
      for (size_t result = 0; result < kernels_[k].outputs.size(); ++result) {
        PyObject* wrapped = THPVariable_Wrap(prepared[k].outputs[result]);
        if (wrapped == nullptr) return kError;
        PyList_SetItem(env, kernels_[k].outputs[result], wrapped);  // steals `wrapped`
      }
    return kDone;
  }

 private:
  KernelFunction function_;
  std::vector<KernelPlan> kernels_;
  Py_ssize_t slotCount_ = 0;  // the slots it touches: env must be this long
};

class ArgumentCheck {
 public:
  // Per argument: nullopt for an int, else its dtype and sizes (-1: dynamic).
  std::vector<std::optional<std::pair<c10::ScalarType, std::vector<int64_t>>>> expected;

  bool accepts(PyObject* arguments) const {
    if (!PyTuple_Check(arguments) && !PyList_Check(arguments)) return false;
    if (static_cast<size_t>(PySequence_Fast_GET_SIZE(arguments)) != expected.size()) return false;
    for (size_t i = 0; i < expected.size(); ++i) {
      PyObject* value = PySequence_Fast_GET_ITEM(arguments, i);
      if (!expected[i]) {
        if (!PyLong_CheckExact(value)) return false;
        continue;
      }
      if (!THPVariable_Check(value)) return false;
      const at::Tensor& tensor = THPVariable_Unpack(value);
      const auto& [dtype, sizes] = *expected[i];
      if (tensor.scalar_type() != dtype || !tensor.device().is_cpu() || tensor.dim() != static_cast<int64_t>(sizes.size()))
        return false;
      for (size_t d = 0; d < sizes.size(); ++d)
        if (sizes[d] >= 0 && tensor.size(d) != sizes[d]) return false;
    }
    return true;
  }
};

namespace {

// Runs `body`, turning C++ exceptions into Python ones (returns `failure`).
template <typename Result, typename Body>
Result guarded(Result failure, Body body) {
  try {
    return body();
  } catch (const BadDescription& error) {
    PyErr_SetString(PyExc_ValueError, (std::string("braze launcher: ") + error.what()).c_str());
  } catch (const std::exception& error) {
    if (!PyErr_Occurred()) PyErr_SetString(PyExc_RuntimeError, error.what());
  }
  return failure;
}

}  // namespace

const char* torchVersion() { return BRAZE_TORCH_VERSION; }

Launch* createLaunch(std::uintptr_t function, void* kernels) {
  return guarded<Launch*>(nullptr, [&] {
    std::vector<KernelPlan> plans;
    auto* list = static_cast<PyObject*>(kernels);
    for (Py_ssize_t k = 0; k < length(list); ++k) plans.push_back(parseKernel(item(list, k)));
    return new Launch(reinterpret_cast<KernelFunction>(function), std::move(plans));
  });
}

void destroyLaunch(Launch* launch) { delete launch; }

int runLaunch(Launch* launch, void* env) {
  return guarded<int>(kError, [&] { return launch->run(static_cast<PyObject*>(env)); });
}

ArgumentCheck* createArgumentCheck(void* expected) {
  return guarded<ArgumentCheck*>(nullptr, [&] {
    auto check = std::make_unique<ArgumentCheck>();
    auto* list = static_cast<PyObject*>(expected);
    for (Py_ssize_t i = 0; i < length(list); ++i) {
      PyObject* argument = item(list, i);
      if (argument == Py_None) {
        check->expected.emplace_back();
      } else {
        check->expected.emplace_back(std::make_pair(scalarType(item(argument, 0)), ints(item(argument, 1))));
      }
    }
    return check.release();
  });
}

void destroyArgumentCheck(ArgumentCheck* check) { delete check; }

int runArgumentCheck(ArgumentCheck* check, void* arguments) {
  return guarded<int>(-1, [&] { return check->accepts(static_cast<PyObject*>(arguments)) ? 1 : 0; });
}

}  // namespace braze::launch
