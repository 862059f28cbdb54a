"""Folder inputs through Beam's filesystems: the files a glob matches, and the pairs they give.

Paired folders (images and masks joined by --mask_template) and one folder per class are listed
with ``FileSystems.match``, which follows an object store's listing pages; the files become pairs
in core/pairing.py. Only paths and sizes are listed: no file is read here.

:func:`subfolders` lists the folders directly below one (a delimited listing on gs:// and s3://, one
directory read locally), so that a glob with a wildcard folder is matched one subfolder at a time,
on every worker (core/paths.py, ``fan_out_point``).
"""

import os
import posixpath
from typing import Callable, Iterator, List, Optional, Tuple

from apache_beam.io.filesystem import BeamIOError
from apache_beam.io.filesystems import FileSystems

from beam_pipeline.core import paths
from beam_pipeline.core.pairing import class_folder_ref
from beam_pipeline.core.records import PairRef


def match_files(pattern: str) -> Iterator[Tuple[str, int]]:
    """``(path, size)`` of every file matching a glob; nothing when none matches.

    Object stores list a prefix a page at a time (S3 and GCS: 1000 objects); Beam's S3 and GCS
    filesystems follow the pages. A listing that fails (a refused request, a server error that
    outlived the retries) raises BeamIOError: it never reads as "no files".
    """
    for result in FileSystems.match([pattern]):
        for metadata in result.metadata_list:
            yield metadata.path, metadata.size_in_bytes


def folder_exists(folder: str) -> bool:
    """Whether ``folder`` exists or holds any file.

    On gs:// and s3:// a folder is only a key prefix: ``FileSystems.exists`` is False for it
    (with or without a trailing slash) even while files live below it, so a folder there
    exists when a match below it finds one file.
    """
    if FileSystems.exists(folder):
        return True
    try:
        results = FileSystems.match([paths.join(folder, "**")], limits=[1])
    except BeamIOError:
        return False
    return any(result.metadata_list for result in results)


def count_files(folder: str, limit: int) -> int:
    """The files anywhere below ``folder``, counted no further than ``limit + 1`` (Beam's match stops listing
    there: a local walk, or an object store's pages, is not read to its end)."""
    results = FileSystems.match([paths.join(folder, "**")], limits=[limit + 1])
    return sum(len(result.metadata_list) for result in results)


def relative_matches(root: str, pattern: str) -> Iterator[str]:
    """The path relative to ``root`` of every file matching ``pattern`` (itself relative to ``root``)."""
    for path, _ in match_files(paths.join(root, pattern)):
        relative = paths.relative_to(root, path)
        if relative is not None:
            yield relative


def class_folder_pairs(root: str, pattern: str) -> Iterator[PairRef]:
    """A PairRef per image in ``<class>/<file>`` below ``root``, labelled by its folder."""
    for relative in relative_matches(root, pattern):
        yield class_folder_ref(relative, root)


def keyed_images(root: str, pattern: str, mask_of: Callable[[str], str]) -> Iterator[Tuple[str, str]]:
    """(its mask path, image path) of every image matching ``pattern``, relative to ``root``; ``mask_of``: the mask
    path of an image path (a --mask_template rendered, or a layout's rule)."""
    for relative in relative_matches(root, pattern):
        yield mask_of(relative), relative


def keyed_masks(root: str, pattern: str) -> Iterator[Tuple[str, str]]:
    """(mask path, mask path) of every mask matching ``pattern``, relative to ``root``."""
    for relative in relative_matches(root, pattern):
        yield relative, relative


def subfolders(folder: str) -> Optional[List[str]]:
    """The names of the folders directly below ``folder``, sorted; None on a filesystem that cannot say
    (then a glob is matched whole). On object stores a folder is a prefix with an object below it."""
    scheme, rest = paths.split_scheme(folder.rstrip("/"))
    if not scheme:
        try:
            with os.scandir(folder) as entries:
                return sorted(entry.name for entry in entries if entry.is_dir())
        except FileNotFoundError:
            return []
        except OSError as error:
            raise BeamIOError("List operation failed", {folder: error}) from error
    bucket, _, prefix = rest.partition("/")
    prefix = f"{prefix}/" if prefix else ""
    if scheme == "s3://":
        return _s3_subfolders(folder, bucket, prefix)
    if scheme == "gs://":
        return _gcs_subfolders(folder, bucket, prefix)
    return None


def _s3_subfolders(folder: str, bucket: str, prefix: str) -> List[str]:
    from beam_pipeline.io import streams
    client = streams.s3_client(folder)
    names = set()
    for page in client.get_paginator("list_objects_v2").paginate(Bucket=bucket, Prefix=prefix, Delimiter="/"):
        names.update(entry["Prefix"][len(prefix):].rstrip("/") for entry in page.get("CommonPrefixes", []))
    return sorted(names)


def _gcs_subfolders(folder: str, bucket: str, prefix: str) -> List[str]:
    client = FileSystems.get_filesystem(folder)._gcsIO().client      # noqa: SLF001 - Beam's own client and options
    blobs = client.list_blobs(bucket, prefix=prefix, delimiter="/")
    names = set()
    for page in blobs.pages:
        names.update(name[len(prefix):].rstrip("/") for name in page.prefixes)
    return sorted(names)


def class_folder_names(root: str) -> List[str]:
    """The folders directly below ``root`` that hold a file: the class names of a one-folder-per-class input.

    One delimited listing and one single-object match per folder, instead of listing every image
    (a filesystem that cannot list folders is listed whole).
    """
    names = subfolders(root)
    if names is None:
        return sorted({posixpath.dirname(relative) for relative in relative_matches(root, "*/*")} - {""})
    return [name for name in names if any(result.metadata_list for result in FileSystems.match(
        [paths.join(root, f"{name}/*")], limits=[1]))]
