"""Packaging for beam_pipeline and trainer.

``pip install .`` installs both packages (and ``native_stderr`` and ``command_console``, the leaves both consoles
use);
``--setup_file ./setup.py`` ships them to Dataflow or Flink workers, which install ``install_requires``
below.
Exact pins for a launcher or developer machine are in requirements.txt.

The dataset report (``beam_pipeline.report``) is written by the launcher after the job, never on a
worker; it draws its charts itself (report/svg.py) and needs only numpy and Pillow, listed below.
"""

import setuptools

setuptools.setup(
    name="image-corpus-pipeline",
    version="0.1.0",
    description="Raw image corpus -> validated, balanced TFRecord shards (Apache Beam) -> Keras trainer",
    packages=setuptools.find_packages(include=["beam_pipeline", "beam_pipeline.*", "trainer", "trainer.*",
                                               "native_stderr", "command_console"]),
    # The maps shipped with the package (--label_map cityscapes, --color_map camvid, ...): data, not modules.
    package_data={"beam_pipeline.core.masks": ["shipped/*.csv"]},
    python_requires=">=3.11,<3.12",
    install_requires=[
        "apache-beam[gcp]>=2.60,<3",
        "tensorflow-transform>=1.21,<1.22",
        "pyarrow>=15",
        "numpy>=1.26",
        "pillow>=10",
        # The decoders validation uses (beam_pipeline/core/decode.py). Exact: their agreement with
        # TensorFlow's decode ops was measured on these builds (docs/validation.md).
        "imagecodecs==2026.3.6",
        "simplejpeg==1.9.0",
        # COCO layouts: masks drawn from polygons and RLE, annotation files streamed (docs/layouts-coco.md).
        "pycocotools==2.0.11",
        "ijson==3.6.0",
        "google-crc32c>=1.5",
        "crcmod>=1.7",  # Beam warns at import without it
        "boto3>=1.44.8,<2",  # Beam's S3 filesystem (s3:// input and output); exact pins in requirements.txt
    ],
)
