"""One pair's work, from discovery to its shard record: discover, select, check, record.

No Beam transforms and no counters: ReadCorpus, SelectSubset, ValidatePairs and
WriteShards call these functions from their DoFns (which keep the Beam
counters), and ``--plan`` calls the same functions on a sample. Files are read
through Beam's filesystems, so local paths, gs:// and s3:// work alike.
"""

import dataclasses
import functools
import hashlib
from typing import Iterable, Iterator, List, Optional, Tuple, Union

from beam_pipeline.core import coco, paths, reasons, selection
from beam_pipeline.core.rerun import spill
from beam_pipeline.core.reasons import Rejection
from beam_pipeline.core.example import Pieces, frame_pieces, pair_example_pieces
from beam_pipeline.core.masks import drawn, stored_mask
from beam_pipeline.core.hashing import stable_hash
from beam_pipeline.core.pairing import pair_by_mask_path
from beam_pipeline.core.records import FILTERED, Outcome, PairRef, ValidPair, pack, unpack
from beam_pipeline.core.validation import Checked, checked_classification, checked_segmentation, record_files
from beam_pipeline.core.layouts import ANNOTATIONS, FOLDERS, LAYOUTS, SPLIT_FILES
from beam_pipeline.io import coco as io_coco, folders, listing, streams
from beam_pipeline.io import layouts as io_layouts
from beam_pipeline.io.cache import spill as spill_store
from beam_pipeline.stages.specs import CLASS_FOLDERS, LISTING, PAIRED, CheckSpec, DiscoverSpec, SelectSpec

Discovered = Union[PairRef, Outcome]
CLASS_FOLDER_GLOB = "*/*"      # one folder per class, relative to the input folder
SPLIT_FILE = "split_file"      # a layout's split file: one image stem a line (core/layouts.py)
IMAGES = "images"              # paired folders: the image globs ...
MASKS = "masks"                # ... and the mask glob, joined on the mask path
ANNOTATION_ARRAYS = {"annotation_images": io_coco.IMAGES, "annotation_items": io_coco.ANNOTATIONS}  # a COCO file's
MAX_EXAMPLES_SALT = "max_examples"
_FIRST_READ = 256 * 1024      # bytes asked for first when the size is not known: about one typical file
_CHUNK = 4 * 1024 * 1024      # the most asked for at once: later reads double up to it


# --------------------------------------------------------------------------
# Discover
# --------------------------------------------------------------------------
@dataclasses.dataclass(frozen=True)
class Source:
    """One unit of discovery: a listing file, a split file, or a glob relative to the input folder."""
    kind: str                  # LISTING | CLASS_FOLDERS | SPLIT_FILE | IMAGES | MASKS | ANNOTATION_ARRAYS
    pattern: str


def sources(spec: DiscoverSpec) -> Tuple[Source, ...]:
    """What to list for this kind of input (a layout's split files are listed here: a few files)."""
    if spec.input_format == LISTING:
        return (Source(LISTING, spec.input),)
    if spec.input_format == CLASS_FOLDERS:
        return (Source(CLASS_FOLDERS, CLASS_FOLDER_GLOB),)
    layout = LAYOUTS.get(spec.layout)
    if layout is not None and layout.family == SPLIT_FILES:
        return tuple(Source(SPLIT_FILE, relative) for relative in io_layouts.split_files(spec.root, layout))
    if layout is not None and layout.family == ANNOTATIONS:      # each file's two arrays, streamed apart
        return tuple(Source(kind, file.path) for file in spec.annotations.files for kind in ANNOTATION_ARRAYS)
    if layout is not None:
        return (tuple(Source(IMAGES, pattern) for pattern in layout.images)
                + tuple(Source(MASKS, pattern) for pattern in layout.masks.split("|")))
    return (tuple(Source(IMAGES, pattern) for pattern in spec.image_globs)
            + (Source(MASKS, paths.template_glob(spec.mask_template)),))


