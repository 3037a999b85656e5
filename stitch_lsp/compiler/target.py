"""The GPU that the generated code's static launch choices assume: an H100/H200-class part.

Grids are still sized from the SM count at run time (`stitch_sm_count` in the generated
preamble); what is fixed at generation is how a kernel is cut up: a reduction's rows split over
blocks (codegen), an attention's keys split over CTAs (attention). Torch-free.
"""

ASSUMED_SMS = 132
