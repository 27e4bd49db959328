"""braze.export's decomposition step: the cached list of composite ops must
follow the dispatcher, so a composite op registered between two exports is
still decomposed in the second."""

import torch

import braze
from braze.frontend import decompositions


def test_composite_op_registered_after_an_export_is_decomposed():
    braze.export(lambda x: torch.nn.functional.gelu(x) * 2, (torch.randn(3, 4),))
    cached = dict(decompositions._cia_cache)
    assert cached, "the first export fills the cache"

    library = torch.library.Library("braze_test_late", "DEF")
    library.define("double_plus_one(Tensor x) -> Tensor")
    library.impl("double_plus_one", lambda x: x * 2 + 1, "CompositeImplicitAutograd")
    try:
        x = torch.randn(5, 6)
        program = braze.export(lambda x: torch.ops.braze_test_late.double_plus_one(x).exp(), (x,))
        assert decompositions._cia_cache.keys() != cached.keys(), "a new registration changes the key"
        torch.testing.assert_close(program(x), (x * 2 + 1).exp())
    finally:
        library._destroy()


def test_export_leaves_torch_unpatched():
    import torch.export.exported_program as exported_program
    from torch._export import utils

    braze.export(lambda x: x.sin(), (torch.randn(2),))
    assert exported_program._collect_all_valid_cia_ops is utils._collect_all_valid_cia_ops
