"""Nested inputs and outputs of a compiled model (tuples, lists, dicts of
tensors), flattened and rebuilt by a plan prepared from the captured
pytree spec: a call checks each container's type and length (a dict's
keys) and takes its items, without pytree's generic node lookup and spec
comparison. Leaves are not looked at here: the program checks every
flat argument."""

from __future__ import annotations

from typing import Any

_CONTAINERS = (tuple, list, dict)


class TreePlan:
    """The plan of one pytree spec made of tuples, lists, dicts and
    leaves (`of` returns None for any other node type: namedtuples,
    dataclasses and other registered nodes go through pytree)."""

    def __init__(self, kind: type | None, keys: tuple = (), children: tuple = ()):
        self.kind = kind  # None: a leaf
        self.keys = keys
        self.children = children
        # A container of leaves only: taken whole.
        self.flat = all(child.kind is None for child in children)

    @classmethod
    def of(cls, spec) -> "TreePlan | None":
        if spec.is_leaf():
            return cls(None)
        if spec.type not in _CONTAINERS:
            return None
        children = tuple(cls.of(child) for child in spec.children())
        if any(child is None for child in children):
            return None
        keys = tuple(spec.context) if spec.type is dict else ()
        if spec.type is dict and (len(set(keys)) != len(keys) or len(keys) != len(children)):
            return None
        return cls(spec.type, keys, children)

    def flatten(self, value, flat: list) -> bool:
        """Appends `value`'s leaves to `flat`; False when its structure is
        not this plan's (then pytree says what differs)."""
        if self.kind is None:
            flat.append(value)
            return True
        if type(value) is not self.kind or len(value) != len(self.children):
            return False
        if self.kind is dict:
            if not self.children:
                return True
            if value.keys() != set(self.keys):
                return False
            value = [value[key] for key in self.keys]
        if self.flat:
            flat.extend(value)
            return True
        return all(child.flatten(item, flat) for child, item in zip(self.children, value))

    def flatten_call(self, args: tuple, kwargs: dict, flat: list) -> bool:
        """`flatten((args, kwargs), flat)`, for the spec of a call."""
        if self.kind is not tuple or len(self.children) != 2:
            return False
        return self.children[0].flatten(args, flat) and self.children[1].flatten(kwargs, flat)

    def build(self, leaves: list) -> Any:
        """The structure with `leaves` in order as its leaves."""
        return self._build(leaves, 0)[0]

    def _build(self, leaves: list, start: int) -> tuple[Any, int]:
        """The structure from `leaves[start:]`, and where its leaves end."""
        if self.kind is None:
            return leaves[start], start + 1
        if self.flat:
            end = start + len(self.children)
            items = leaves[start:end]
        else:
            items, end = [], start
            for child in self.children:
                item, end = child._build(leaves, end)
                items.append(item)
        if self.kind is dict:
            return dict(zip(self.keys, items)), end
        return (items if self.kind is list else tuple(items)), end
