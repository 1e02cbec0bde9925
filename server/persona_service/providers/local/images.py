"""Portraits for the deterministic local provider: real PNGs drawn with Pillow.

Part of the DEFAULT model provider (no network, no weights); not a test
double. A portrait is a pure function of its inputs: the same persona traits,
prompt and style give the same PNG, byte for byte (Pillow's PNG encoder is
deterministic for a given image), and an edit is a real transform of the
source image chosen by the words of the instruction:

* colours: "background <colour>" repaints the background; "<colour> hair",
  "<colour> shirt" repaint those; "warmer", "cooler" or a bare colour tint;
* "black and white" / "grayscale" / "monochrome", "sepia";
* "blur" / "soften", "sharpen";
* "mirror" / "flip";
* "zoom" / "crop" / "closer" (the centre 75%), "zoom out" / "wider";
* "brighter" / "lighter", "darker"; "more contrast";
* accessories: "glasses", "hat", "earrings", "scarf", "moustache", "freckles".

An instruction none of these match still changes the image (a faint tint
seeded by its words) so every edit is a new image.
"""

from __future__ import annotations

import io
import re
from collections.abc import Callable

from PIL import Image, ImageChops, ImageDraw, ImageEnhance, ImageFilter, ImageOps

from persona_service.kernel.models import ImagePrompt
from persona_service.providers.local.seed import _Seed

