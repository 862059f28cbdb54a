"""The trainer's configuration: a dataclass filled from argparse, every option explained in --help."""

import argparse
import dataclasses
from typing import List, Optional, Tuple

from trainer import console


@dataclasses.dataclass(frozen=True)
class TrainConfig:
    data: str                                   # The pipeline's --output folder.
    job_dir: str                                # Checkpoints, logs and the exported model.
    task: str = "auto"                          # auto (from manifest.json) | segmentation | classification
    model: str = "auto"                         # auto (unet / cnn by task) | unet | cnn | keras.applications name
    depth: int = 4
    width: int = 32
    strategy: str = "auto"
    tpu: Optional[str] = None
    epochs: int = 10
    steps_per_epoch: Optional[int] = None      # None: one pass over the train split's records.
    validation_steps: Optional[int] = None     # None: every val image; N: the first N val batches.
    global_batch_size: int = 16
    crop: Tuple[int, int] = (256, 256)
    learning_rate: float = 1e-3
    mixed_precision: str = "auto"
    grad_accum_steps: int = 1
    recompute: bool = False
    bn_momentum: float = 0.99
    bn_recalibration_batches: int = 20          # Batch norm statistics re-estimated on this many batches per epoch.
    class_weights: str = "median_freq"
    loss: str = "ce"
    sampling: str = "auto"                      # auto | shards | repeat_factor | strata (trainer/data/balance.py)
    balance_threshold: Optional[float] = None   # LVIS threshold t of repeat_factor; None: the manifest's
    crop_sampling: str = "class_uniform"
    shuffle_buffer: int = 256                   # Decoded examples (whole images) held for shuffling.
    cache: str = "none"
    backbone: Optional[str] = None              # keras.applications encoder of unet / deeplabv3plus
    weights: str = "none"                       # none | imagenet | a weights file (keras.applications models)
    freeze_backbone_epochs: int = 0
    backbone_learning_rate: Optional[float] = None   # None: --learning_rate
    verify_shards: bool = True
    seed: int = 0
    serving_max_pixels: int = 2 ** 23           # The exported model refuses larger images.
    log_level: str = "info"                     # debug | info | warning | error (trainer/console.py)


