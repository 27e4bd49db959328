"""Code generators: each prints the kernel form for one target."""
