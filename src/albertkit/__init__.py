"""albertkit: pretrain ALBERT from scratch and fine-tune it with TensorFlow 2 + Keras 3."""

from albertkit.config import TrainerConfig

__all__ = ["TrainerConfig"]
__version__ = "0.1.0"
