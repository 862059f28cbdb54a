"""The networks (U-Net, DeepLabV3+, CNN, keras.applications models), their pretrained encoders and fine-tuning,
and the masked losses and Keras metrics they are trained with."""