def fan_out(spec: DiscoverSpec, source: Source) -> List[Source]:
    """A glob with a wildcard folder as one Source per subfolder it matches (listed here, one delimited
    listing), so that the folders are matched apart, on every worker; a listing file, or a glob whose
    first wildcard is in the file name, as it is."""
    point = paths.fan_out_point(source.pattern) if source.kind not in (LISTING, *ANNOTATION_ARRAYS) else None
    if point is None:
        return [source]
    names = folders.subfolders(paths.join(spec.root, point[0]) if point[0] else spec.root)
    if names is None:
        return [source]
    return [Source(source.kind, pattern) for pattern in paths.fanned_out(source.pattern, names)]


def joins_on_mask_path(spec: DiscoverSpec) -> bool:
    """Paired folders, and the layouts of folders: images and masks are listed apart and meet on the mask path."""
    layout = LAYOUTS.get(spec.layout)
    return spec.input_format == PAIRED or (layout is not None and layout.family == FOLDERS)


def _mask_of(spec: DiscoverSpec):
    """The mask path of an image path (both relative to the root): the layout's rule, or --mask_template."""
    layout = LAYOUTS.get(spec.layout)
    return layout.mask_of if layout is not None else functools.partial(paths.render_template, spec.mask_template)


def discover_source(spec: DiscoverSpec, source: Source) -> Iterator:
    """A listing file or class folders: PairRef, or a rejected Outcome for a bad row.
    Paired folders: ``(mask path, image or mask path)`` to join with :func:`join_on_mask_path`."""
    if source.kind == LISTING:
        whole = listing.extent(source.pattern)
        return discover_listing_range(spec, whole.start, whole.stop, _claim_all)
    if source.kind == CLASS_FOLDERS:
        return folders.class_folder_pairs(spec.root, source.pattern)
    if source.kind == SPLIT_FILE:
        return io_layouts.split_file_pairs(spec.root, LAYOUTS[spec.layout], source.pattern)
    if source.kind in ANNOTATION_ARRAYS:
        return (((source.pattern, image_id), record) for image_id, record in io_coco.records(
            paths.join(spec.root, source.pattern), ANNOTATION_ARRAYS[source.kind], spec.annotations.kind))
    if source.kind == IMAGES:
        return folders.keyed_images(spec.root, source.pattern, _mask_of(spec))
    return folders.keyed_masks(spec.root, source.pattern)


def _claim_all(position: int) -> bool:
    return True


def discover_listing_range(spec: DiscoverSpec, start: int, stop: int, claim: listing.Claim) -> Iterator[Discovered]:
    """The pairs of the listing rows in ``[start, stop)`` (io/listing.py): a PairRef per good row, a rejected
    Outcome per row without the required values, with a path outside the root, or that is not a row."""
    return listing.listed_pairs(spec.input, start, stop, claim, spec.root, spec.task, spec.allow_outside_root)


def join_on_mask_path(spec: DiscoverSpec, mask_rel: str, image_rels: Iterable[str],
                      mask_rels: Iterable[str]) -> Iterator[Discovered]:
    """A PairRef per image whose mask exists; orphan images and orphan masks as rejected Outcomes. A layout whose
    paths give the split (Cityscapes' ``leftImg8bit/<split>/``) adds it to the pair's metadata; one whose masks are
    drawn (SA-1B's JSON files) its drawing."""
    layout = LAYOUTS.get(spec.layout)
    for item in pair_by_mask_path(mask_rel, image_rels, mask_rels, spec.root):
        split = layout.split_of(item.source_id) if layout is not None and isinstance(item, PairRef) else None
        item = dataclasses.replace(item, metadata=item.metadata + (("split", split),)) if split else item
        yield dataclasses.replace(item, drawing=drawn.SA1B_DRAWING) if isinstance(item, PairRef) and \
            layout is not None and layout.drawing == drawn.SA1B else item


def annotated(spec: DiscoverSpec, file: str, image_id, records) -> Discovered:
    """One image's records of the annotation file ``file`` (grouped by ReadAnnotations) as its pair, or an Outcome."""
    found = next(one for one in spec.annotations.files if one.path == file)
    return coco.annotated_pair(spec.root, spec.annotations, found, image_id, records)


