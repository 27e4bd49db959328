"""A model zoo built from the configs of torchvision and transformers.

The models people run, with random weights (nothing is downloaded): the tests
check braze against eager PyTorch on them at small sizes, and
`benchmarks/models/run.py` times them at realistic sizes. Each entry builds
a model in eval mode and its example inputs.

torchvision: PyPI's wheel is a CUDA build whose C extension (NMS, RoI ops)
does not load next to the CPU torch wheel, and `import torchvision` then
stops where it registers fake kernels for `torchvision::nms` and `qnms`. Its
model code is pure Python, so `_import_torchvision` declares those two ops'
schemas (the extension would have) before importing it; nothing calls them.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Callable

import torch


@dataclass(frozen=True)
class Size:
    """The size of a zoo run: `small` for tests, `bench` for benchmarks."""

    image: int
    sequence: int
    batch: int
    hidden: int
    layers: int
    heads: int


SMALL = Size(image=32, sequence=32, batch=2, hidden=64, layers=2, heads=4)
BENCH = Size(image=224, sequence=128, batch=2, hidden=768, layers=2, heads=12)


def import_libraries() -> None:
    """Imports torchvision and transformers (ImportError when one is missing)."""
    _import_torchvision()
    import transformers  # noqa: F401


def _import_torchvision():
    import torch.library

    for op in ("nms", "qnms"):
        try:
            torch.library.define(f"torchvision::{op}", "(Tensor dets, Tensor scores, float iou_threshold) -> Tensor")
        except RuntimeError:  # defined already (the extension did load)
            pass
    import torchvision

    return torchvision


def _randomize_constant_weights(model: torch.nn.Module) -> None:
    """Fresh models hold constants where trained ones do not: batch-norm
    statistics of 0 and 1, unit norm scales, zero biases, zero-initialized
    classifier heads. Those would hide mistakes (a normalization that
    ignores its statistics, a head whose output is always 0), so each such
    float tensor is given random values around its constant."""
    with torch.no_grad():
        for name, tensor in [*model.named_parameters(), *model.named_buffers()]:
            if not tensor.is_floating_point() or tensor.numel() < 2:
                continue
            first = tensor.flatten()[0]
            if not bool((tensor == first).all()):
                continue
            if name.endswith("running_var"):
                tensor.uniform_(0.5, 1.5)
            else:
                tensor.normal_(float(first), 0.1)


@dataclass
class ZooModel:
    name: str
    family: str  # "vision" or "text"
    build: Callable[[Size], tuple[torch.nn.Module, tuple, dict]]

    def make(self, size: Size = SMALL, seed: int = 0, dtype: torch.dtype = torch.float32):
        """(model, args, kwargs) with random weights and inputs; weights and
        floating inputs in `dtype` (token ids and integer masks keep theirs)."""
        torch.manual_seed(seed)
        model, args, kwargs = self.build(size)
        _randomize_constant_weights(model)
        if dtype != torch.float32:
            def cast(x):
                return x.to(dtype) if torch.is_tensor(x) and x.is_floating_point() else x

            model = model.to(dtype)
            args = tuple(cast(x) for x in args)
            kwargs = {k: cast(v) for k, v in kwargs.items()}
        return model.eval(), args, kwargs


def _vision(factory: str, **extra):
    def build(size: Size):
        models = _import_torchvision().models
        if factory == "vit":
            patch = 16 if size.image >= 224 else 8
            model = models.VisionTransformer(
                image_size=size.image, patch_size=patch, num_layers=size.layers if size.image < 224 else 12,
                num_heads=size.heads if size.image < 224 else 12,
                hidden_dim=size.hidden if size.image < 224 else 768,
                mlp_dim=4 * (size.hidden if size.image < 224 else 768), num_classes=10)
        else:
            model = getattr(models, factory)(weights=None, num_classes=10, **extra)
        image = torch.randn(size.batch, 3, size.image, size.image)
        return model, (image,), {}

    return build


def _text(config_name: str, model_name: str, **extra):
    def build(size: Size):
        _import_torchvision()  # transformers imports it when it is installed
        import transformers

        config_class = getattr(transformers, config_name)
        fields = _TEXT_FIELDS[config_name](size)
        # No KV cache: braze compiles the forward pass (a cache object is
        # no tensor structure torch.export can return).
        config = config_class(**fields, use_cache=False, **extra)
        model = getattr(transformers, model_name)(config)
        ids = torch.randint(1, 100, (size.batch, size.sequence))
        mask = torch.ones(size.batch, size.sequence, dtype=torch.long)
        mask[0, size.sequence - size.sequence // 4:] = 0  # padding in the first row
        return model, (), {"input_ids": ids, "attention_mask": mask}

    return build


def _bert_like(size: Size) -> dict:
    return dict(vocab_size=1000, hidden_size=size.hidden, num_hidden_layers=size.layers,
                num_attention_heads=size.heads, intermediate_size=4 * size.hidden,
                max_position_embeddings=1024)


def _llama_like(size: Size) -> dict:
    return dict(vocab_size=1000, hidden_size=size.hidden, num_hidden_layers=size.layers,
                num_attention_heads=size.heads, num_key_value_heads=max(1, size.heads // 2),
                intermediate_size=4 * size.hidden, max_position_embeddings=1024)


_TEXT_FIELDS = {
    "BertConfig": _bert_like,
    "RobertaConfig": _bert_like,
    "DistilBertConfig": lambda s: dict(vocab_size=1000, dim=s.hidden, n_layers=s.layers, n_heads=s.heads,
                                       hidden_dim=4 * s.hidden, max_position_embeddings=1024),
    "GPT2Config": lambda s: dict(vocab_size=1000, n_embd=s.hidden, n_layer=s.layers, n_head=s.heads,
                                 n_positions=1024),
    "LlamaConfig": _llama_like,
    "MistralConfig": _llama_like,
    "Qwen2Config": _llama_like,
    "T5Config": lambda s: dict(vocab_size=1000, d_model=s.hidden, num_layers=s.layers, num_heads=s.heads,
                               d_kv=s.hidden // s.heads, d_ff=4 * s.hidden),
    "GPTNeoXConfig": _llama_like,
    "PhiConfig": _llama_like,
    "GemmaConfig": lambda s: dict(_llama_like(s), head_dim=s.hidden // s.heads),
    "Gemma2Config": lambda s: dict(_llama_like(s), head_dim=s.hidden // s.heads),
    "FalconConfig": _llama_like,
    "MixtralConfig": lambda s: dict(_llama_like(s), num_local_experts=4, intermediate_size=2 * s.hidden),
    "OPTConfig": lambda s: dict(_bert_like(s), ffn_dim=4 * s.hidden, pad_token_id=0),
    "BloomConfig": lambda s: dict(vocab_size=1000, hidden_size=s.hidden, n_layer=s.layers, n_head=s.heads),
    "DebertaV2Config": _bert_like,
    "ElectraConfig": lambda s: dict(_bert_like(s), embedding_size=s.hidden),
    "BartConfig": lambda s: dict(vocab_size=1000, d_model=s.hidden, encoder_layers=s.layers, decoder_layers=s.layers,
                                 encoder_attention_heads=s.heads, decoder_attention_heads=s.heads,
                                 encoder_ffn_dim=4 * s.hidden, decoder_ffn_dim=4 * s.hidden,
                                 max_position_embeddings=1024, pad_token_id=0, eos_token_id=2,
                                 decoder_start_token_id=2),
}

ZOO = [
    ZooModel("resnet18", "vision", _vision("resnet18")),
    ZooModel("mobilenet_v3_small", "vision", _vision("mobilenet_v3_small")),
    ZooModel("efficientnet_b0", "vision", _vision("efficientnet_b0")),
    ZooModel("vit", "vision", _vision("vit")),
    ZooModel("convnext_tiny", "vision", _vision("convnext_tiny")),
    ZooModel("bert", "text", _text("BertConfig", "BertModel")),
    ZooModel("gpt2", "text", _text("GPT2Config", "GPT2Model")),
    ZooModel("llama", "text", _text("LlamaConfig", "LlamaModel")),
    ZooModel("mistral", "text", _text("MistralConfig", "MistralModel")),
    ZooModel("qwen2", "text", _text("Qwen2Config", "Qwen2Model")),
    ZooModel("t5_encoder", "text", _text("T5Config", "T5EncoderModel")),
    ZooModel("distilbert", "text", _text("DistilBertConfig", "DistilBertModel")),
    ZooModel("roberta", "text", _text("RobertaConfig", "RobertaModel")),
]

# Models the suite was not tuned on, measured on the benchmark side only
# (`benchmarks/models/run.py --models ...`): the test suite's time stays
# with ZOO. They found a dominance error in braze-combo-kernels (BART), extern
# calls (average pooling, F.pad, vector norms) and concatenations read by
# select chains (DenseNet), a BLAS call in an inactive parallel region
# (Mixtral's router), and soft-capped attention scores (Gemma 2).
MORE = [
    ZooModel("resnet50", "vision", _vision("resnet50")),
    ZooModel("mobilenet_v2", "vision", _vision("mobilenet_v2")),
    ZooModel("regnet_y_400mf", "vision", _vision("regnet_y_400mf")),
    ZooModel("shufflenet_v2_x1_0", "vision", _vision("shufflenet_v2_x1_0")),
    ZooModel("squeezenet1_1", "vision", _vision("squeezenet1_1")),
    ZooModel("densenet121", "vision", _vision("densenet121")),
    ZooModel("mnasnet1_0", "vision", _vision("mnasnet1_0")),
    ZooModel("googlenet", "vision", _vision("googlenet", aux_logits=False, init_weights=False)),
    ZooModel("swin_t", "vision", _vision("swin_t")),
    ZooModel("maxvit_t", "vision", _vision("maxvit_t")),
    ZooModel("gpt_neox", "text", _text("GPTNeoXConfig", "GPTNeoXModel")),
    ZooModel("phi", "text", _text("PhiConfig", "PhiModel")),
    ZooModel("gemma", "text", _text("GemmaConfig", "GemmaModel")),
    ZooModel("gemma2", "text", _text("Gemma2Config", "Gemma2Model")),
    ZooModel("falcon", "text", _text("FalconConfig", "FalconModel")),
    ZooModel("mixtral", "text", _text("MixtralConfig", "MixtralModel")),
    ZooModel("opt", "text", _text("OPTConfig", "OPTModel")),
    ZooModel("bloom", "text", _text("BloomConfig", "BloomModel")),
    ZooModel("deberta_v2", "text", _text("DebertaV2Config", "DebertaV2Model")),
    ZooModel("electra", "text", _text("ElectraConfig", "ElectraModel")),
    ZooModel("bart", "text", _text("BartConfig", "BartModel")),
]

BY_NAME = {model.name: model for model in ZOO + MORE}


@dataclass
class Decoder:
    """A causal language model that generates with transformers' own KV
    cache (`DynamicCache`): the prompt's forward pass, then one token per
    step, the cache one longer each time (under torch.compile: a graph for
    the prompt, one for the first step, and, when Dynamo recompiles at the
    next length, one with a symbolic past length for every step after)."""

    name: str
    config_name: str
    model_name: str

    def make(self, size: Size = SMALL, seed: int = 0, **config_fields):
        """(model, prompt ids [batch, sequence]) with random weights;
        `config_fields` override the size's (a real vocabulary, say)."""
        _import_torchvision()  # transformers imports it when it is installed
        import transformers

        torch.manual_seed(seed)
        fields = {**_TEXT_FIELDS[self.config_name](size), **config_fields}
        config = getattr(transformers, self.config_name)(**fields, use_cache=True)
        model = getattr(transformers, self.model_name)(config)
        _randomize_constant_weights(model)
        return model.eval(), torch.randint(1, 100, (size.batch, size.sequence))


