"""The decode loops, one file prefix per mode: `ar*`, `block*`, `verified*`, `seeded*` (block mode on a
structured answer's skeleton)."""
