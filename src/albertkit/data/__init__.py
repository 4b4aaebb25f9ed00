"""Data for ALBERT: corpora, tokenizer, pretraining examples and tf.data pipelines.

Modules (imported on demand; only ``pretraining_dataset`` and ``stream`` import TensorFlow
when imported, ``finetune`` when it builds a pipeline):

* ``corpus`` / ``sentences``: raw-text readers and sentence splitting;
* ``tokenizer``: SentencePiece with the ALBERT recipe, saved as a Hugging Face directory;
* ``instances`` / ``masking``: sentence-order pairs and n-gram whole-word masking;
* ``tfrecord`` / ``protobuf`` / ``writer``: sharded, resumable TFRecord preparation in
  parallel processes; ``manifest``: reading a prepared dataset's ``manifest.json``;
* ``tokenizer_match``: the tokenizer that belongs to prepared data or to a model;
* ``stream``: position-addressable training streams (resume at any element);
* ``pretraining_dataset``: the tf.data reader (static or dynamic masking) and a synthetic source;
* ``batching``: micro-batches grouped into optimizer steps;
* ``squad`` / ``glue`` / ``finetune``: fine-tuning readers, features and pipelines;
* ``demo``: the built-in corpus from Python's own documentation.

The ``train-tokenizer`` and ``prepare-data`` commands are :mod:`albertkit.cli.data`.
"""
