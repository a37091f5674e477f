"""A structured answer's skeleton on a canvas: `CanvasLayout` and `layout_for_answer`.

`CanvasLayout.build` lays a `Template` (engines.skeleton) out on token positions: the skeleton's
tokens at fixed positions and `capacity` positions per slot (an enum: its longest choice + 1), each
slot's positions filled with the filler token (EOS) until denoised. Reading a denoised canvas back
(`read`, `pieces`) takes each slot's tokens up to its first filler; a slot with no filler left may
have been cut (overflowed), and serving lays the canvas out again with that slot wider. Slots an
earlier canvas committed can be laid out `known` (fixed, not denoised). `layout_for_answer` gives a
training canvas: the slots as wide as serving would make them for that answer, and its target.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from engines.skeleton import MAX_CAPACITY, Fixed, Slot, Template, slot_values, slots


@dataclass
class SlotSpan:
    slot: Slot
    start: int  # first canvas position of the slot
    capacity: int  # positions it has (an enum: its longest choice's tokens + 1)
    choices: list[list[int]] = field(default_factory=list)  # enum: token ids of each choice
    known: bool = False  # its tokens were laid out given (a value an earlier canvas committed): fixed, not denoised

    @property
    def end(self) -> int:
        return self.start + self.capacity


@dataclass
class CanvasLayout:
    """A template on token positions: `tokens` holds the skeleton's ids (filler at slot positions)."""

    tokens: list[int]  # (C,) skeleton ids; filler in the slots and after the answer
    fixed: list[bool]  # (C,) True where the skeleton fixes the token
    spans: list[SlotSpan]
    filler: int  # the token a slot writes after its value (EOS)
    length: int  # positions the answer takes, its final EOS included; tokens[length:] is padding

    @classmethod
    def build(cls, template: Template, encode, filler: int, widen: dict[str, int] | None = None,
              size: int | None = None, known: dict[str, list[int]] | None = None) -> "CanvasLayout":
        """Lay `template` out with `encode` (text -> token ids); `widen` gives some slots (by path) a
        larger capacity; `known` gives some slots their tokens (value and filler, as an earlier canvas
        committed them), laid out fixed; the canvas is padded with fixed filler to `size` when given."""
        widen, known = widen or {}, known or {}
        tokens: list[int] = []
        fixed: list[bool] = []
        spans: list[SlotSpan] = []
        for part in template:
            if isinstance(part, Fixed):
                ids = encode(part.text)
                tokens += ids
                fixed += [True] * len(ids)
                continue
            choices = [encode(c) for c in part.choices]
            if part.path in known:
                given = known[part.path]
                spans.append(SlotSpan(part, len(tokens), len(given), choices, known=True))
                tokens += given
                fixed += [True] * len(given)
                continue
            capacity = max(map(len, choices)) + 1 if choices else part.capacity
            capacity = max(capacity, widen.get(part.path, 0))
            spans.append(SlotSpan(part, len(tokens), capacity, choices))
            tokens += [filler] * capacity
            fixed += [False] * capacity
        tokens.append(filler)  # the end of the answer
        fixed.append(True)
        length = len(tokens)
        if size is not None and size > length:
            tokens += [filler] * (size - length)
            fixed += [True] * (size - length)
        return cls(tokens, fixed, spans, filler, length)

    def read(self, canvas: list[int]) -> tuple[list[int], list[str]]:
        """The answer's token ids from a denoised canvas (each slot up to its first filler, the
        skeleton as laid out), and the paths of slots whose value filled the whole slot."""
        pieces = self.pieces(canvas)
        overflowed = [span.slot.path for span, _, full in pieces if span is not None and full]
        return [t for _, ids, _ in pieces for t in ids], overflowed

    def pieces(self, canvas: list[int]) -> list[tuple[SlotSpan | None, list[int], bool]]:
        """The answer from a denoised canvas piece by piece, in order: (None, skeleton tokens, False)
        for fixed text and (span, value tokens, overflowed) for a slot: its tokens up to its first
        filler; overflowed when the value filled the whole slot (it may have been cut; not enums)."""
        out: list[tuple[SlotSpan | None, list[int], bool]] = []
        at = 0
        for span in self.spans:
            if span.start > at:
                out.append((None, self.tokens[at : span.start], False))
            value = canvas[span.start : span.end]
            full = self.filler not in value
            if not full:
                value = value[: value.index(self.filler)]
            out.append((span, value, full and span.slot.kind != "enum"))
            at = span.end
        if self.length - 1 > at:
            out.append((None, self.tokens[at : self.length - 1], False))  # the rest of the skeleton, without the final EOS
        return out

    def target(self, values: dict[str, str], encode) -> list[int] | None:
        """The canvas a model should denoise to: each slot's value tokens (`values` by slot path,
        as `slot_values` writes them), then filler. None when a value does not fit its slot."""
        out = list(self.tokens)
        for span in self.spans:
            ids = encode(values[span.slot.path])
            if len(ids) >= span.capacity and span.slot.kind != "enum":
                return None  # serving would see it overflow and widen the slot
            out[span.start : span.start + len(ids)] = ids
        return out


def layout_for_answer(template: Template, obj, encode, filler: int, size: int | None = None) -> tuple[CanvasLayout, list[int]] | None:
    """(layout, clean canvas) for an answer `obj` under `template`, its slots as wide as serving would
    make them on the attempt that fits (doubled from the schema's capacity), or None if it cannot fit."""
    values = slot_values(template, obj)
    widen: dict[str, int] = {}
    for slot in slots(template):
        if slot.kind in ("string", "integer", "number", "json"):
            n, capacity = len(encode(values[slot.path])), slot.capacity
            while n >= capacity and capacity < MAX_CAPACITY:
                capacity = min(MAX_CAPACITY, 2 * capacity)
            if n >= capacity:
                return None
            if capacity != slot.capacity:
                widen[slot.path] = capacity
    layout = CanvasLayout.build(template, encode, filler, widen, size)
    if size is not None and layout.length > size:
        return None
    canvas = layout.target(values, encode)
    return None if canvas is None else (layout, canvas)
