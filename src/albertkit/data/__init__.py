"""Data for ALBERT: corpora, tokenizer, pretraining examples and tf.data pipelines.

Modules (imported on demand; only ``pretraining_dataset`` imports TensorFlow):

* ``corpus`` / ``sentences``: raw-text readers and sentence splitting;
* ``tokenizer``: SentencePiece with the ALBERT recipe, saved as a Hugging Face directory;
* ``instances`` / ``masking``: sentence-order pairs and n-gram whole-word masking;
* ``tfrecord`` / ``writer``: sharded, resumable TFRecord preparation in parallel processes;
* ``pretraining_dataset``: the tf.data reader (static or dynamic masking) and a synthetic source;
* ``demo``: the built-in corpus from Python's own documentation;
* ``commands``: the ``train-tokenizer`` and ``prepare-data`` CLI sub-commands.
"""
