"""What a worker's distance from its parameter servers costs: read by growth (which job a
worker speeds up most) and by migration's score (where a worker runs fastest)."""

# A worker off its parameter servers' node trains at about this fraction of the speed of one
# next to them (Pollux's placements: bert, 4 GPUs, 0.96 packed vs 0.63 spread).
REMOTE = 0.65