def discover(spec: DiscoverSpec) -> Iterator[Discovered]:
    """Every input as ReadCorpus finds it, streamed (for --plan).

    Paired folders are joined image by image without listing the masks: a
    missing mask shows when the pair is checked (``missing_file``, where the
    pipeline reports ``orphan_image``), and masks without an image are not seen.
    """
    if spec.annotations is not None:
        yield from io_coco.listed_pairs(spec.root, spec.annotations)
        return
    for source in sources(spec):
        if source.kind == MASKS:
            continue
        for item in discover_source(spec, source):
            if source.kind == IMAGES:
                mask_rel, image_rel = item
                yield from join_on_mask_path(spec, mask_rel, [image_rel], [mask_rel])
            else:
                yield item


def with_drawings(spec: DiscoverSpec, packed_refs: List[bytes]) -> List[bytes]:
    """--plan's sample of packed refs, those of annotation files with their drawings (io/coco.with_drawings)."""
    if spec.annotations is None:
        return packed_refs
    return [pack(ref) for ref in io_coco.with_drawings(spec.root, spec.annotations, [unpack(p) for p in packed_refs])]


# --------------------------------------------------------------------------
# Select
# --------------------------------------------------------------------------
def excluded(ref: PairRef, spec: SelectSpec) -> Optional[Outcome]:
    """Why the user's --include/--exclude/--filter/--sample_fraction leave ``ref`` out, or None."""
    return selection.excluded(ref, spec.include, spec.exclude, spec.filter, spec.sample_fraction, spec.label_map)


def max_examples_rank(ref: PairRef) -> int:
    """--max_examples keeps the pairs of smallest rank: 63 bits (Beam's integer coder is signed 64-bit)."""
    return stable_hash(MAX_EXAMPLES_SALT, ref.key) >> 1


def beyond_max_examples(ref: PairRef) -> Outcome:
    return Outcome.for_ref(ref, FILTERED, reasons.FILTERED_BY_MAX_EXAMPLES, "beyond --max_examples")


def with_split(ref: PairRef, spec: SelectSpec) -> Discovered:
    """``ref`` with its split and without its metadata (only selection needs it), or a rejected Outcome."""
    ref, outcome = selection.with_split(ref, spec.split, spec.split_names, spec.split_group)
    return ref if outcome is None else outcome


def select(ref: PairRef, spec: SelectSpec) -> Discovered:
    """Filters, sampling and split of one pair (--max_examples needs every rank: see SelectSubset)."""
    return excluded(ref, spec) or with_split(ref, spec)


# --------------------------------------------------------------------------
# Check
# --------------------------------------------------------------------------
def read_file(path: str, max_bytes: int, what: str, expected_size: int = 0) -> Union[bytes, Rejection]:
    """All bytes of ``path``, or a Rejection (missing, unreadable, empty or too large).

    At most ``max_bytes + 1`` bytes are read, so an oversized file costs no memory. A read that
    returns fewer bytes than asked is the end of the file, so an object costs one read request
    after it is opened (another read, past the end, would be one more request on GCS). A server or
    network error that outlived the storage clients' retries is raised, not turned into a
    rejection (beam_pipeline/streams.py).

    The first read asks for ``expected_size + 1`` bytes when the size is known (the writer knows it
    from validation), else for _FIRST_READ, and each later one for twice as much, up to _CHUNK. A
    read asks for a buffer of the size it asks for, and one far larger than the file (4 MiB for a
    200 KB photo) made the allocator hand back and fault in fresh pages on every file: 2.2 times
    the kernel time of reading the file (docs/benchmarks.md, "Reading a file").
    """
    try:
        handle = streams.open_for_read(path)
    except streams.read_errors() as error:
        return _unusable(path, what, "opened", error)
    try:
        with handle:
            chunks = []
            size = 0
            asked = expected_size + 1 if expected_size > 0 else _FIRST_READ
            while size <= max_bytes:
                wanted = min(asked, max_bytes + 1 - size)
                chunk = handle.read(wanted)
                chunks.append(chunk)
                size += len(chunk)
                # Beam's readers are buffered: a short read is the end of the file. Asking again would cost
                # a request past the end on gs:// (docs/runners.md, "Cost per TB").
                if len(chunk) < wanted:
                    break
                asked = min(max(asked * 2, _FIRST_READ), _CHUNK)
    except streams.read_errors() as error:
        return _unusable(path, what, "read", error)
    if size > max_bytes:
        return Rejection(reasons.FILE_TOO_LARGE, f"{what} file is larger than {max_bytes} bytes")
    if size == 0:
        return Rejection(reasons.EMPTY_FILE, f"{what} file is empty")
    return chunks[0] if len(chunks) == 1 else b"".join(chunks)


