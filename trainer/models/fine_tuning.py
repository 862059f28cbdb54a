"""Fine-tuning a pretrained encoder: its learning rate, and its first epochs frozen.

``--freeze_backbone_epochs N`` trains the new layers (decoder, head) alone for N epochs, the encoder frozen
(its batch norm in inference mode too, as Keras does for a layer that is not trainable); from epoch N+1
on the encoder trains at ``--backbone_learning_rate`` while the rest keeps ``--learning_rate``.

:class:`BackboneAdam` is Adam whose update of an encoder variable takes the step's learning rate times
``backbone_learning_rate / learning_rate``. It is built with every variable, the frozen ones included, so
that unfreezing adds no optimizer state (checkpoints and BackupAndRestore keep one layout).
:class:`FreezeBackbone` sets the encoder's ``trainable`` at the start of each epoch and rebuilds Keras's
train function when it changes, also on a resumed run that starts after epoch N.
"""

import logging

import keras

_LOG = logging.getLogger(__name__)


class BackboneAdam(keras.optimizers.Adam):
    """Adam with ``backbone_learning_rate`` for the variables given to :meth:`build_for`."""

    def __init__(self, learning_rate: float, backbone_learning_rate: float, **kwargs):
        super().__init__(learning_rate, **kwargs)
        self._backbone_ratio = backbone_learning_rate / learning_rate
        self._backbone_indices = frozenset()

    def build_for(self, variables, backbone_variables) -> None:
        """Create the slots of every trainable variable; remember which are the encoder's."""
        self.build(variables)
        self._backbone_indices = frozenset(self._get_variable_index(variable) for variable in backbone_variables)

    def update_step(self, gradient, variable, learning_rate):
        if self._get_variable_index(variable) in self._backbone_indices:
            learning_rate = learning_rate * self._backbone_ratio
        super().update_step(gradient, variable, learning_rate)


class FreezeBackbone(keras.callbacks.Callback):
    """The encoder frozen for the first ``epochs`` epochs, trainable after."""

    def __init__(self, backbone: keras.Model, epochs: int):
        super().__init__()
        self._backbone = backbone
        self._epochs = epochs

    def on_epoch_begin(self, epoch, logs=None):
        trainable = epoch >= self._epochs
        if self._backbone.trainable == trainable:
            return
        self._backbone.trainable = trainable
        self.model.make_train_function(force=True)     # the traced step holds the list of trainable variables
        _LOG.info("epoch %d: the encoder is %s", epoch + 1,
                  "trainable from now on (--backbone_learning_rate)" if trainable
                  else f"frozen for the first {self._epochs} epoch(s) (--freeze_backbone_epochs)")