def _crop(text: str) -> Tuple[int, int]:
    parts = text.split(",")
    if len(parts) != 2 or not all(p.strip().isdigit() for p in parts):
        # A YAML flow list such as Vertex AI's args: [..., --crop=256,256] splits the item at its comma.
        hint = " (in a YAML [list], quote the item or put one item per line)" if text.strip().isdigit() else ""
        raise argparse.ArgumentTypeError(f"expected H,W such as 256,256, got {text!r}{hint}")
    return int(parts[0]), int(parts[1])


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="python -m trainer",
        description="Train a Keras model on the shards, manifest.json and tf.Transform output written by "
                    "beam_pipeline, and export a serving model that takes encoded image bytes.")
    add = parser.add_argument
    add("--data", required=True, help="The pipeline's output folder (manifest.json, shards, transform/, stats.json).")
    add("--job_dir", required=True, help="Where checkpoints, the backup for resuming, TensorBoard and CSV logs "
                                          "and the exported model go. Restarting with the same --job_dir resumes.")
    add("--task", default="auto", choices=("auto", "segmentation", "classification"),
        help="auto: the task recorded in manifest.json.")
    add("--model", default="auto",
        help="Segmentation: unet (from scratch, or with a pretrained encoder: --backbone) or deeplabv3plus "
             "(DeepLabV3+ on --backbone). Classification: cnn (global-average-pooled head) or a keras.applications "
             "name such as EfficientNetB0 (with --weights). auto: unet or cnn by task.")
    add("--backbone", default=None,
        help="The keras.applications encoder of --model unet or deeplabv3plus: MobileNetV2 (deeplabv3plus's "
             "default), ResNet50, ResNet101, EfficientNetV2B0 or EfficientNetV2S. Its own input preprocessing runs "
             "inside the model, after the dataset's normalisation is undone, so the served model takes raw images.")
    add("--weights", default="none",
        help="Weights of the keras.applications encoder or classifier: none (random, the default), imagenet (Keras "
             "downloads them; one error line where it cannot), or a file of the same application without its top "
             "(a .weights.h5 Keras saved, or keras.applications' _notop.h5). A file that does not fit stops the run "
             "before training.")
    add("--freeze_backbone_epochs", type=int, default=0,
        help="Train the new layers only, the pretrained encoder frozen, for this many epochs; then the encoder "
             "trains too, at --backbone_learning_rate (default 0: it trains from the start).")
    add("--backbone_learning_rate", type=float, default=None,
        help="Adam learning rate of the encoder's variables once it trains (default: --learning_rate); the other "
             "layers keep --learning_rate.")
    add("--depth", type=int, default=4, help="U-Net from scratch: down-sampling steps; CNN: blocks (default 4).")
    add("--width", type=int, default=32, help="Filters of the first block, doubled at every step (default 32); "
                                              "DeepLabV3+: 8x this in ASPP and the decoder (256 for 32).")
    add("--strategy", default="auto", choices=("auto", "default", "mirrored", "multi_worker", "tpu"),
        help="auto picks a reachable TPU, else MultiWorkerMirrored when TF_CONFIG lists several workers, else "
             "Mirrored for several GPUs, else the default strategy; the choice and the reason are logged.")
    add("--tpu", default=None, help="TPU name or grpc://host:port address (with --strategy tpu or auto).")
    add("--epochs", type=int, default=10, help="Epochs (default 10).")
    add("--steps_per_epoch", type=int, default=None,
        help="Training steps per epoch; the train data repeats, so any number works (default: one pass, i.e. the "
             "train split's records, repeat copies included, divided by --global_batch_size).")
    add("--validation_steps", type=int, default=None,
        help="Validation after each epoch runs on whole val images at full resolution, padded as the served model "
             "pads them, in batches of --global_batch_size images of one size; this caps it at the first N batches "
             "(the same ones every epoch). Default: every val image.")
    add("--global_batch_size", type=int, default=16, help="Batch size over all replicas (default 16).")
    add("--crop", type=_crop, default=(256, 256), help="Patch size H,W (default 256,256); for the U-Net a "
                                                        "multiple of 2**depth.")
    add("--learning_rate", type=float, default=1e-3, help="Adam learning rate (default 0.001).")
    add("--mixed_precision", default="auto", choices=("auto", "off", "float16", "bfloat16"),
        help="auto: mixed_bfloat16 on TPU, mixed_float16 on GPU, off on CPU. The output layer stays float32.")
    add("--grad_accum_steps", type=int, default=1, help="Accumulate gradients over this many steps before "
                                                        "applying them (default 1).")
    add("--bn_momentum", type=float, default=0.99,
        help="Batch norm momentum of the U-Net/CNN: the moving mean and variance that inference uses follow the "
             "batches with this weight on their past (default 0.99).")
    add("--bn_recalibration_batches", type=int, default=20,
        help="At the end of every epoch, before validation and checkpoints, re-estimate the batch norm moving "
             "mean and variance for the current weights from this many training batches run forward (\"precise "
             "BN\"; default 20, 0 keeps the moving averages). The moving averages lag behind the weights; "
             "validation and the exported model use these statistics.")
    add("--recompute", action="store_true", help="Recompute encoder activations in the backward pass to save "
                                                 "memory (same gradients, more compute).")
    add("--class_weights", default="median_freq", choices=("median_freq", "inv_sqrt", "none"),
        help="Loss weights per class from stats.json (default median_freq); the ignore label is always masked.")
    add("--loss", default="ce", choices=("ce", "focal"), help="Cross-entropy or focal loss (default ce).")
    add("--sampling", default="auto", choices=("auto", "shards", "repeat_factor", "strata"),
        help="How the train split is read. repeat_factor: every epoch each record r times, r the LVIS repeat factor "
             "of its rarest class from stats.json (stochastic rounding seeded by the seed, the epoch and the record), "
             "the copies shuffled apart (docs/incremental.md). shards: each live record once per epoch, as written "
             "(with the copies of a pipeline run with --balance repeat_factor). strata: "
             "tf.data.Dataset.sample_from_datasets over the strata with the manifest's weights. auto (default): "
             "what the pipeline's --balance asked for (training: repeat_factor, strata: strata, else shards).")
    add("--balance_threshold", type=float, default=None,
        help="The repeat factors' threshold t: classes in fewer than a share t of the train images are repeated. "
             "Default: the pipeline's --balance_threshold, as manifest.json records it.")
    add("--crop_sampling", default="class_uniform", choices=("class_uniform", "uniform"),
        help="class_uniform: centre crops on a stored point of a uniformly chosen class (segmentation default).")
    add("--shuffle_buffer", type=int, default=256,
        help="Decoded examples held in the shuffle buffer, per worker (default 256); memory grows with it, and "
             "training starts once it is full.")
    add("--cache", default="none", help="none, or a folder to cache decoded examples in files (never in memory).")
    add("--no_verify", "--no_verify_shards", dest="verify_shards", action="store_false",
        help="Skip checking the files manifest.json lists: their sizes and the SHA-256 of the small ones "
             "(stats.json, transform/, ...) before the first step, and the shards' SHA-256 in the background "
             "while training reads them (docs/training.md).")
    add("--seed", type=int, default=0, help="Random seed (default 0).")
    add("--serving_max_pixels", type=int, default=2 ** 23,
        help="The exported model refuses (with an error for that request) images with more pixels than this "
             "(default 8388608): its memory grows with the pixels of the images it is sent.")
    console.add_log_level_arguments(parser)
    return parser


def parse_config(argv: Optional[List[str]] = None) -> TrainConfig:
    parser = build_parser()
    args = parser.parse_args(argv)
    if args.bn_recalibration_batches < 0 or not 0.0 <= args.bn_momentum < 1.0:
        parser.error("--bn_recalibration_batches must be >= 0 and --bn_momentum in [0, 1)")
    if min(args.global_batch_size, args.grad_accum_steps, args.epochs, args.shuffle_buffer,
           args.serving_max_pixels) < 1:
        parser.error("--global_batch_size, --grad_accum_steps, --epochs, --shuffle_buffer and --serving_max_pixels "
                     "must be >= 1")
    if args.model == "deeplabv3plus" and not args.backbone:
        args.backbone = "MobileNetV2"
    if args.backbone and args.model not in ("unet", "deeplabv3plus", "auto"):
        parser.error(f"--backbone is the encoder of --model unet or deeplabv3plus, not of --model {args.model}")
    if args.freeze_backbone_epochs < 0 or (args.freeze_backbone_epochs and args.weights == "none"):
        parser.error("--freeze_backbone_epochs needs pretrained weights (--weights imagenet or FILE), and is >= 0")
    if args.weights != "none" and not args.backbone and args.model in ("auto", "unet", "cnn"):
        parser.error(f"--weights is for a keras.applications encoder (--backbone) or classifier, not --model "
                     f"{args.model}")
    for name in ("steps_per_epoch", "validation_steps"):
        if getattr(args, name) is not None and getattr(args, name) < 1:
            parser.error(f"--{name} must be >= 1")
    return TrainConfig(**vars(args))