def _unusable(path: str, what: str, action: str, error: BaseException) -> Rejection:
    if streams.read_failure(error, path) == streams.MISSING:
        return Rejection(reasons.MISSING_FILE, f"{what} file not found: {path}")
    return Rejection(reasons.UNREADABLE, f"{what} file cannot be {action}: {error}")


def read_files(ref: PairRef, spec: CheckSpec) -> Union[Tuple[bytes, bytes], Rejection]:
    """Both files of ``ref`` (the image only for classification: the mask is ``b""``), or why not."""
    image = read_file(ref.image, spec.max_file_bytes, "image")
    if isinstance(image, Rejection) or spec.task == "classification":
        return image if isinstance(image, Rejection) else (image, b"")
    mask = read_mask(ref, spec)
    return mask if isinstance(mask, Rejection) else (image, mask)


def read_mask(ref: PairRef, spec: CheckSpec, expected_size: int = 0) -> Union[bytes, Rejection]:
    """The mask's bytes: its file's, or the PNG its drawing gives (core/masks/drawn.py), drawn from its file's bytes
    when it has one (a panoptic PNG, an SA-1B JSON): what validation checks and the writer stores alike."""
    if not ref.drawing:
        return read_file(ref.mask, spec.max_file_bytes, "mask", expected_size)
    if ref.drawing == drawn.SPILLED:
        return Rejection(reasons.CHANGED_SINCE_VALIDATION, "its mask is drawn from annotations, which stayed with "
                                                           "validation's spill of its record, and the spill is gone: "
                                                           "run again to draw it")
    source = read_file(ref.mask, spec.max_file_bytes, "mask") if drawn.needs_file(ref.drawing) else b""
    return source if isinstance(source, Rejection) else drawn.drawn_mask(ref.drawing, source, spec.limits)


def spilled_ref(ref: PairRef) -> PairRef:
    """``ref`` once validation spilled its record (the writer copies it from there): a drawn mask's annotations are
    left behind (drawn.SPILLED), so that the records crossing the shuffles after validation, and a shard's group
    in the writer, are as small as for a mask file. A writer that finds the spill gone rejects such a pair as
    ``changed_since_validation``, saying so; the next run draws it again."""
    return dataclasses.replace(ref, drawing=drawn.SPILLED) if ref.drawing else ref


def mask_version(ref: PairRef, file_version) -> Optional[str]:
    """The mask's pre-key for the verdict cache (core/rerun/verdicts.py): ``file_version(path)`` of its file, with
    its drawing's digest when it is drawn (without a file: the digest alone); None when unknown."""
    if not ref.drawing:
        return file_version(ref.mask) if ref.mask else None
    version = file_version(ref.mask) if drawn.needs_file(ref.drawing) else ref.mask
    return None if version is None else f"{version}|{drawn.pre_key(ref.drawing)}"


def check_bytes(ref: PairRef, spec: CheckSpec, image: bytes, mask: bytes) -> Union[ValidPair, Rejection]:
    """Check a pair whose files' bytes are at hand (read_files)."""
    checked = checked_bytes(ref, spec, image, mask)
    return checked if isinstance(checked, Rejection) else checked.pair


def checked_bytes(ref: PairRef, spec: CheckSpec, image: bytes, mask: bytes) -> Union[Checked, Rejection]:
    """:func:`check_bytes`, with the bytes the pair's record stores where validation made them."""
    if spec.task == "classification":
        return checked_classification(ref, image, spec.limits, spec.class_names, spec.label_map)
    return checked_segmentation(ref, image, mask, spec.limits, spec.sample_points_per_class, spec.mask_map)


