// The CPU kernels' launcher: runs a prepared kernel (or a combo's
// sub-kernels) on a program's slot list with no Python work per tensor.
//
// braze.runtime.cpu describes each kernel call once (its slots, domain,
// checks, result shapes and dtypes, buffer reuse and arena carving, as
// KernelCall.prepare reads them); a call then gathers the tensors, checks
// the dynamic dims, allocates or carves the results, builds the `sizes`
// array, calls the kernel's C entry point and stores the results, all in
// C++. Anything the fast path does not take (a value that is not a tensor,
// a dim that disagrees with the domain) is declined before any effect, and
// the Python path runs instead and says what is wrong.
//
// The header names no torch or Python type, so its Cython wrapper
// (pylib/braze/runtime/_launch.pyx) compiles without torch's headers.
#pragma once

#include <cstdint>

namespace braze::launch {

class Launch;
class ArgumentCheck;

enum Status : int {
  kDone = 0,      // ran; the results are in the slots
  kFailed = 1,    // ran; an integer division by zero set the kernel's flag
  kDeclined = 2,  // nothing done: the Python path must run this call
  kError = -1,    // a Python exception is set (e.g. out of memory)
};

// The version of the torch whose headers built this (torch.__version__):
// its C++ ABI must be the running torch's.
const char* torchVersion();

// `function`: the address of `int f(void* const* buffers, const int64_t*
// sizes)`; `kernels`: a Python list with one description tuple per kernel
// (see launch.cpp: `parseKernel`). Returns nullptr with a Python exception
// set when a description is malformed.
Launch* createLaunch(std::uintptr_t function, void* kernels);
void destroyLaunch(Launch* launch);
// `env`: the program's slot list (a Python list).
int runLaunch(Launch* launch, void* env);

// `expected`: a Python list, per argument None (an int) or (dtype, sizes)
// with -1 for a dynamic dim. Accepts the arguments when each is a CPU
// tensor of that dtype and those sizes, or an int where one is expected.
ArgumentCheck* createArgumentCheck(void* expected);
void destroyArgumentCheck(ArgumentCheck* check);
// 1: accepted; 0: not (the full checks must run); -1: a Python exception.
int runArgumentCheck(ArgumentCheck* check, void* arguments);

}  // namespace braze::launch
