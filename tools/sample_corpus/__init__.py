"""Deterministic synthetic image corpus for the Beam -> TFRecord pipeline.

Run ``python -m tools.sample_corpus OUT [--seed 0] [--num_pairs 240]
[--num_class_images 400] [--scale 1] [--overwrite]`` or call
:func:`tools.sample_corpus.corpus.write_corpus`.  Every random choice comes from
``numpy.random.default_rng`` seeded with ``seed`` (one stream per item, keyed
by ``[seed, stream, index]``), so the same arguments always produce
byte-identical files.  Only the standard library, numpy and Pillow are used.

Layout written under ``OUT``::

    OUT/segmentation/
        images/<stem>.jpg | <stem>.png   scene images (~60% JPEG q90, ~40% PNG)
        masks/<stem>.png                 8-bit single-channel label masks
        manifest.csv                     image,mask,source,capture_year,split
        README.txt                       the broken inputs and why
    OUT/classification/
        images/<class_name>/<stem>.jpg   Food-101-like, imbalanced classes
        manifest.csv                     image,label,source
        README.txt                       the broken inputs and why
    OUT/outside/escape.jpg               target of the path-escaping manifest row

Segmentation
    ``num_pairs * scale`` distinct valid pairs.  Regular pairs are named
    ``img_000000``...; seven of the valid pairs are valid-but-unusual inputs:
    ``gray_000``/``gray_001`` (greyscale 'L' JPEG images), ``rgba_000``/
    ``rgba_001`` (RGBA PNG images), ``palette_000``/``palette_001`` (masks
    saved as palette 'P' PNGs whose indices are the class ids, with a VOC-like
    colour map, so palette colours differ from the ids) and ``mask16_000``
    (mask saved as a 16-bit 'I;16' PNG holding only class ids / 255).
    Images are 480x360, 512x384 or 640x480 (WxH) street-like scenes drawn from
    shapes and textures with a per-class palette, so pixels correlate with
    labels.  Classes are ``CLASS_NAMES`` (ids 0..7); class 0 (background)
    fills what is left.  The rarest class ``RAREST_CLASS`` (7, sign) is in
    ``max(1, round(0.035 * valid_pairs))`` images (about 3.5%) and holds far
    under 0.5% of the labelled pixels.  About half of the masks (all of the
    unusual ones) carry a 1-2 px band of ``IGNORE_LABEL`` (255) around object
    boundaries.  Splits are exactly 80/10/10 (rounded) over the valid pairs.
    Manifest rows: valid pairs, dup_copy, the repeated row, then the broken
    rows (240 valid pairs -> 252 rows).

Deliberately broken segmentation inputs (fixed stems, each appears once
whatever ``scale`` is; all are listed in manifest.csv unless noted):

    broken_truncated    JPEG image cut to half its bytes (valid mask).
    broken_notimage     images/broken_notimage.jpg holds plain text.
    broken_gif          images/broken_gif.png is really a GIF file.
    broken_bomb         images/broken_bomb.png declares 20000x20000 pixels
                        (mode 'L', all zeros, ~390 KB); its mask is a small
                        valid 480x360 mask.
    broken_sizemismatch image 480x360, mask 320x240.
    broken_badlabel     mask contains label 9 (valid: 0..7 and 255).
    broken_rgbmask      mask saved as an RGB (3-channel) PNG.
    broken_emptymask    mask file of 0 bytes.
    broken_missingmask  listed in manifest.csv; the mask file does not exist.
    orphan_image        images/orphan_image.jpg, no mask, NOT in manifest.csv.
    orphan_mask         masks/orphan_mask.png, no image, NOT in manifest.csv.
    duplicate row       the first train regular pair's row appears twice.
    dup_copy            image and mask are byte-identical copies of the second
                        train regular pair (listed; same metadata as source).
    escape              manifest row whose image is ``../outside/escape.jpg``
                        with mask ``masks/escape.png``.  No image for it lives
                        in images/, so for the paired-folder input form
                        ``masks/escape.png`` is simply one more orphan mask.

Classification
    ``num_class_images * scale`` valid JPEGs (256..384 px per side) spread over
    ``CLASSIFICATION_CLASSES`` with geometric decay (largest class ~10x the
    smallest), plus one valid greyscale JPEG
    (``images/<CLASSIFICATION_CLASSES[2]>/gray_000.jpg``) and two broken files:
    ``images/<CLASSIFICATION_CLASSES[0]>/broken_truncated.jpg`` (JPEG cut to
    half its bytes) and ``images/<CLASSIFICATION_CLASSES[1]>/broken_notimage.jpg``
    (plain text).  All of them are listed in manifest.csv.

The package owns that generator, one module per part (the sections of the former
``tools/sample_corpus.py``):

    spec.py            what the corpus holds: class ids and names, image sizes and formats,
                       file names, the unusual pairs and the broken inputs
    canvas.py          the colours, the seeded random streams and helpers, the canvas that
                       shapes are painted on
    shapes.py          shape masks (rectangles, ellipses, polygons) and texture shade fields
    scenes.py          the street-like segmentation scenes and their ignore bands
    encoding.py        image and mask encoders (fast PNG, palette and 16-bit masks, the bomb)
    files.py           writing files and CSV listings; a folder's file count and bytes
    segmentation.py    OUT/segmentation: valid, unusual and broken pairs, manifest, README
    classification.py  OUT/classification: the plated-food images, manifest, README
    corpus.py          ``write_corpus``: both corpora under OUT
    __main__.py        the command line, ``python -m tools.sample_corpus``
"""
