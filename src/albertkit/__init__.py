"""albertkit: pretrain ALBERT from scratch and fine-tune it with TensorFlow 2 + Keras 3."""

from albertkit.config import TrainerConfig
from albertkit.trainer import AlbertTrainer

__all__ = ["AlbertTrainer", "TrainerConfig"]
__version__ = "0.1.0"
