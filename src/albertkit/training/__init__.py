"""Running a task: the :class:`~albertkit.training.trainer.AlbertTrainer` facade, the loop and
its hooks, the one training step, checkpoints, the run logger and export.

Import the modules directly (``from albertkit.training.trainer import AlbertTrainer``); this
package file imports nothing, so reading a run's metrics never pulls in TensorFlow.
"""
