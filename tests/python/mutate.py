"""A seeded mutator of MLIR text for robustness tests."""

import random

TOKENS = [
    "?", "0", "1", "-1", "9223372036854775807", "99999999999999999999", "x", "tensor<", ">",
    "{", "}", "(", ")", "[", "]", ",", ":", "->", "%", "%0", "@", "\"", "i1", "f16", "bf16",
    "index", "dims", "keepdim", "dim", "sizes", "braze.add", "braze.reshape", "braze.slice",
    "dense<", "tensor<*xf32>", "tensor<?x?xf32>", "// -----", "\n", "",
]


def mutate(text: str, rng: random.Random) -> str:
    """One random edit: truncate, delete, duplicate, swap lines or splice a token."""
    if not text:
        return rng.choice(TOKENS)
    kind = rng.randrange(5)
    i = rng.randrange(len(text))
    j = min(len(text), i + rng.randrange(1, 40))
    if kind == 0:
        return text[:i]
    if kind == 1:
        return text[:i] + text[j:]
    if kind == 2:
        return text[:j] + text[i:j] + text[j:]
    if kind == 3:
        lines = text.splitlines()
        a, b = rng.randrange(len(lines)), rng.randrange(len(lines))
        lines[a], lines[b] = lines[b], lines[a]
        return "\n".join(lines)
    return text[:i] + rng.choice(TOKENS) + text[j:]


def cases(sources: list[str], count: int, seed: int) -> list[str]:
    rng = random.Random(seed)
    out = []
    for _ in range(count):
        text = rng.choice(sources)
        for _ in range(rng.randrange(1, 4)):
            text = mutate(text, rng)
        out.append(text)
    return out