SIZE = 512
COLOURS = {
    "red": (200, 40, 40), "orange": (235, 130, 30), "yellow": (235, 205, 50), "green": (50, 150, 70),
    "teal": (30, 140, 140), "blue": (40, 90, 200), "navy": (20, 30, 90), "purple": (120, 60, 170),
    "pink": (230, 120, 170), "brown": (110, 70, 40), "black": (20, 20, 20), "white": (245, 245, 245),
    "gray": (128, 128, 128), "grey": (128, 128, 128), "gold": (212, 175, 55), "silver": (190, 190, 200),
    "blonde": (230, 200, 120),
}
SKIN = ((255, 224, 189), (241, 194, 125), (224, 172, 105), (198, 134, 66), (141, 85, 36), (92, 56, 31))
BACKGROUNDS = ((232, 222, 210), (205, 225, 235), (220, 235, 215), (240, 215, 220), (215, 210, 235), (60, 60, 80))
HAIR = ((30, 25, 20), (90, 60, 30), (200, 160, 90), (150, 50, 30), (120, 120, 120), (60, 40, 90))
SHIRTS = ((40, 90, 200), (200, 40, 40), (50, 150, 70), (120, 60, 170), (235, 130, 30), (30, 30, 30))
STYLES = ("flat", "sketch", "watercolor", "pop", "noir")
# Where the painted parts are (for recolouring them): a point inside each.
_BACKGROUND_AT = (4, 4)
_HAIR_AT = (SIZE // 2, 80)
_SHIRT_AT = (SIZE // 2, SIZE - 30)


def render_portrait(spec: ImagePrompt) -> bytes:
    seed = _Seed(spec.subject, *spec.traits, spec.prompt)
    image = Image.new("RGB", (SIZE, SIZE), seed.pick("bg", BACKGROUNDS))
    draw = ImageDraw.Draw(image)
    cx = SIZE // 2
    skin, hair, shirt = seed.pick("skin", SKIN), seed.pick("hair", HAIR), seed.pick("shirt", SHIRTS)
    for word, colour in COLOURS.items():  # the prompt may name colours: "in a green shirt", "red hair"
        if re.search(rf"\b{word}\s+(shirt|top|jacket)\b", spec.prompt, re.I):
            shirt = colour
        if re.search(rf"\b{word}\s+hair\b", spec.prompt, re.I):
            hair = colour
    draw.ellipse((cx - 170, 380, cx + 170, 700), fill=shirt)  # shoulders
    draw.rectangle((cx - 35, 300, cx + 35, 400), fill=skin)  # neck
    width = 100 + seed.number("face") % 30
    if sum(abs(a - b) for a, b in zip(hair, skin)) < 90:  # hair never blends into the face
        hair = HAIR[(HAIR.index(hair) + 3) % len(HAIR)] if hair in HAIR else (30, 25, 20)
    draw.ellipse((cx - width - 16, 60, cx + width + 16, 270), fill=hair)  # hair, behind the face
    draw.ellipse((cx - width, 120, cx + width, 340), fill=skin)  # face
    eye_y, gap = 200 + seed.number("eyes") % 20, 38 + seed.number("gap") % 12
    eye = seed.pick("iris", ((60, 40, 20), (40, 90, 160), (50, 120, 60), (90, 90, 90)))
    for x in (cx - gap, cx + gap):
        draw.ellipse((x - 14, eye_y - 9, x + 14, eye_y + 9), fill=(250, 250, 250))
        draw.ellipse((x - 7, eye_y - 7, x + 7, eye_y + 7), fill=eye)
    mouth = 280 + seed.number("mouth") % 12
    if seed.number("smile") % 3:
        draw.arc((cx - 40, mouth - 25, cx + 40, mouth + 15), 20, 160, fill=(150, 50, 50), width=5)
    else:
        draw.line((cx - 30, mouth, cx + 30, mouth), fill=(150, 50, 50), width=5)
    for i, trait in enumerate(spec.traits[:3]):  # a badge per leading trait, coloured by it
        x = 40 + 36 * i
        draw.ellipse((x, SIZE - 60, x + 26, SIZE - 34), fill=_Seed(trait).pick("c", tuple(COLOURS.values())))
    return encode(_style(image, spec.style if spec.style in STYLES else "flat"))


def edit_portrait(png: bytes, instruction: str) -> bytes:
    image = decode(png)
    text = instruction.lower()
    applied = False
    for pattern, transform in _EDITS:
        match = re.search(pattern, text)
        if match:
            image = transform(image, match)
            applied = True
    if not applied:  # still a new image: a faint tint seeded by the instruction
        tint = _Seed(text).pick("tint", tuple(COLOURS.values()))
        image = Image.blend(image, Image.new("RGB", image.size, tint), 0.12)
    return encode(image)


def encode(image: Image.Image) -> bytes:
    out = io.BytesIO()
    image.save(out, format="PNG", optimize=False, compress_level=6)
    return out.getvalue()


def decode(png: bytes) -> Image.Image:
    with Image.open(io.BytesIO(png)) as opened:
        return opened.convert("RGB")


def _style(image: Image.Image, style: str) -> Image.Image:
    if style == "sketch":
        return ImageOps.invert(ImageOps.grayscale(image).filter(ImageFilter.FIND_EDGES)).convert("RGB")
    if style == "watercolor":
        return image.filter(ImageFilter.GaussianBlur(3)).filter(ImageFilter.SMOOTH_MORE)
    if style == "pop":
        return ImageOps.posterize(ImageEnhance.Color(image).enhance(1.8), 3)
    if style == "noir":
        return ImageEnhance.Contrast(ImageOps.grayscale(image).convert("RGB")).enhance(1.6)
    return image


def _fill(at: tuple[int, int], colour_group: int = 1) -> Callable[[Image.Image, re.Match[str]], Image.Image]:
    """Repaint the part of the image painted in the colour found at `at`
    (a mask over the whole image, in C: a flood fill in Python took 0.6 s)."""

    def transform(image: Image.Image, match: re.Match[str]) -> Image.Image:
        found = Image.new("RGB", image.size, image.getpixel(at))
        red, green, blue = ImageChops.difference(image, found).split()
        distance = ImageChops.lighter(ImageChops.lighter(red, green), blue)  # the largest channel difference
        mask = distance.point(lambda v: 255 if v < 16 else 0)
        image.paste(COLOURS[match.group(colour_group)], (0, 0, *image.size), mask)
        return image

    return transform


def _tint(image: Image.Image, match: re.Match[str]) -> Image.Image:
    colour = {"warmer": (255, 150, 60), "cooler": (60, 120, 255)}.get(match.group(1)) or COLOURS[match.group(1)]
    return Image.blend(image, Image.new("RGB", image.size, colour), 0.25)


def _zoom(image: Image.Image, match: re.Match[str]) -> Image.Image:
    if match.group(0).startswith(("zoom out", "wider")):
        canvas = Image.new("RGB", image.size, image.getpixel((0, 0)))
        canvas.paste(image.resize((SIZE * 3 // 4, SIZE * 3 // 4)), (SIZE // 8, SIZE // 8))
        return canvas
    m = SIZE // 8
    return image.crop((m, m, SIZE - m, SIZE - m)).resize(image.size)


def _accessory(image: Image.Image, match: re.Match[str]) -> Image.Image:
    draw, cx, item = ImageDraw.Draw(image), SIZE // 2, match.group(1)
    if item == "glasses":
        for x in (cx - 42, cx + 42):
            draw.ellipse((x - 28, 185, x + 28, 225), outline=(20, 20, 20), width=5)
        draw.line((cx - 14, 205, cx + 14, 205), fill=(20, 20, 20), width=5)
    elif item == "hat":
        draw.rectangle((cx - 150, 100, cx + 150, 118), fill=(30, 30, 40))
        draw.rectangle((cx - 95, 20, cx + 95, 104), fill=(30, 30, 40))
    elif item == "earrings":
        for x in (cx - 118, cx + 118):
            draw.ellipse((x - 8, 255, x + 8, 271), fill=COLOURS["gold"])
    elif item == "scarf":
        draw.rectangle((cx - 90, 330, cx + 90, 372), fill=COLOURS["red"])
    elif item in ("moustache", "mustache"):
        draw.chord((cx - 45, 250, cx + 45, 285), 180, 360, fill=(50, 35, 25))
    elif item == "freckles":
        for i in range(14):
            draw.point([(cx - 70 + (i * 37) % 140, 235 + (i * 11) % 25)], fill=(150, 90, 60))
            draw.ellipse((cx - 72 + (i * 37) % 140, 233 + (i * 11) % 25, cx - 68 + (i * 37) % 140,
                          237 + (i * 11) % 25), fill=(150, 90, 60))
    return image


_COLOUR = "(" + "|".join(COLOURS) + ")"
_EDITS = (
    (rf"background (?:to |in |of )?{_COLOUR}|{_COLOUR} background", lambda im, m: _fill(
        _BACKGROUND_AT, 1 if m.group(1) else 2)(im, m)),
    (rf"{_COLOUR} hair|hair (?:to |in )?{_COLOUR}", lambda im, m: _fill(_HAIR_AT, 1 if m.group(1) else 2)(im, m)),
    (rf"{_COLOUR} (?:shirt|top|jacket)|(?:shirt|top|jacket) (?:to |in )?{_COLOUR}",
     lambda im, m: _fill(_SHIRT_AT, 1 if m.group(1) else 2)(im, m)),
    (r"\b(glasses|hat|earrings|scarf|moustache|mustache|freckles)\b", _accessory),
    (r"\b(black and white|black & white|grayscale|greyscale|monochrome)\b",
     lambda im, m: ImageOps.grayscale(im).convert("RGB")),
    (r"\bsepia\b", lambda im, m: ImageOps.colorize(ImageOps.grayscale(im), (60, 40, 20), (240, 220, 180))),
    (r"\b(blur|blurry|soften|softer)\b", lambda im, m: im.filter(ImageFilter.GaussianBlur(4))),
    (r"\bsharpen\b", lambda im, m: im.filter(ImageFilter.SHARPEN)),
    (r"\b(mirror|flip)\b", lambda im, m: ImageOps.mirror(im)),
    (r"\b(zoom out|wider|zoom in|zoom|crop|closer)\b", _zoom),
    (r"\b(brighter|brighten|lighter)\b", lambda im, m: ImageEnhance.Brightness(im).enhance(1.3)),
    (r"\b(darker|darken)\b", lambda im, m: ImageEnhance.Brightness(im).enhance(0.7)),
    (r"\bmore contrast\b", lambda im, m: ImageEnhance.Contrast(im).enhance(1.5)),
    (r"\b(?:more |make it |tint )?(warmer|cooler)\b", _tint),
    (rf"^(?:make it |more |tint (?:it )?)?{_COLOUR}$", _tint),
)
