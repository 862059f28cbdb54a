"""Splits you can trust (docs/leakage.md): split groups, a perceptual hash per image, near-duplicate pairs found by
bands of the hash, their components, the split each component goes to, and what changed between versions. Pure:
no Beam, no TensorFlow (the composites are in stages/leakage/)."""
