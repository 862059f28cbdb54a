"""``python -m trainer``: parse the options, train, export, print a one-line summary."""

import sys

from trainer import console


def main(argv=None) -> int:
    from trainer.training.config import parse_config
    config = parse_config(argv)
    console.configure(config.log_level)         # before TensorFlow is imported
    from trainer.data.artifacts import ArtifactError
    from trainer.models.backbones import ModelError
    from trainer.training.strategy import StrategyError
    from trainer.training.train import train
    from trainer.data.transform_graph import TransformGraphError
    try:
        result = train(config)
    except (ArtifactError, ModelError, StrategyError, TransformGraphError) as error:
        print(f"error: {error}", file=sys.stderr)
        return 2
    history = result["history"]
    exported = (f"exported to {result['export']}" if result["export"] else
                f"wrote to {result['job_dir']} (not the chief)")
    validated = ""
    for name in ("val_mean_iou", "val_accuracy"):
        if history.get(name):
            validated = f"; {name} {history[name][0]:.4f} -> {history[name][-1]:.4f} (whole val images)"
    print(f"trained {len(history['loss'])} epoch(s) under {result['strategy']}; "
          f"loss {history['loss'][0]:.4f} -> {history['loss'][-1]:.4f}{validated}; {exported}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
