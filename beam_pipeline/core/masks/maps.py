"""Label maps: how the values a corpus stores become the class ids that are written (docs/validation.md).

* A **value map** (``--label_map``) lists source mask values (0..65535: grey, palette-index or 16-bit
  masks, PNG or TIFF) and the class each becomes. For classification it lists source labels (listing
  labels, class folder names) instead.
* A **colour map** (``--color_map``) lists exact ``(r, g, b)`` colours of RGB, RGBA and palette masks.
* ``--reduce_zero_label`` turns 0 into the ignore label and ``v`` into ``v - 1`` (ADE20K, LoveDA); the
  ignore label's own value stays ignore. It applies first, and a ``--label_map`` then maps what it gives.

A class is a class id (0..num_classes-1), a class name, or ``ignore``. A source value that the map does
not list is *unmapped*: the pair is rejected, naming the values, unless ``--unmapped ignore``.

Map files are CSV (header ``value,class`` or ``r,g,b,class``, an optional ``name`` column naming the
source value, ``#`` comment lines) or, for value maps, a JSON object ``{"value": class}``. Maps shipped
with the package (:data:`SHIPPED`, files in ``shipped/``) are named instead of a path.

Pure: text in, frozen records out. The launcher reads the files (launcher/maps.py); pixels are converted
by core/masks/values.py and core/masks/colors.py.
"""

import csv
import dataclasses
import importlib.resources
import io
import json
from typing import Dict, List, Optional, Sequence, Tuple

IGNORE = -1                   # the class of a source value that becomes the ignore label
IGNORE_WORD = "ignore"
VALUES, COLORS, IDENTITY, LABELS = "values", "colors", "identity", "labels"
REJECT, IGNORE_UNMAPPED = "reject", "ignore"       # --unmapped
MAX_VALUE = 65535             # the largest source mask value a value map may list (16-bit masks)


class MapError(ValueError):
    """A map file that cannot be used; the message is one line naming the file and the line."""


@dataclasses.dataclass(frozen=True)
class MaskMap:
    """How a segmentation mask's stored values become class ids (None in Limits: they already are)."""
    kind: str                                     # IDENTITY (only --reduce_zero_label), VALUES or COLORS
    entries: Tuple[Tuple[int, int], ...] = ()     # (source value or 0xRRGGBB colour, class id or IGNORE), sorted
    names: Tuple[Tuple[int, str], ...] = ()       # the source values' names, when the map gives them
    reduce_zero_label: bool = False
    unmapped: str = REJECT
    source: str = ""                              # how the user named it, for messages: "--label_map cityscapes"
    sha256: str = ""                              # of the map file's bytes (the verdict cache's fingerprint)


@dataclasses.dataclass(frozen=True)
class LabelMap:
    """Classification: how a source label (listing label, folder name) becomes a class id."""
    entries: Tuple[Tuple[str, int], ...]          # (label as given, class id or IGNORE)
    unmapped: str = REJECT
    source: str = ""
    sha256: str = ""

    def lookup(self, label: Optional[str]) -> Optional[int]:
        """The class id, IGNORE, or None when the map does not list ``label``."""
        text = "" if label is None else str(label).strip()
        return dict(self.entries).get(text)


@dataclasses.dataclass(frozen=True)
class MapRow:
    line: int
    source: object            # int (values), (r, g, b) (colours) or str (labels)
    cls: str                  # the class cell as written
    name: str = ""


@dataclasses.dataclass(frozen=True)
class ShippedMap:
    """A map shipped with the package, named on the command line instead of a file."""
    name: str
    option: str               # "--label_map" or "--color_map"
    file: str                 # in shipped/
    class_names: Tuple[str, ...]          # in id order; () takes them from the file's class column, in order
    description: str


