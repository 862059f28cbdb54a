"""Reading ``--label_map`` / ``--color_map`` / ``--reduce_zero_label`` into the config, once, on the launcher.

The map file is read here (any filesystem: local, gs://, s3://) or taken from the maps shipped with the
package, parsed by core/masks/maps.py, and its rows travel to the workers in the check spec: no worker
reads the file. Its SHA-256 is part of the map, so the verdict cache's fingerprint changes with it.
Every problem is one line (CorpusOptionsError).
"""

import dataclasses
from typing import Optional, Tuple

from beam_pipeline.core.masks import maps as lm
from beam_pipeline.core.hashing import sha256_hex
from beam_pipeline.io import files
from beam_pipeline.launcher.config import CorpusConfig, check_classes
from beam_pipeline.launcher.options import CorpusOptionsError


def load_maps(config: CorpusConfig) -> CorpusConfig:
    """``config`` with its mask_map or label_map, and the class count and names a map gives."""
    maps = config.maps
    if not maps.any:
        return config
    if maps.label_map or maps.color_map:
        option = "--color_map" if maps.color_map else "--label_map"
        name = maps.color_map or maps.label_map
        kind = lm.COLORS if maps.color_map else lm.LABELS if config.task == "classification" else lm.VALUES
        data, shipped = _map_bytes(option, name)
        return with_map(config, kind, f"{option} {name}", data, shipped.class_names if shipped else ())
    return _with_rows(config, lm.IDENTITY, "--reduce_zero_label", [], b"", config.class_names)  # alone


def with_map(config: CorpusConfig, kind: str, where: str, data: bytes, class_names=()) -> CorpusConfig:
    """``config`` with the map of a map file's bytes ``data`` (``where`` names it in messages; ``class_names``:
    a shipped map's, or those of an annotation file's categories, launcher/coco.py), and what it gives."""
    try:
        rows = lm.parse_rows(data, kind, where)
    except lm.MapError as error:
        raise CorpusOptionsError(str(error)) from None
    return _with_rows(config, kind, where, rows, data, config.class_names or class_names or lm.names_in_map(rows))


def _with_rows(config: CorpusConfig, kind: str, where: str, rows, data: bytes, names) -> CorpusConfig:
    maps = config.maps
    num_classes = config.limits.num_classes or len(names)
    if not num_classes:
        raise CorpusOptionsError(f"--num_classes is required: {where} gives class ids, not names")
    if names and len(names) != num_classes:
        source = "--class_names" if config.class_names else where
        raise CorpusOptionsError(f"{source} names {len(names)} classes but --num_classes is {num_classes}")
    check_classes(num_classes, config.limits.ignore_label, tuple(names))
    try:
        resolved = lm.resolve_classes(rows, tuple(names), num_classes, where)
    except lm.MapError as error:
        raise CorpusOptionsError(str(error)) from None
    _check_ignore(config, resolved, where)
    config = dataclasses.replace(config, limits=dataclasses.replace(config.limits, num_classes=num_classes),
                                 class_names=tuple(names))
    sha = sha256_hex(data) if data else ""
    if kind == lm.LABELS:
        return dataclasses.replace(config, label_map=lm.label_map(resolved, unmapped=maps.unmapped, source=where,
                                                                  sha256=sha))
    return dataclasses.replace(config, mask_map=lm.mask_map(
        kind, resolved, rows, reduce_zero_label=maps.reduce_zero_label, unmapped=maps.unmapped, source=where,
        sha256=sha))


def _map_bytes(option: str, name: str) -> Tuple[bytes, Optional[lm.ShippedMap]]:
    shipped = lm.SHIPPED.get(name)
    if shipped is not None:
        if shipped.option != option:
            raise CorpusOptionsError(f"{name} is a map for {shipped.option}, not {option}: {shipped.description}")
        return lm.shipped_bytes(name), shipped
    try:
        return files.read_bytes(name), None
    except (OSError, ValueError) as error:
        known = ", ".join(sorted(m for m, s in lm.SHIPPED.items() if s.option == option))
        raise CorpusOptionsError(f"cannot read {option} {name} (a file, or a shipped map: {known}): "
                                 f"{str(error).splitlines()[0] if str(error) else type(error).__name__}") from None


def _check_ignore(config: CorpusConfig, resolved, where: str) -> None:
    """A map that makes pixels ignore needs an ignore label (classification leaves such images out)."""
    if config.task == "classification" or config.limits.ignore_label is not None:
        return
    maps = config.maps
    if maps.reduce_zero_label:
        raise CorpusOptionsError("--reduce_zero_label makes 0 the ignore label, but --ignore_label is -1")
    if maps.unmapped == lm.IGNORE_UNMAPPED:
        raise CorpusOptionsError("--unmapped ignore makes unlisted values the ignore label, but --ignore_label is -1")
    if any(cls == lm.IGNORE for _, cls in resolved):
        raise CorpusOptionsError(f"{where} sends values to ignore, but --ignore_label is -1")