def decode(forward: Callable, prompt: torch.Tensor, tokens: torch.Tensor,
           seconds: list[float] | None = None) -> list[torch.Tensor]:
    """The prompt [batch, sequence], then each column of `tokens` [batch,
    steps] as the next token, through `forward(ids, cache)` (the logits
    [batch, length, vocab], filling a DynamicCache). Fixed tokens, rather
    than each step's argmax, so that two engines whose logits differ in the
    last bit still decode the same sequence. Returns each call's last
    logits; `seconds`, when given, gets each call's wall-clock time."""
    from transformers import DynamicCache

    cache = DynamicCache()
    inputs = [prompt] + [tokens[:, step : step + 1] for step in range(tokens.shape[1])]
    outputs = []
    with torch.no_grad():
        for ids in inputs:
            started = time.perf_counter()
            outputs.append(forward(ids, cache)[:, -1])
            if seconds is not None:
                seconds.append(time.perf_counter() - started)
    return outputs


def causal_forward(model: torch.nn.Module) -> Callable:
    """The logits of `model` for `ids` after what `cache` holds."""
    return lambda ids, cache: model(input_ids=ids, past_key_values=cache, use_cache=True).logits


DECODERS = [
    Decoder("gpt2", "GPT2Config", "GPT2LMHeadModel"),
    Decoder("llama", "LlamaConfig", "LlamaForCausalLM"),
    Decoder("qwen2", "Qwen2Config", "Qwen2ForCausalLM"),
]