SHIPPED: Dict[str, ShippedMap] = {m.name: m for m in (
    ShippedMap("cityscapes", "--label_map", "cityscapes.csv",
               ("road", "sidewalk", "building", "wall", "fence", "pole", "traffic light", "traffic sign",
                "vegetation", "terrain", "sky", "person", "rider", "car", "truck", "bus", "train", "motorcycle",
                "bicycle"),
               "Cityscapes *_gtFine_labelIds.png (ids 0..33) to the 19 trainIds; the other ids are ignored "
               "(cityscapesScripts' labels.py)"),
    ShippedMap("camvid", "--color_map", "camvid.csv",
               ("Sky", "Building", "Pole", "Road", "Pavement", "Tree", "SignSymbol", "Fence", "Car", "Pedestrian",
                "Bicyclist"),
               "CamVid's 32 RGB label colours to the 11 classes of SegNet; Void (0,0,0) is ignored"),
    ShippedMap("binary255", "--label_map", "binary255.csv", ("background", "foreground"),
               "binary masks stored as 0/255: 0 is background (0), 255 is foreground (1)"),
    ShippedMap("voc", "--label_map", "voc.csv",
               ("background", "aeroplane", "bicycle", "bird", "boat", "bottle", "bus", "car", "cat", "chair", "cow",
                "diningtable", "dog", "horse", "motorbike", "person", "pottedplant", "sheep", "sofa", "train",
                "tvmonitor"),
               "PASCAL VOC 2012 palette masks: indices 0..20 are the 21 classes, 255 (void) is ignored"),
    ShippedMap("pet", "--label_map", "pet.csv", ("background", "pet"),
               "Oxford-IIIT Pet trimaps: 1 pet, 2 background, 3 the border (not classified) ignored"),
    ShippedMap("ade20k", "--label_map", "ade20k.csv", (),
               "ADE20K (ADEChallengeData2016) annotations: 1..150 are the 150 classes (named as objectInfo150), "
               "0 (other objects) is ignored"),
    ShippedMap("coco", "--label_map", "coco.csv", (),
               "COCO instances as --layout coco draws them: 0 background, the 80 thing category ids (1..90) their "
               "classes in id order, 255 (crowds) ignored"),
    ShippedMap("coco_panoptic", "--label_map", "coco_panoptic.csv", (),
               "COCO panoptic as --layout coco_panoptic draws it: the 133 category ids (1..200) their classes in id "
               "order, 255 (unlabeled, crowds) ignored"),
    ShippedMap("sa1b", "--label_map", "sa1b.csv", ("background", "foreground"),
               "SA-1B as --layout sa1b draws it: 0 background, 1 foreground (any annotated pixel)"),
)}


def shipped_help(option: str) -> str:
    """``cityscapes (Cityscapes ...), ...``: the shipped maps of one option, for --help."""
    return "; ".join(f"{m.name}: {m.description}" for m in SHIPPED.values() if m.option == option)


def shipped_bytes(name: str) -> bytes:
    return importlib.resources.files(__package__).joinpath("shipped", SHIPPED[name].file).read_bytes()


# --------------------------------------------------------------------------
# Parsing
# --------------------------------------------------------------------------
def parse_rows(data: bytes, kind: str, where: str) -> List[MapRow]:
    """The rows of a map file (CSV, or a JSON object for value and label maps); raises MapError."""
    try:
        text = data.decode("utf-8-sig")
    except UnicodeDecodeError:
        raise MapError(f"{where} is not UTF-8 text") from None
    if text.lstrip().startswith("{"):
        if kind == COLORS:
            raise MapError(f"{where}: a colour map is a CSV file with the header r,g,b,class")
        return _json_rows(text, kind, where)
    return _csv_rows(text, kind, where)


def _json_rows(text: str, kind: str, where: str) -> List[MapRow]:
    try:
        table = json.loads(text)
    except json.JSONDecodeError as error:
        raise MapError(f"{where}: not valid JSON ({error})") from None
    if not isinstance(table, dict):
        raise MapError(f'{where}: a JSON map is an object {{"value": class, ...}}')
    return [MapRow(0, _source(key, kind, where, 0), _cell(value)) for key, value in table.items()]


def _cell(value) -> str:
    return str(value).strip() if not isinstance(value, bool) else str(value)


def _csv_rows(text: str, kind: str, where: str) -> List[MapRow]:
    lines = [(number, line) for number, line in enumerate(text.splitlines(), start=1)
             if line.strip() and not line.lstrip().startswith("#")]
    if not lines:
        raise MapError(f"{where} is empty")
    reader = csv.reader(io.StringIO("\n".join(line for _, line in lines)))
    rows = list(reader)
    header = [cell.strip().lower() for cell in rows[0]]
    wanted = ["r", "g", "b", "class"] if kind == COLORS else ["value", "class"]
    if header[:len(wanted)] != wanted or header[len(wanted):] not in ([], ["name"]):
        raise MapError(f"{where} line {lines[0][0]}: the header must be {','.join(wanted)} (and optionally name), "
                       f"got {','.join(header)}")
    out = []
    for (number, _), cells in zip(lines[1:], rows[1:]):
        cells = [cell.strip() for cell in cells]
        if len(cells) not in (len(wanted), len(wanted) + 1):
            raise MapError(f"{where} line {number}: expected {len(header)} values, got {len(cells)}")
        if kind == COLORS:
            source = tuple(_integer(cell, 0, 255, f"{where} line {number}: {channel}")
                           for channel, cell in zip("rgb", cells[:3]))
        else:
            source = _source(cells[0], kind, where, number)
        out.append(MapRow(number, source, cells[len(wanted) - 1], cells[len(wanted)] if len(cells) > len(wanted)
                          else ""))
    if not out:
        raise MapError(f"{where} lists no values")
    return out


