/* braze memory runtime: the plain C interface.
 *
 * A caching allocator over a pluggable raw allocator (host memory, device
 * memory through the CUDA driver, or a caller's pair of functions). Handles
 * are opaque; calls that can fail return a braze_mem_status_t, NULL meaning
 * success; a non-NULL status owns its message and is released with
 * braze_mem_status_free. No MLIR/LLVM here; the Cython module
 * braze.runtime._memory wraps this header.
 */
#ifndef BRAZE_RUNTIME_MEMORY_API_H
#define BRAZE_RUNTIME_MEMORY_API_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef enum {
  BRAZE_MEM_OK = 0,
  BRAZE_MEM_INVALID_ARGUMENT = 1, /* a size, a block that is not live */
  BRAZE_MEM_OUT_OF_MEMORY = 2,    /* the raw allocator refused, after emptying the cache */
  BRAZE_MEM_UNAVAILABLE = 3,      /* no CUDA driver, no such device */
} braze_mem_code_t;

typedef struct braze_mem_status_s* braze_mem_status_t;
braze_mem_code_t braze_mem_status_code(braze_mem_status_t status);
const char* braze_mem_status_message(braze_mem_status_t status);
void braze_mem_status_free(braze_mem_status_t status);

/* Every block address and segment is aligned to this (one AVX-512 vector,
 * one cache line). */
#define BRAZE_MEM_ALIGNMENT 64

typedef struct braze_mem_allocator_s braze_mem_allocator_t;

/* A caller's raw allocator: `allocate` returns `size` bytes aligned to
 * BRAZE_MEM_ALIGNMENT, or NULL; `release` gets back what it returned. */
typedef void* (*braze_mem_raw_allocate_fn)(size_t size, void* context);
typedef void (*braze_mem_raw_release_fn)(void* address, size_t size, void* context);

braze_mem_status_t braze_mem_create_host(braze_mem_allocator_t** out);
/* Device memory of CUDA device `ordinal` through the driver API (libcuda.so.1
 * loaded at run time, the device's primary context). */
braze_mem_status_t braze_mem_create_cuda(int ordinal, braze_mem_allocator_t** out);
braze_mem_status_t braze_mem_create_custom(braze_mem_raw_allocate_fn allocate,
                                           braze_mem_raw_release_fn release,
                                           void* context, const char* name,
                                           braze_mem_allocator_t** out);
/* Drops the caller's reference; the allocator lives on while a DLPack
 * tensor it made is alive. */
void braze_mem_release(braze_mem_allocator_t* allocator);

/* `size` bytes (0 is allowed and takes one alignment unit). `*block` is the
 * handle braze_mem_free takes. */
braze_mem_status_t braze_mem_allocate(braze_mem_allocator_t* allocator, size_t size,
                                      void** block, void** address);
braze_mem_status_t braze_mem_free(braze_mem_allocator_t* allocator, void* block);
/* A DLPack DLManagedTensor (legacy, unversioned) of `size` uint8 elements
 * on the allocator's device whose deleter frees the block. */
braze_mem_status_t braze_mem_allocate_dlpack(braze_mem_allocator_t* allocator,
                                             size_t size, void** managed_tensor);

typedef struct {
  uint64_t allocated_bytes;      /* in blocks handed out (rounded sizes) */
  uint64_t requested_bytes;      /* what callers asked for */
  uint64_t reserved_bytes;       /* in segments taken from the raw allocator */
  uint64_t peak_allocated_bytes;
  uint64_t peak_reserved_bytes;
  uint64_t thread_cached_bytes;  /* free blocks held in per-thread caches */
  uint64_t free_bytes;           /* free blocks in the shared pools */
  uint64_t largest_free_block;
  uint64_t allocations;          /* calls of allocate, ever */
  uint64_t frees;
  uint64_t active_blocks;
  uint64_t thread_cache_hits;
  uint64_t segments;
  uint64_t raw_allocations;      /* segments ever taken from the raw allocator */
  uint64_t raw_releases;
  /* External fragmentation of the shared pools: 1 - largest free block /
   * free bytes (0 with no free bytes). */
  double fragmentation;
} braze_mem_stats_t;

braze_mem_status_t braze_mem_stats(braze_mem_allocator_t* allocator, braze_mem_stats_t* out);
void braze_mem_reset_peak(braze_mem_allocator_t* allocator);
/* Returns every block held in thread caches to the pools and every segment
 * with no live block to the raw allocator. */
void braze_mem_empty_cache(braze_mem_allocator_t* allocator);
/* Every segment and block, as JSON; release the string with braze_mem_string_free. */
braze_mem_status_t braze_mem_snapshot_json(braze_mem_allocator_t* allocator, char** json);
void braze_mem_string_free(char* string);
/* "cpu", "cuda" or the custom allocator's name; the device ordinal. */
const char* braze_mem_device(braze_mem_allocator_t* allocator, int* ordinal);

#ifdef __cplusplus
}
#endif
#endif /* BRAZE_RUNTIME_MEMORY_API_H */
