"""braze's caching allocator (see braze.runtime.memory and docs/memory.md)."""

from braze.runtime.memory import *  # noqa: F401,F403
from braze.runtime.memory import __all__  # noqa: F401
