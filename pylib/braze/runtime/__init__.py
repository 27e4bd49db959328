"""The runtime: the on-disk cache of compiled kernels, and native libraries
wrapped with Cython (communication)."""
