"""Decoding under a grammar: llguidance's token mask over the logits, and the closer (the shortest
way an answer can still end)."""
