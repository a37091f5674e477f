"""The model itself: loading a checkpoint, its weights' dtype and experts, vocabulary-wide logits,
and the tensor functions a compiled call runs."""