def _source(text: str, kind: str, where: str, line: int):
    at = f"{where} line {line}" if line else where
    if kind == LABELS:
        if not str(text).strip():
            raise MapError(f"{at}: an empty label")
        return str(text).strip()
    return _integer(text, 0, MAX_VALUE, f"{at}: value")


def _integer(text: str, low: int, high: int, what: str) -> int:
    try:
        value = int(str(text).strip())
    except ValueError:
        raise MapError(f"{what} {text!r} is not an integer") from None
    if not low <= value <= high:
        raise MapError(f"{what} {value} is outside {low}..{high}")
    return value


# --------------------------------------------------------------------------
# Classes
# --------------------------------------------------------------------------
def names_in_map(rows: Sequence[MapRow]) -> Tuple[str, ...]:
    """The class names the rows use (not ids, not ``ignore``), in the order they first appear."""
    seen: List[str] = []
    for row in rows:
        if row.cls.lower() != IGNORE_WORD and not _is_int(row.cls) and row.cls not in seen:
            seen.append(row.cls)
    return tuple(seen)


def _is_int(text: str) -> bool:
    try:
        int(text)
    except ValueError:
        return False
    return True


def resolve_classes(rows: Sequence[MapRow], class_names: Sequence[str], num_classes: int,
                    where: str) -> List[Tuple[object, int]]:
    """``(source, class id or IGNORE)`` of each row; raises MapError on an unknown class or a value listed
    twice."""
    out, seen = [], {}
    for row in rows:
        at = f"{where} line {row.line}" if row.line else where
        if row.source in seen:
            raise MapError(f"{at}: {_describe(row.source)} is listed twice (first on line {seen[row.source]})")
        seen[row.source] = row.line
        out.append((row.source, _class_id(row.cls, class_names, num_classes, at)))
    return out


def _class_id(cell: str, class_names: Sequence[str], num_classes: int, at: str) -> int:
    if cell.lower() == IGNORE_WORD:
        return IGNORE
    if cell in class_names:
        return list(class_names).index(cell)
    if _is_int(cell):
        value = int(cell)
        if 0 <= value < num_classes:
            return value
        raise MapError(f"{at}: class {value} is outside 0..{num_classes - 1} (--num_classes {num_classes})")
    known = ", ".join(class_names[:12]) + (", ..." if len(class_names) > 12 else "")
    raise MapError(f"{at}: class {cell!r} is neither a class id, a class name ({known or 'none given'}) nor ignore")


def _describe(source) -> str:
    if isinstance(source, tuple):
        return f"colour {color_text(pack_color(*source))}"
    return f"value {source!r}"


def pack_color(r: int, g: int, b: int) -> int:
    return (r << 16) | (g << 8) | b


def color_text(packed: int) -> str:
    """``(128,64,128)``: how colours are named in details, the summary and the report."""
    return f"({packed >> 16},{(packed >> 8) & 255},{packed & 255})"


def mask_map(kind: str, resolved: Sequence[Tuple[object, int]], rows: Sequence[MapRow], *,
             reduce_zero_label: bool, unmapped: str, source: str, sha256: str) -> MaskMap:
    """The MaskMap of resolved rows (``kind`` VALUES or COLORS)."""
    key = (lambda s: pack_color(*s)) if kind == COLORS else int
    entries = tuple(sorted((key(src), cls) for src, cls in resolved))
    names = tuple(sorted((key(row.source), row.name) for row in rows if row.name))
    return MaskMap(kind, entries, names, reduce_zero_label, unmapped, source, sha256)


def label_map(resolved: Sequence[Tuple[object, int]], *, unmapped: str, source: str, sha256: str) -> LabelMap:
    return LabelMap(tuple(sorted((str(src), cls) for src, cls in resolved)), unmapped, source, sha256)


def source_text(mask: Optional[MaskMap], value: int) -> str:
    """A source value as the summary and details name it: ``7``, ``(128,64,128)``; with its name if known."""
    text = color_text(value) if mask is not None and mask.kind == COLORS else str(value)
    name = dict(mask.names).get(value) if mask is not None else None
    return f"{text} {name}" if name else text