def stored_files(checked: Checked, mask: bytes, spec: CheckSpec) -> Optional[Tuple[bytes, bytes]]:
    """(image, mask) as the record stores them, for validation's spill: a mask read through a map is converted
    here (``mask``: its file's bytes), as the writer would; None when that fails (the writer reports it)."""
    if checked.mask is not None:
        return checked.image, checked.mask
    converted = stored_mask(mask, spec.limits, spec.mask_map)
    return None if isinstance(converted, Rejection) else (checked.image, converted)


def check(ref: PairRef, spec: CheckSpec) -> Tuple[Union[ValidPair, Rejection], int]:
    """Read both files of ``ref`` (bounded by max_file_bytes) and check them; also the bytes read."""
    read = read_files(ref, spec)
    if isinstance(read, Rejection):
        return read, 0
    return check_bytes(ref, spec, *read), len(read[0]) + len(read[1])


# --------------------------------------------------------------------------
# Record
# --------------------------------------------------------------------------
def record(pair: ValidPair, spec: CheckSpec) -> Union[bytes, Rejection]:
    """The serialized example of :func:`record_pieces`, joined."""
    pieces = record_pieces(pair, spec)
    return pieces if isinstance(pieces, Rejection) else b"".join(pieces)


def record_pieces(pair: ValidPair, spec: CheckSpec) -> Union[Pieces, Rejection]:
    """The serialized example, as pieces (core/example.py): from validation's spill when the pair has one
    (core/rerun/spill.py), else from both files read again and checked against their digests.

    Read from the sources, files that validation converted (to RGB PNG, or 8-bit grey PNG) are
    converted again, without running the checks (core/validation.record_files). The spill holds the record
    itself, so the record's bytes are the same either way. A spill that is gone or damaged
    (io/cache/spill.read_spilled) sends the writer to the sources.
    """
    framed = _spilled(pair)
    if framed is not None:
        return spill.record_pieces(pair, framed)
    return _record_from_sources(pair, spec)


def framed_record_pieces(pair: ValidPair, spec: CheckSpec) -> Union[Pieces, Rejection]:
    """:func:`record_pieces` framed as a TFRecord (core/example.frame_pieces): what the shard writer writes. A
    spilled record that is the very record to write is its spill entry as read, neither copied nor framed again."""
    framed = _spilled(pair)
    if framed is not None and spill.verbatim(pair.spill, pair.copy, pair.ref.source_id):
        return [framed]
    pieces = spill.record_pieces(pair, framed) if framed is not None else _record_from_sources(pair, spec)
    return pieces if isinstance(pieces, Rejection) else frame_pieces(pieces)


def _spilled(pair: ValidPair) -> Optional[bytes]:
    return spill_store.read_spilled(pair.spill) if pair.spill else None


def _record_from_sources(pair: ValidPair, spec: CheckSpec) -> Union[Pieces, Rejection]:
    image = _read_verified(pair.ref.image, pair.image_sha256, "image", spec.max_file_bytes,
                           0 if pair.image_converted else pair.image_stored_bytes)
    if isinstance(image, Rejection):
        return image
    mask = b""
    if spec.task != "classification":
        mask = _verified(read_mask(pair.ref, spec, 0 if pair.mask_converted else pair.mask_stored_bytes),
                         pair.mask_sha256, "mask")
        if isinstance(mask, Rejection):
            return mask
    stored = record_files(pair, image, mask, spec.limits, spec.mask_map)
    return stored if isinstance(stored, Rejection) else pair_example_pieces(pair, *stored)


def _read_verified(path: str, expected_sha256: str, what: str, max_file_bytes: int,
                   expected_size: int) -> Union[bytes, Rejection]:
    """The file's bytes if they are still those validated (``expected_size``: their size when known, else 0)."""
    return _verified(read_file(path, max_file_bytes, what, expected_size), expected_sha256, what)


def _verified(data: Union[bytes, Rejection], expected_sha256: str, what: str) -> Union[bytes, Rejection]:
    if isinstance(data, Rejection):
        return Rejection(reasons.CHANGED_SINCE_VALIDATION, data.detail)
    if hashlib.sha256(data).hexdigest() != expected_sha256:       # the digest validation took (sha256_hex)
        return Rejection(reasons.CHANGED_SINCE_VALIDATION, f"{what} bytes differ from those validated")
    return data
